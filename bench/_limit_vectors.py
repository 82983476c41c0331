"""Vectors for ``bench/limit.py`` and ``bench/hybrid.py``: the bench's corpus embedder (random unit
vectors for documents, the real model for queries), coffer's stored vectors, and the limit's hybrid
recall (one numpy product and the keyword MATCH).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import apsw
import numpy as np
from _limit_corpus import FETCH, LIMIT
from _limit_side import limit_keyword

from coffer_memory import MemoryService
from coffer_memory._config import EmbeddingSettings, env_overrides
from coffer_memory.plugins import get_embedder, hookimpl


def unit_vector(text: str, dimensions: int) -> np.ndarray:
    """A deterministic random unit vector for ``text`` (the bench's corpus vectors)."""
    seed = int.from_bytes(text.encode("utf-8")[:64].ljust(8, b"\0")[:8], "little") ^ len(text)
    v = np.random.default_rng(seed).standard_normal(dimensions).astype(np.float32)
    return v / np.linalg.norm(v)


class CorpusVectors:
    """An embedder whose documents get ``unit_vector``s and whose queries the real model embeds."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.name = f"bench-{real.name}"
        self.model_id = f"{real.model_id}+bench-corpus"
        self.dimensions = int(real.dimensions)

    def available(self) -> bool:
        """The real model's answer."""
        return bool(self.real.available())

    def embed_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Random unit vectors, one per text."""
        return [unit_vector(t, self.dimensions) for t in texts]

    def embed_query(self, text: str) -> Any:
        """The real model's query embedding."""
        return query_vector(self.real, text)


def query_vector(embedder: Any, text: str) -> Any:
    """A query's vector as coffer asks for it: ``embed_query`` when the embedder has one."""
    embed_query = getattr(embedder, "embed_query", None)
    return embed_query(text) if callable(embed_query) else embedder.embed_batch([text])[0]


@functools.cache
def real_embedder(provider: str) -> Any:
    """The installed embedder ``provider`` names (one per process), with the other embedding
    settings the environment gives (``COFFER_EMBEDDING_QUERY_INT8=false`` times the 4-bit graph)."""
    given = env_overrides(os.environ).get("embedding", {})
    embedder = get_embedder(EmbeddingSettings.model_validate({**given, "provider": provider}))
    assert embedder is not None and embedder.available(), f"embedder {provider} is not installed"
    return embedder


class _BenchEmbedders:
    """Registers ``bench-<provider>`` (``CorpusVectors``) beside the real embedders."""

    def __init__(self, providers: Sequence[str], embed_corpus: bool) -> None:
        self.providers = providers
        self.embed_corpus = embed_corpus

    @hookimpl
    def register_embedders(self, register: Callable[[str, Any], None]) -> None:
        for provider in self.providers:
            if self.embed_corpus:
                register(f"bench-{provider}", lambda _s, p=provider: real_embedder(p))
            else:
                register(f"bench-{provider}", lambda _s, p=provider: CorpusVectors(real_embedder(p)))


def coffer_vectors(index_db: Path) -> np.ndarray:
    """Every vector coffer stored (all stores), as one matrix: the limit scans the same ones."""
    conn = apsw.Connection(str(index_db), flags=apsw.SQLITE_OPEN_READONLY)
    conn.enable_load_extension(True)
    import sqlite_vec

    conn.load_extension(sqlite_vec.loadable_path())
    try:
        tables = [str(r[0]) for r in conn.execute("SELECT table_name FROM vec_stores")]
        blobs = [bytes(r[0]) for t in tables for r in conn.execute(f"SELECT embedding FROM {t}")]
    finally:
        conn.close()
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1).copy()


def coffer_hybrid(svc: MemoryService, repo: Path, query: str) -> None:
    """One hybrid recall that embeds its query (the query cache is cleared first)."""
    svc.retrieval.clear_query_cache()
    svc.recall(query, cwd=repo, mode="hybrid", limit=LIMIT)


def limit_hybrid(
    conn: apsw.Connection, matrix: np.ndarray, n: int, embedder: Any, query: str
) -> list[tuple[int, str]]:
    """Embed the query, one dot product over the unit vectors, the keyword MATCH, both lists' texts."""
    qvec = query_vector(embedder, query)
    # einsum, not BLAS (`@`): OpenBLAS's spinning threads made the product 0.1 or 15 ms by
    # the machine's load; einsum's own loop is steady (coffer uses it too).
    scores = np.einsum("ij,j->i", matrix, np.asarray(qvec, dtype=np.float32))
    top = np.argpartition(-scores, FETCH)[:FETCH]
    nearest = [int(i) % n + 1 for i in top[np.argsort(-scores[top])]]  # a text per vector
    keyword = limit_keyword(conn, query)
    marks = ",".join("?" * LIMIT)
    texts = dict(
        conn.execute(f"SELECT rowid, text FROM documents_fts WHERE rowid IN ({marks})", nearest[:LIMIT])
    )
    return keyword + [(i, texts[i]) for i in nearest[:LIMIT] if i in texts]
