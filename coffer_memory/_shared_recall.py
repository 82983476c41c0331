"""Keyword and vector recall answered by a shared index backend (``[index] backend = "postgresql"``).

An adapter around ``KnowledgeRetrieval``: grep and everything else stay as they are (on the
machine-local index); keyword search, and with it hybrid's keyword half, asks the backend, so a
write made through any process is found by every other at once. Vector search (``vector`` mode
and hybrid's vector half) asks the backend too when it keeps vectors (``backend.vectors``: the
query is embedded here, the nearest rows of this embedder's model are found there); otherwise it
stays on the local index. The modes and their fusion are ``KnowledgeRetrieval``'s, unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict

import attrs

from ._config import Settings
from ._fusion import rrf_merge
from ._index.coverage import by_coverage
from ._index.db import IndexDB
from ._index.filters import FactFilter
from ._index.fts import keyword_terms
from ._index.vec import VecIndex
from ._models import MemoryHit
from ._query_vectors import Nearest, Scans
from ._recall_rows import DocRow
from ._retrieval import KnowledgeRetrieval, MakeHits, Scored
from ._store.paths import StorePaths
from .plugins.hookspecs import BackendHit, GrepBackend, IndexBackend, Vector


class _Bounds(TypedDict):
    tags: Sequence[str]
    since: datetime | None
    until: datetime | None


def _bounds(where: FactFilter | None) -> _Bounds:
    """A filter as the backend's keyword arguments (tags, time bounds)."""
    if where is None:
        return {"tags": (), "since": None, "until": None}
    return {"tags": where.tags, "since": where.since, "until": where.until}


class SharedRetrieval(KnowledgeRetrieval):
    """``KnowledgeRetrieval`` whose keyword search runs on ``backend``."""

    def __init__(
        self,
        db: IndexDB,
        settings: Settings,
        grep: GrepBackend,
        vectors: VecIndex | None,
        backend: IndexBackend,
    ) -> None:
        super().__init__(db, settings, grep, vectors)
        self.backend = backend

    def keyword(
        self, sp: StorePaths, query: str, limit: int, where: FactFilter | None = None
    ) -> list[MemoryHit]:
        """The backend's keyword hits of one store, best first, one per document."""
        return self._search([sp], query, limit, where)[0]

    def keyword_fused(
        self, paths: Sequence[StorePaths], query: str, limit: int, *, sized: bool = False
    ) -> list[MemoryHit]:
        """``rrf_merge`` of each store's keyword hits, each list lending to session neighbours as
        the SQLite path does (the neighbours are found in the local index; ``sized`` is not used:
        each of those reads checks the index file itself)."""
        found = self._search(paths, query, limit, None)
        lent = [self._lend(sp, "keyword", hits, limit, None) for sp, hits in zip(paths, found, strict=True)]
        return rrf_merge(lent, limit)

    def _keyword_lists(
        self,
        present: Sequence[StorePaths],
        query: str,
        limit: int,
        where: FactFilter | None,
        kept: dict[Any, Any],
    ) -> list[list[MemoryHit]]:
        """Each store's backend ``keyword`` hits (the local word index is not the one searched)."""
        return [self.keyword(sp, query, limit, where) for sp in present]

    def _search(
        self, paths: Sequence[StorePaths], query: str, limit: int, where: FactFilter | None
    ) -> list[list[MemoryHit]]:
        found = self.backend.search([sp.name for sp in paths], query, limit, **_bounds(where))
        terms = keyword_terms(query)
        return [
            [self._backend_hit(sp, h) for h in self._by_coverage(terms, found.get(sp.name, []))]
            for sp in paths
        ]

    def _scans(self, present: Sequence[StorePaths], k: int) -> Scans:
        """The local matrices only when the backend keeps no vectors (else it answers)."""
        return {} if self.backend.vectors else super()._scans(present, k)

    def _vector_lists(
        self,
        stores: Sequence[StorePaths],
        qvec: Vector,
        limit: int,
        where: FactFilter | None,
        scanned: Nearest,
        kept: dict[Any, Any],
    ) -> dict[str, list[MemoryHit]]:
        """The backend's nearest documents of each store when it keeps vectors, else the local ones."""
        if not self.backend.vectors or self.vectors is None:
            return super()._vector_lists(stores, qvec, limit, where, scanned, kept)
        return self._backend_nearest(stores, qvec, limit, where)

    def _vector_found(
        self,
        stores: Sequence[StorePaths],
        qvec: Vector,
        limit: int,
        where: FactFilter | None,
        scanned: Nearest,
        kept: dict[Any, Any],
    ) -> tuple[dict[str, Scored], MakeHits]:
        """``_vector_lists``'s as (id, score) pairs, and the call making hits of chosen pairs (the
        first hit of an id, with the pair's score)."""
        if not self.backend.vectors or self.vectors is None:
            return super()._vector_found(stores, qvec, limit, where, scanned, kept)
        found = self._backend_nearest(stores, qvec, limit, where)
        first: dict[str, dict[str, MemoryHit]] = {store: {} for store in found}
        for store, hits in found.items():
            for hit in hits:
                first[store].setdefault(hit.id, hit)

        def make(chosen: Mapping[str, Scored]) -> dict[str, list[MemoryHit]]:
            return {
                store: [attrs.evolve(first[store][i], score=score) for i, score in pairs]
                for store, pairs in chosen.items()
            }

        return {store: [(h.id, h.score) for h in hits] for store, hits in found.items()}, make

    def _backend_nearest(
        self, stores: Sequence[StorePaths], qvec: Vector, limit: int, where: FactFilter | None
    ) -> dict[str, list[MemoryHit]]:
        """The backend's nearest documents of each store, of this embedder's model."""
        assert self.vectors is not None
        model = self.vectors.embedder.model_id
        out = {}
        for sp in stores:
            found = self.backend.nearest([sp.name], qvec, model, limit, **_bounds(where))
            out[sp.name] = [self._backend_hit(sp, h) for h in found.get(sp.name, [])]
        return out

    def _by_coverage(self, terms: list[str], hits: Sequence[BackendHit]) -> list[BackendHit]:
        """The same coverage re-scoring as the SQLite keyword path (``_index/coverage.py``), so both
        backends put a hit holding more of the question first."""
        ranked = [(i, -h.score) for i, h in enumerate(hits)]  # lower is better, as bm25's
        texts = {i: ("", h.text, "") for i, h in enumerate(hits)}
        return [attrs.evolve(hits[i], score=-s) for i, s in by_coverage(self.db.conn, terms, ranked, texts)]

    def _backend_hit(self, sp: StorePaths, hit: BackendHit) -> MemoryHit:
        doc = DocRow(hit.id, str(Path(sp.root, hit.path)), hit.title, "", hit.updated_at)
        return self._hit(sp, doc, hit.text, hit.score)
