"""KnowledgeRetrieval: runs a mode over each store and fuses the stores by RRF (k=60)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from . import vocabulary
from ._config import Settings
from ._errors import InvalidInput, check_limit, check_query
from ._fusion import (
    NEIGHBOUR_DEPTH,
    NEIGHBOUR_NEXT_SHARE,
    NEIGHBOUR_PREV_SHARE,
    even_turns,
    fuse_modes,
    fused_scores,
    lend,
    rrf_disjoint,
    rrf_merge,
    rrf_order,
)
from ._grep_recall import GrepRecall
from ._index.db import IndexDB
from ._index.filters import FactFilter
from ._index.fts import best_documents, documents_of, search_chunks
from ._index.keys import chunk_id
from ._index.session import neighbours
from ._index.snapshot import reading
from ._index.vec import VecIndex
from ._models import RETRIEVAL_MODES, MemoryHit, RecallResult, RetrievalMode, Target
from ._query_vectors import Nearest, QueryVectors, Rows, Scans
from ._recall_hits import _file_path as _file_path  # where tests have always found it
from ._recall_hits import make_hit, rescored
from ._recall_rows import KEPT_NEIGHBOURS, DocRow, doc_row, doc_rows, fused_fronts, with_sessions
from ._store.looks import Looks
from ._store.paths import StorePaths
from ._vector_rows import chunk_texts, nearest_documents

if TYPE_CHECKING:  # the plugin surface imports pluggy, which a keyword recall does without
    from .plugins.hookspecs import GrepBackend, Vector

log = logging.getLogger("coffer_memory._retrieval")
# A store's (id, score) pairs, best first; and the call making hits of chosen pairs by store.
Scored = list[tuple[str, float]]
MakeHits = Callable[[Mapping[str, Scored]], dict[str, list[MemoryHit]]]
# The modes in which a hit lends score to its session neighbours (``_fusion.lend``).
NEIGHBOUR_MODES = ("keyword", "vector", "hybrid")
MAX_QUERY_CHARS = vocabulary.MAX_QUERY_CHARS
MAX_LIMIT = vocabulary.MAX_RECALL_LIMIT


class KnowledgeRetrieval:
    """Owns the mode decisions of recall: grep, keyword, and (with an embedder) vector/hybrid."""

    def __init__(
        self, db: IndexDB, settings: Settings, grep: GrepBackend, vectors: VecIndex | None = None
    ) -> None:
        self.db = db
        self.settings = settings
        self.grep = grep
        self.vectors = vectors
        self._pool: ThreadPoolExecutor | None = None
        self.query_vectors = QueryVectors(vectors, self._fanout_pool)
        self.side: Callable[[], KnowledgeRetrieval | None] | None = None
        """Returns a retrieval on a second (reader) connection for searching stores in parallel,
        or None; set by the service, which owns that connection."""

    def clear_query_cache(self) -> None:
        """Forget the kept query vectors (benchmarks use it so every query pays its embedding)."""
        self.query_vectors.clear()

    def _embed_query(self, query: str) -> Vector | None:
        """The query's vector (kept for recent queries), or None when the embedder cannot run."""
        return self.query_vectors.soon(query, background=False)()[0]

    def begin(self, query: str, mode: str) -> None:
        """Start embedding the query of a hybrid recall on the worker thread, before the caller
        brings the stores' indexes up to date (``QueryVectors.start``); nothing for another mode.
        ``query`` and ``mode`` have passed ``check``."""
        if mode == "hybrid":
            self.query_vectors.start(query)

    def check(self, query: str, mode: str | None, limit: int) -> RetrievalMode:
        """Validate recall arguments; return the mode to run."""
        check_query(query, MAX_QUERY_CHARS)
        check_limit(limit, MAX_LIMIT)
        chosen = mode or self.settings.memory.default_mode
        if chosen not in RETRIEVAL_MODES:
            raise InvalidInput(f"unknown mode {chosen!r}; one of {', '.join(RETRIEVAL_MODES)}", field="mode")
        if chosen not in self.settings.memory.retrieval_modes:
            raise InvalidInput(
                f"mode {chosen!r} is not enabled (retrieval_modes = {self.settings.memory.retrieval_modes})",
                field="mode",
                enabled=list(self.settings.memory.retrieval_modes),
            )
        return chosen

    def recall(
        self,
        paths: Sequence[StorePaths],
        query: str,
        mode: str | None = None,
        limit: int = 10,
        where: FactFilter | None = None,
        *,
        present: Sequence[StorePaths] | None = None,
        checked: bool = False,
        targets: tuple[Target, ...] = (),
        looks: Looks | None = None,
    ) -> RecallResult:
        """Search every store in ``paths`` with one mode and fuse the per-store lists.

        ``where`` (tags, time) is applied inside each store's index query, before the limit.
        ``present``: those of ``paths`` whose folder exists, when the caller has just looked.
        ``checked``: the caller has just passed ``query``, ``mode`` and ``limit`` through ``check``
        (``mode`` is what it returned). ``targets`` go into the result as they are. ``looks``:
        what the caller's read saw before (``_store/looks.py``).
        """
        # ``mode`` as it is when checked (``typing.cast`` is a call)
        chosen: RetrievalMode = mode if checked else self.check(query, mode, limit)  # type: ignore[assignment]
        if present is None:
            present = [sp for sp in paths if sp.root.is_dir()]
        if chosen == "hybrid":
            result = self._hybrid(paths, present, query, limit, where)
            return attrs.evolve(result, targets=targets) if targets else result
        if chosen == "grep":
            lists = self._grep_stores(present, query, limit, where)
            return RecallResult(
                hits=tuple(rrf_merge(lists, limit)),
                mode=chosen,
                fallback=False,
                stores=tuple(p.name for p in paths),
                targets=targets,
            )
        qvec = self._embed_query(query) if chosen == "vector" else None
        if chosen == "keyword" and where is None:
            # One MATCH for every store: cheaper than a query (or a thread) per store. (A filter
            # is a per-store rowid set: filtered recalls keep a query per store.)
            merged = self.keyword_fused(
                present, query, limit, sized=looks is not None and looks.index_checked
            )
            return RecallResult(
                hits=tuple(merged),
                mode=chosen,
                fallback=False,
                stores=tuple([p.name for p in paths]),
                targets=targets,
            )
        side = self.side() if len(present) > 1 and self.side is not None else None
        if side is not None:
            # The second store is searched on a reader connection in a worker thread while this
            # thread searches the first: SQLite, sqlite-vec and the embedder release the GIL.
            other = self._fanout_pool().submit(
                side.search_store, present[1], chosen, query, qvec, limit, where
            )
            results = [self.search_store(present[0], chosen, query, qvec, limit, where), other.result()]
            results += [self.search_store(sp, chosen, query, qvec, limit, where) for sp in present[2:]]
        else:
            results = [self.search_store(sp, chosen, query, qvec, limit, where) for sp in present]
        lists = [hits for hits, _ in results]
        fallback = any(fell_back for _, fell_back in results)
        merged = rrf_merge(lists, limit)
        return RecallResult(
            hits=tuple(merged),
            mode=chosen,
            fallback=fallback,
            stores=tuple(p.name for p in paths),
            targets=targets,
        )

    def _hybrid(
        self,
        paths: Sequence[StorePaths],
        present: Sequence[StorePaths],
        query: str,
        limit: int,
        where: FactFilter | None,
    ) -> RecallResult:
        """Hybrid over the stores: ``search_store``'s answers, with the query embedded on the
        worker thread while this one runs every store's keyword search."""
        # The worker also scans the stores' matrices once the vector is there (no filter: a
        # filtered scan is a query of the index).
        scans = (lambda: self._scans(present, limit * 2 * 4)) if where is None else None
        soon = self.query_vectors.soon(query, background=True, scans=scans)
        vectors = self.vectors
        lists: list[list[MemoryHit]] = []
        # No read transaction is open while the vector is awaited (a remote embedder's HTTP call):
        # a snapshot held that long keeps SQLite from checkpointing the WAL past it. The stores'
        # vector rows are read together, those of earlier recalls taken from ``kept``.
        with reading(self.db) as kept:
            keyword = self._keyword_lists(present, query, limit * 2, where, kept)
        # What the fusion takes of the keyword hits, made while the vector is awaited.
        keyword_scores = [[(h.id, h.score) for h in words] for words in keyword]
        qvec, nearest = soon()
        with reading(self.db) as kept:
            searched = [
                sp
                for sp in present
                if qvec is not None and vectors is not None and vectors.existing_table(sp.name) is not None
            ]
            found, make = (
                self._vector_found(searched, qvec, limit * 2, where, nearest, kept)
                if qvec is not None
                else ({}, None)
            )
            fused: dict[str, Scored] = {}
            for sp, words_scored in zip(present, keyword_scores, strict=True):
                if sp.name in found:
                    # Without a fact of an agent session in the store ``_lend`` keeps the first
                    # ``limit``: no more are made hits.
                    many = limit * 2 if with_sessions(self.db, [sp.name], kept) else limit
                    fused[sp.name] = fused_scores(words_scored, found[sp.name], many)
            # Hits are made of the fused vector hits only (their texts read in one query); a hit
            # in both lists is the vector list's, as in ``fuse_modes``.
            near = {store: {i for i, _ in pairs} for store, pairs in found.items()}
            made = (
                make(
                    {store: [(i, s) for i, s in pairs if i in near[store]] for store, pairs in fused.items()}
                )
                if make is not None
                else {}
            )
            for sp, words in zip(present, keyword, strict=True):
                pairs = fused.get(sp.name)
                if pairs is None:  # keyword answers, and says so
                    lists.append(
                        self._lend(sp, "keyword", self.keyword(sp, query, limit, where), limit, where)
                    )
                    continue
                of_vector = {h.id: h for h in made[sp.name]}
                of_words: dict[str, MemoryHit] = {}
                for hit in words:
                    of_words.setdefault(hit.id, hit)
                hits = [of_vector[i] if i in of_vector else rescored(of_words[i], s) for i, s in pairs]
                lists.append(self._lend(sp, "hybrid", hits, limit, where, kept))
        return RecallResult(
            hits=tuple(rrf_merge(lists, limit)),
            mode="hybrid",
            fallback=len(found) < len(present),
            stores=tuple(p.name for p in paths),
        )

    def _scans(self, present: Sequence[StorePaths], k: int) -> Scans:
        """The in-memory matrices of the stores that have one, with the ``k`` rows ``_vector``
        asks them for first."""
        if self.vectors is None:
            return {}
        held = {sp.name: self.vectors.matrix(sp.name) for sp in present}
        return {store: (matrix, k) for store, matrix in held.items() if matrix is not None}

    def _keyword_lists(
        self,
        present: Sequence[StorePaths],
        query: str,
        limit: int,
        where: FactFilter | None,
        kept: dict[Any, Any],
    ) -> list[list[MemoryHit]]:
        """Each store's ``keyword`` hits; without a filter from one word-index MATCH for all the
        stores, with the rows an unchanged index gave earlier recalls (``kept``, the dict of the
        caller's ``snapshot.reading``, as ``keyword_fused``)."""
        if where is not None:  # a filter is a per-store rowid set: a query per store
            return [self.keyword(sp, query, limit, where) for sp in present]
        found = best_documents(self.db, [sp.name for sp in present], query, limit, kept)
        docs = doc_rows(self.db, {store: list(best) for store, best in found.items()}, kept)
        return [
            [
                self._hit(sp, docs[sp.name, i], text, score)
                for i, (text, score) in found[sp.name].items()
                if (sp.name, i) in docs
            ]
            for sp in present
        ]

    def search_store(
        self,
        sp: StorePaths,
        chosen: str,
        query: str,
        qvec: Vector | None,
        limit: int,
        where: FactFilter | None = None,
    ) -> tuple[list[MemoryHit], bool]:
        """One store's hits in one mode, and whether it fell back to keyword (no vectors there)."""
        if chosen == "grep":
            return self._grep(sp, query, limit, where), False
        if chosen == "keyword":
            return self._lend(sp, chosen, self.keyword(sp, query, limit, where), limit, where), False
        if qvec is None or self.vectors is None or self.vectors.existing_table(sp.name) is None:
            # vectors unavailable here: keyword answers, and says so
            return self._lend(sp, "keyword", self.keyword(sp, query, limit, where), limit, where), True
        if chosen == "vector":
            with reading(self.db) as kept:  # rows of earlier recalls, as in ``_hybrid``
                hits = self._vector_lists([sp], qvec, limit, where, {}, kept)[sp.name]
                return self._lend(sp, chosen, hits, limit, where, kept), False
        fused = fuse_modes(
            self.keyword(sp, query, limit * 2, where), self._vector(sp, qvec, limit * 2, where), limit * 2
        )
        return self._lend(sp, chosen, fused, limit, where), False

    def _lent(
        self, store: str, scored: Sequence[tuple[str, float]], kept: dict[Any, Any] | None = None
    ) -> list[tuple[str, float]] | None:
        """``scored`` (id, score; best first) re-ranked by what each lends its session neighbours
        (``_fusion.lend``), neighbours missing from it included; None when none of them has one.
        With ``kept`` (``snapshot.reading``'s dict) the neighbours of ids asked before come from it."""
        if not scored or (NEIGHBOUR_NEXT_SHARE <= 0 and NEIGHBOUR_PREV_SHARE <= 0):
            return None
        ids = [i for i, _ in scored]
        if kept is None:
            near = neighbours(self.db, store, ids, NEIGHBOUR_DEPTH)
        else:
            known: dict[tuple[str, str], list[tuple[str, int]]] = kept.setdefault(KEPT_NEIGHBOURS, {})
            missing = [i for i in ids if (store, i) not in known]
            if missing:
                found = neighbours(self.db, store, missing, NEIGHBOUR_DEPTH)
                known.update({(store, i): found.get(i, []) for i in missing})
            near = {i: known[store, i] for i in ids if known[store, i]}
        return lend(scored, near) if near else None

    def _lend(
        self,
        sp: StorePaths,
        mode: str,
        hits: Sequence[MemoryHit],
        limit: int,
        where: FactFilter | None,
        kept: dict[Any, Any] | None = None,
    ) -> list[MemoryHit]:
        """``hits`` re-ranked by ``_lent`` (neighbours that ``where`` rules out are left out), the
        first ``limit``; the same list cut to ``limit`` when no hit has a session. With ``kept``
        (``snapshot.reading``'s dict) rows read before come from it, and a store without a fact of
        an agent session is not asked for neighbours."""
        lends = mode in NEIGHBOUR_MODES and (kept is None or with_sessions(self.db, [sp.name], kept))
        ranked = self._lent(sp.name, [(h.id, h.score) for h in hits], kept) if lends else None
        if ranked is None:
            return list(hits[:limit])
        held = {h.id: h for h in hits}
        out: list[MemoryHit] = []
        start = 0
        while start < len(ranked) and len(out) < limit:
            # Rows only for the neighbours that can still make the list (more only when the
            # filter rules some out).
            part = ranked[start : start + limit - len(out)]
            start += len(part)
            new = [i for i, _ in part if i not in held]
            if kept is not None and where is None:
                rows = doc_rows(self.db, {sp.name: new}, kept) if new else {}
                docs = {i: row for (_, i), row in rows.items()}
                texts = chunk_texts(self.db, [chunk_id(sp.name, i, 0) for i in docs], kept)
            else:
                docs = self._docs(sp.name, ids=new, where=where) if new else {}
                texts = self._chunk_texts([chunk_id(sp.name, i, 0) for i in docs])
            for fact_id, score in part:
                if fact_id in held:
                    out.append(rescored(held[fact_id], score))
                elif fact_id in docs:
                    text = texts.get(chunk_id(sp.name, fact_id, 0), "")
                    out.append(self._hit(sp, docs[fact_id], text, score))
        return out

    def _fanout_pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="coffer-recall")
        return self._pool

    def close(self) -> None:
        """Stop the fan-out worker thread, if a recall started it."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _vector(
        self,
        sp: StorePaths,
        qvec: Vector,
        limit: int,
        where: FactFilter | None = None,
        scanned: Rows | None = None,
    ) -> list[MemoryHit]:
        """The store's nearest documents (``_vector_lists`` of one store)."""
        with reading(self.db) as kept:
            return self._vector_lists([sp], qvec, limit, where, {sp.name: scanned} if scanned else {}, kept)[
                sp.name
            ]

    def _vector_lists(
        self,
        stores: Sequence[StorePaths],
        qvec: Vector,
        limit: int,
        where: FactFilter | None,
        scanned: Nearest,
        kept: dict[Any, Any],
    ) -> dict[str, list[MemoryHit]]:
        """Each store's nearest documents, by store (``_vector_found``'s, every one made a hit)."""
        scores, make = self._vector_found(stores, qvec, limit, where, scanned, kept)
        return make(scores)

    def _vector_found(
        self,
        stores: Sequence[StorePaths],
        qvec: Vector,
        limit: int,
        where: FactFilter | None,
        scanned: Nearest,
        kept: dict[Any, Any],
    ) -> tuple[dict[str, Scored], MakeHits]:
        """Each store's nearest documents as (id, score), best first, by store, and the call that
        makes hits of the (id, score) pairs it is given, with their texts read then (for every
        store in one query): a hybrid recall makes hits only of those its fusion keeps.

        ``scanned``: a store's first ``limit * 4`` nearest rows, when the worker found them beside
        the embedding (``_scans``). The rows of every store's documents are read together, those
        of earlier recalls taken from ``kept`` (``snapshot.reading``'s dict)."""
        assert self.vectors is not None
        best = {
            sp.name: nearest_documents(self.vectors, sp.name, qvec, limit, where, scanned.get(sp.name))
            for sp in stores
        }
        docs = doc_rows(self.db, {store: list(found) for store, found in best.items()}, kept)
        scores = {
            store: [(doc_id, score) for doc_id, (_, score) in found.items() if (store, doc_id) in docs][
                :limit
            ]
            for store, found in best.items()
        }
        of_name = {sp.name: sp for sp in stores}

        def make(chosen: Mapping[str, Scored]) -> dict[str, list[MemoryHit]]:
            texts = chunk_texts(
                self.db, [best[store][i][0] for store, pairs in chosen.items() for i, _ in pairs], kept
            )
            return {
                store: [
                    self._hit(of_name[store], docs[store, i], texts.get(best[store][i][0], ""), score)
                    for i, score in pairs
                ]
                for store, pairs in chosen.items()
            }

        return scores, make

    def _chunk_texts(self, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.db.rows(
            f"SELECT c.id, coalesce(f.written, f.text) FROM chunks c JOIN documents_fts f ON f.rowid = c.rowid WHERE c.id IN ({marks})",
            tuple(ids),
        )
        return {str(r[0]): str(r[1]) for r in rows}

    def _docs(self, store: str, ids: Sequence[str], where: FactFilter | None = None) -> dict[str, DocRow]:
        """The rows of the documents ``ids`` of ``store`` (those ``where`` keeps), by id."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        only, only_params = where.sql("d") if where is not None else ("1", [])
        rows = self.db.rows(
            f"SELECT id, path, title, coalesce(description, ''), updated_at FROM documents d WHERE kind = 'memory' AND resource_name = ? AND id IN ({marks}) AND {only}",
            (store, *ids, *only_params),
        )
        out = {}
        home = f"{self.db.home}/"  # what str(db.file(key)) gives, without a Path per row
        for r in rows:
            doc = doc_row(home, r)
            out[doc.id] = doc
        return out

    def _key(self, path: str) -> str:
        """``db.key`` of an absolute path, by slicing when it lies under the home (a grep names
        thousands of files; a Path per file was a tenth of a grep recall)."""
        home = f"{self.db.home}/"
        if path.startswith(home) and "/." not in path and "//" not in path:
            return path[len(home) :]
        return self.db.key(Path(path))

    def _hit(self, sp: StorePaths, doc: DocRow, text: str, score: float) -> MemoryHit:
        return make_hit(sp.name, doc, text, score)

    def keyword(
        self, sp: StorePaths, query: str, limit: int, where: FactFilter | None = None
    ) -> list[MemoryHit]:
        """Keyword (FTS5 bm25) hits of one store, best first, one per document."""
        within = where.chunk_rowids(sp.name) if where is not None else None
        best = documents_of(lambda rows: search_chunks(self.db, sp.name, query, rows, within), limit)
        return self._keyword_hits(sp, best)

    def keyword_fused(
        self, paths: Sequence[StorePaths], query: str, limit: int, *, sized: bool = False
    ) -> list[MemoryHit]:
        """``rrf_merge`` of each store's ``keyword`` hits, from one word-index MATCH for all
        stores, building hits only for those that survive the fusion.

        Its reads share one snapshot (``snapshot.reading``), and the rows an unchanged index gave
        earlier recalls (chunk texts, documents, session neighbours) are taken from there.
        ``sized``: the caller checked the index file's size a moment ago (``IndexDB.current``).
        """
        names = [sp.name for sp in paths]
        with reading(self.db, sized) as kept:
            # Lending needs session neighbours: none in stores without a session fact.
            near = (
                NEIGHBOUR_DEPTH > 0 and "keyword" in NEIGHBOUR_MODES and with_sessions(self.db, names, kept)
            )
            # No lending, no store named twice: the fusion takes turns, so each store's documents
            # are needed only as far as its turns (``best_documents``'s ``fronts``), and only the
            # documents the fusion can take need rows.
            turns = None if near or len(set(names)) < len(names) else even_turns(len(names), limit)
            found = best_documents(
                self.db, names, query, limit, kept, turns if turns and min(turns) else None
            )
            fronts = None if turns is None else fused_fronts(self.db, found, limit, kept, make_hit)
            if fronts is not None:
                return fronts
            if turns is not None:  # a front document had no row: every store's first ``limit``
                found = best_documents(self.db, names, query, limit, kept)
            best = found
            # The candidates' rows and their session neighbours in one query; rows of neighbours
            # that the lending brings in, in a second only then.
            docs = doc_rows(self.db, found, kept, near=near)
            if near:
                best = {sp.name: self._lent_best(sp.name, found[sp.name], limit, kept) for sp in paths}
                more = {
                    store: [i for i in chunks if (store, i) not in docs] for store, chunks in best.items()
                }
                if any(more.values()):
                    docs.update(doc_rows(self.db, more, kept))
        lists = [[(name, i) for i in best[name] if (name, i) in docs] for name in names]
        of_name = {sp.name: sp for sp in paths}
        # Each list is one store's ids (a dict's keys): no key in two lists when no store is twice.
        fused = rrf_disjoint(lists, limit) if len(of_name) == len(names) else rrf_order(lists, limit)
        return [make_hit(store, docs[store, i], *best[store][i]) for store, i in fused]

    def _lent_best(
        self, store: str, best: dict[str, tuple[str, float]], limit: int, kept: dict[Any, Any]
    ) -> dict[str, tuple[str, float]]:
        """``best`` (id -> text, score) re-ranked by ``_lent``, the first ``limit`` (no hit past a
        store's ``limit`` survives the stores' fusion), with neighbours' first chunks."""
        if "keyword" not in NEIGHBOUR_MODES:
            return best
        ranked = self._lent(store, [(i, score) for i, (_, score) in best.items()], kept)
        if ranked is None:
            return best
        ranked = ranked[:limit]
        texts = self._chunk_texts([chunk_id(store, i, 0) for i, _ in ranked if i not in best])
        return {
            i: (best[i][0] if i in best else texts.get(chunk_id(store, i, 0), ""), score)
            for i, score in ranked
        }

    def _keyword_hits(self, sp: StorePaths, best: dict[str, tuple[str, float]]) -> list[MemoryHit]:
        docs = self._docs(sp.name, ids=list(best))
        return [self._hit(sp, docs[i], text, score) for i, (text, score) in best.items() if i in docs]

    def _grep(
        self, sp: StorePaths, query: str, limit: int, where: FactFilter | None = None
    ) -> list[MemoryHit]:
        return self._grep_stores([sp], query, limit, where)[0]

    def _grep_stores(
        self, stores: Sequence[StorePaths], query: str, limit: int, where: FactFilter | None = None
    ) -> list[list[MemoryHit]]:
        """Each store's grep hits, from one search over all their folders (``_grep_recall``)."""
        grep = GrepRecall(self.db, self.grep, self._key, self._docs, self._hit)
        return grep.stores(stores, query, limit, where)
