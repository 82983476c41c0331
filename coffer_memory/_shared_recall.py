"""Keyword recall answered by a shared index backend (``[index] backend = "postgresql"``).

An adapter around ``KnowledgeRetrieval``: grep, vectors and everything else stay as they are
(on the machine-local index); keyword search, and with it hybrid's keyword half, asks the
backend, so a write made through any process is found by every other at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs

from ._config import Settings
from ._index.coverage import by_coverage
from ._index.db import IndexDB
from ._index.filters import FactFilter
from ._index.fts import keyword_terms
from ._index.vec import VecIndex
from ._models import MemoryHit
from ._retrieval import KnowledgeRetrieval, _DocRow, rrf_merge
from ._store.paths import StorePaths
from .plugins.hookspecs import BackendHit, GrepBackend, IndexBackend


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

    def keyword_fused(self, paths: Sequence[StorePaths], query: str, limit: int) -> list[MemoryHit]:
        """``rrf_merge`` of each store's keyword hits."""
        return rrf_merge(self._search(paths, query, limit, None), limit)

    def _search(
        self, paths: Sequence[StorePaths], query: str, limit: int, where: FactFilter | None
    ) -> list[list[MemoryHit]]:
        found = self.backend.search(
            [sp.name for sp in paths],
            query,
            limit,
            tags=where.tags if where is not None else (),
            since=where.since if where is not None else None,
            until=where.until if where is not None else None,
        )
        terms = keyword_terms(query)
        return [[self._backend_hit(sp, h) for h in self._by_coverage(terms, found.get(sp.name, []))] for sp in paths]

    def _by_coverage(self, terms: list[str], hits: Sequence[BackendHit]) -> list[BackendHit]:
        """The same coverage re-scoring as the SQLite keyword path (``_index/coverage.py``), so both
        backends put a hit holding more of the question first."""
        ranked = [(i, -h.score) for i, h in enumerate(hits)]  # lower is better, as bm25's
        texts = {i: ("", h.text, "") for i, h in enumerate(hits)}
        return [attrs.evolve(hits[i], score=-s) for i, s in by_coverage(self.db.conn, terms, ranked, texts)]

    def _backend_hit(self, sp: StorePaths, hit: BackendHit) -> MemoryHit:
        doc = _DocRow(hit.id, str(Path(sp.root, hit.path)), hit.title, "", hit.updated_at)
        return self._hit(sp, doc, hit.text, hit.score)
