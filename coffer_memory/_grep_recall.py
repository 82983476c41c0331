"""Grep recall: the query's fixed strings over every searched store's Markdown files (the truth),
files ranked by the patterns they hold, index rows and passages read for the best ``limit`` only.

A common word matches thousands of files at 10k facts. The files are grouped by the set of
patterns they hold (a handful of groups): weights and scores are worked out per group, the
order within the best groups comes from each store's update times kept while the index is
unchanged (``snapshot.reading``), and only the final hits' rows and passages are read.
"""

from __future__ import annotations

import heapq
import math
import os
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from ._errors import CofferError, InvalidInput
from ._grep_fold import fold
from ._index.db import IndexDB
from ._index.english import grep_words
from ._index.filters import FactFilter
from ._index.fts import keyword_terms
from ._index.snapshot import in_list, reading
from ._models import MemoryHit
from ._recall_rows import DocRow
from ._store.paths import StorePaths, is_recall_rel
from .plugins.manager import failure, plugin_of

if TYPE_CHECKING:  # the plugin surface imports pluggy, which a keyword recall does without
    from .plugins.hookspecs import GrepBackend

GREP_MAX_LINES = 50_000
# What grep leaves out of a line (the match at its start is cut): frontmatter that every fact
# has, so that a query word like "kind", "tags", "created" or "agent" does not match every file.
# Key lines whose values nobody wrote as text (times, ids, tags: the keyword index holds none of
# them) go whole; of a title or description line only the key, for its value is indexed text.
MACHINE_LINE = re.compile(
    r"^[ \t]*(?:"
    r"(?:kind|metadata|actor|origin_session_id|created_at|updated_at|superseded_by|superseded_at|tags|id)"
    r":[^\n]*|(?:title|name|description):)"
)
KEPT_ORDER = "grep.order"  # per store: documents path -> (minus its update time, id), in reading's dict
# Per tuple of store roots: each file's store (its index in the tuple) and documents path, or
# NOWHERE for a file no store recalls (the same files come back search after search).
NOWHERE = (-1, "")
_PLACES: dict[tuple[str, ...], dict[str, tuple[int, str]]] = {}
_PLACES_KEPT = 200_000

Hit = Callable[[StorePaths, DocRow, str, float], MemoryHit]


class Docs(Protocol):
    """The ``documents`` rows (``DocRow``s by id) of a store's facts ``ids`` that ``where`` lets
    through."""

    def __call__(self, store: str, *, ids: Sequence[str], where: FactFilter | None) -> dict[str, DocRow]:
        """The rows."""
        ...


def grep_patterns(query: str) -> list[str]:
    """The fixed strings a grep recall searches: the whitespace-normalised phrase, then its words.

    A question is rarely in a file verbatim: its words (CJK bigrams, question words cut out) are
    searched too, and a file ranks by how many of them it holds. Single CJK characters would
    match most files: three times slower at 1k facts, for little gain. English words as their
    stems (``english.grep_words``): grep sees substrings, not inflections.
    """
    phrase = " ".join(query.split())
    terms = grep_words(keyword_terms(query, characters=False, written=True))
    return [phrase, *(t for t in terms if t != phrase.lower())]


@attrs.frozen
class GrepRecall:
    """One grep recall over several stores, with the collaborators its caller owns: the index,
    the backend, a path's documents key, the documents rows of ids, and the hit maker."""

    db: IndexDB
    backend: GrepBackend
    key: Callable[[str], str]
    docs: Docs
    hit: Hit

    def stores(
        self, stores: Sequence[StorePaths], query: str, limit: int, where: FactFilter | None = None
    ) -> list[list[MemoryHit]]:
        """Each store's hits, best first, from one search over all their folders."""
        patterns = grep_patterns(query)
        folders = [folder for sp in stores for folder in sp.recall_dirs()]
        roots = tuple(str(sp.root) + os.sep for sp in stores)
        places = _PLACES.get(roots)
        if places is None or len(places) > _PLACES_KEPT:
            if len(_PLACES) > 64:
                _PLACES.clear()
            places = _PLACES[roots] = {}
        # Per store: the files holding each set of patterns, by documents path.
        groups: list[dict[frozenset[int], list[str]]] = [{} for _ in stores]
        for path, seen in self._files(folders, patterns, len(stores)):
            place = places.get(path)
            if place is None:
                place = places[path] = self._place(path, roots)
            if place[0] >= 0:
                groups[place[0]].setdefault(seen, []).append(place[1])
        if not any(groups):
            return [[] for _ in stores]
        with reading(self.db) as kept:
            return [
                self._ranked(sp, found, patterns, limit, where, kept)
                for sp, found in zip(stores, groups, strict=True)
            ]

    def _place(self, path: str, roots: Sequence[str]) -> tuple[int, str]:
        for i, root in enumerate(roots):
            if path.startswith(root) and is_recall_rel(path[len(root) :]):
                return i, self.key(path)
        return NOWHERE

    def _files(
        self, folders: Sequence[Any], patterns: Sequence[str], stores: int
    ) -> Iterable[tuple[str, frozenset[int]]]:
        """(file, patterns held) pairs, what ``MACHINE_LINE`` cuts left out, each file once; a
        file holding no pattern in what is left is not there.

        A backend with ``held`` (both built-ins) answers per file; any other's lines are folded
        here, at most ``GREP_MAX_LINES`` per store searched.
        """
        backend = self.backend
        resolve = getattr(backend, "resolve", None)  # the index's DeferredGrepBackend
        chosen = resolve() if callable(resolve) else backend
        try:
            held = getattr(chosen, "held", None)
            if callable(held):
                found: dict[str, frozenset[int]] = held(folders, patterns, skip=MACHINE_LINE)
                return list(found.items())
            lowered = [fold(p) for p in patterns]
            per_file: dict[str, set[int]] = {}
            for m in backend.search(folders, patterns, max_lines=GREP_MAX_LINES * max(1, stores)):
                rest = fold(MACHINE_LINE.sub("", m.line, count=1))
                seen = {i for i in m.patterns if lowered[i] in rest}
                if seen:
                    per_file.setdefault(str(m.path), set()).update(seen)
            return [(path, frozenset(seen)) for path, seen in per_file.items()]
        except CofferError:
            raise
        except Exception as exc:  # a plugin's bug (a raise, a wrong type) said as such, with its name
            name = str(getattr(chosen, "name", "?"))
            raise InvalidInput(
                f"the grep backend {name!r} (plugin {plugin_of('register_grep_backends', name)}) failed: "
                f'{failure(exc)}; fix or remove the plugin, or set grep_backend = "auto"',
                field="grep_backend",
                backend=name,
            ) from exc

    def _ranked(
        self,
        sp: StorePaths,
        groups: dict[frozenset[int], list[str]],
        patterns: Sequence[str],
        limit: int,
        where: FactFilter | None,
        kept: dict[Any, Any],
    ) -> list[MemoryHit]:
        """One store's files ranked by the patterns they hold (rarer ones weigh more), then
        newest first, then by path (so the order does not depend on the order files came in)."""
        if not groups:
            return []
        # An idf-like weight per pattern from the files that matched: a term in every file
        # weighs least (a grep sees only the matching files: they stand in for the store).
        files = sum(len(group) for group in groups.values())
        df = [0] * len(patterns)
        for seen, group in groups.items():
            for i in seen:
                df[i] += len(group)
        weights = [math.log(1.0 + (files + 1) / (d + 0.5)) for d in df]
        total = sum(weights[1:]) or 1.0
        by_score: dict[float, list[str]] = {}
        for seen, group in groups.items():
            # The whole phrase counts 1; each term found adds its share of 1, rarer terms more.
            score = (1.0 if 0 in seen else 0.0) + sum(weights[i] for i in sorted(seen) if i) / total
            by_score.setdefault(score, []).extend(group)
        order = self._order(sp.name, kept)
        allowed = self._allowed(sp.name, where) if where is not None else None
        home = f"{self.db.home}/"  # what a DocRow's path is: the home, then the documents path
        ranked: list[tuple[float, str]] = []
        for score in sorted(by_score, reverse=True):
            # Files the filter rules out (or without a row) are left out: the limit counts the rest.
            candidates = [
                (order[rel][0], home + rel, order[rel][1])
                for rel in by_score[score]
                if rel in order and (allowed is None or rel in allowed)
            ]
            ranked += [(score, i) for _, _, i in heapq.nsmallest(limit - len(ranked), candidates)]
            if len(ranked) >= limit:
                break
        docs = self.docs(sp.name, ids=[i for _, i in ranked], where=where)
        best = [(score, docs[i]) for score, i in ranked if i in docs]
        passages = self._passages(sp.name, [doc.id for _, doc in best], patterns)
        return [self.hit(sp, doc, passages.get(doc.id, ""), score) for score, doc in best]

    def _order(self, store: str, kept: dict[Any, Any]) -> dict[str, tuple[float, str]]:
        """Each fact's minus update time (newest first among equal scores) and id by documents
        path, kept while the index is unchanged."""
        order: dict[str, tuple[float, str]] | None = kept.get((KEPT_ORDER, store))
        if order is None:
            rows = self.db.rows(
                "SELECT path, updated_at, id FROM documents WHERE kind = 'memory' AND resource_name = ?",
                (store,),
            )
            order = kept[(KEPT_ORDER, store)] = {
                str(path): (-datetime.fromisoformat(updated).timestamp(), str(i)) for path, updated, i in rows
            }
        return order

    def _allowed(self, store: str, where: FactFilter) -> set[str]:
        """The documents paths of the store's facts that ``where`` lets through."""
        only, params = where.sql("d")
        rows = self.db.rows(
            f"SELECT path FROM documents d WHERE kind = 'memory' AND resource_name = ? AND {only}",
            (store, *params),
        )
        return {str(r[0]) for r in rows}

    def _passages(self, store: str, ids: Sequence[str], patterns: Sequence[str]) -> dict[str, str]:
        """Per document, its first chunk holding any pattern (else its first chunk)."""
        if not ids:
            return {}
        marks, values = in_list(ids)
        rows = self.db.rows(
            "SELECT c.document_id, coalesce(f.written, f.text) FROM chunks c JOIN documents_fts f ON f.rowid = c.rowid "
            f"WHERE c.resource_name = ? AND c.document_id IN ({marks}) ORDER BY c.document_id, c.position",
            (store, *values),
        )
        lowered = [fold(p) for p in patterns]
        out: dict[str, str] = {}
        chosen: set[str] = set()
        for document_id, text in rows:
            if document_id in chosen:
                continue
            out.setdefault(document_id, str(text))
            folded = fold(text)
            if any(p in folded for p in lowered):
                out[document_id] = str(text)
                chosen.add(document_id)
        return out
