"""Keyword search over the FTS5 word and trigram tables, with user text quoted term by term."""

from __future__ import annotations

import unicodedata

import attrs

from .cjk import CJK_RUN, has_cjk, query_terms
from .db import IndexDB
from .keys import store_scope

# Words too common to help ranking; dropped unless nothing else is left.
STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "done",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "let",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "s",
        "t",
        "don",
        "didn",
        "doesn",
        "isn",
        "aren",
        "wasn",
        "weren",
        "won",
        "shall",
        "may",
        "might",
        "must",
        "also",
        "us",
        "get",
        "got",
        "use",
        "used",
        "using",
        "via",
    ]
)
_EDGE_PUNCT = "\"'`()[]{}<>.,;:!?«»“”‘’、。，；：！？（）"
TRIGRAM = 3


@attrs.frozen
class QueryPlan:
    """How a user's text becomes a search: FTS5 phrases, and short terms for LIKE."""

    fts_terms: tuple[str, ...]
    short_terms: tuple[str, ...]

    @property
    def match(self) -> str:
        """The FTS5 MATCH expression: every term a quoted phrase, joined by OR."""
        return " OR ".join('"' + t.replace('"', '""') + '"' for t in self.fts_terms)


def _words(query: str) -> list[str]:
    words = []
    for raw in unicodedata.normalize("NFKC", query).split():
        word = raw.strip(_EDGE_PUNCT).lower()
        if word:
            words.append(word)
    return words


def plan_query(query: str) -> QueryPlan:
    """Split a natural-language query into terms: stopwords dropped, CJK runs cut into trigrams.

    Any term matches (OR); bm25 ranks. Terms shorter than three characters cannot use the
    trigram index and are kept for a LIKE scan instead.
    """
    words = _words(query)
    content = [w for w in words if w not in STOPWORDS] or words
    fts: list[str] = []
    short: list[str] = []
    for word in content:
        if len(word) < TRIGRAM:
            short.append(word)
        elif has_cjk(word) and len(word) > TRIGRAM:
            fts.extend(word[i : i + TRIGRAM] for i in range(len(word) - TRIGRAM + 1))
        else:
            fts.append(word)
    return QueryPlan(fts_terms=tuple(dict.fromkeys(fts)), short_terms=tuple(dict.fromkeys(short)))


@attrs.frozen
class ChunkHit:
    """A chunk found by keyword search, with a higher-is-better score."""

    chunk_id: str
    text: str
    score: float


def _escape_like(term: str) -> str:
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def keyword_terms(query: str, *, characters: bool = True) -> list[str]:
    """The search terms of a query: words minus stopwords, CJK runs as the tokens of their pieces
    (question words and particles cut out, see ``cjk.query_terms``)."""
    words: list[str] = []
    runs: list[str] = []
    for word in _words(query):
        runs += CJK_RUN.findall(word)
        words += [w for w in (p.strip(_EDGE_PUNCT) for p in CJK_RUN.sub(" ", word).split()) if w]
    content = [w for w in words if w not in STOPWORDS] or ([] if runs else words)
    terms = [w for w in dict.fromkeys(content) if any(ch.isalnum() for ch in w)]
    return terms + query_terms(runs, characters=characters)


def _words_query(query: str, store: str) -> str | None:
    """The MATCH expression for the word index, or None when the query has no usable words."""
    # unicode61 splits "make-release" into a phrase itself; quotes keep user syntax inert.
    terms = keyword_terms(query)
    if not terms:
        return None
    ors = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    return f'store : "{store_scope(store)}" AND ({ors})'


# ``within``: a subquery of allowed chunk rowids and its parameters (a tags or time filter,
# ``index/filters.py``), applied inside the query so the limit counts matching chunks only.
Within = tuple[str, list[object]] | None


def _within(within: Within) -> tuple[str, list[object]]:
    # "+rowid": a plain expression, not a constraint FTS5 is offered; else it runs the MATCH once
    # per allowed rowid (18 times slower at 5k facts). The subquery is computed once.
    return (f" AND +rowid IN ({within[0]})", within[1]) if within else ("", [])


def search_words(db: IndexDB, store: str, query: str, limit: int, within: Within = None) -> list[ChunkHit]:
    """Word-level bm25 over ``documents_words`` (porter stemming); texts come from documents_fts."""
    match = _words_query(query, store)
    if match is None:
        return []
    only, only_params = _within(within)
    ranked = db.rows(
        "SELECT rowid, bm25(documents_words, 1.0, 0.0) FROM documents_words "
        f"WHERE documents_words MATCH ?{only} ORDER BY 2 LIMIT ?",
        (match, *only_params, limit),
    )
    if not ranked:
        return []
    marks = ",".join("?" * len(ranked))
    found = {
        int(r[0]): (str(r[1]), str(r[2]))
        for r in db.rows(
            f"SELECT rowid, chunk_id, text FROM documents_fts WHERE rowid IN ({marks})",
            [r[0] for r in ranked],
        )
    }
    return [ChunkHit(found[r[0]][0], found[r[0]][1], -float(r[1])) for r in ranked if r[0] in found]


def search_chunks(db: IndexDB, store: str, query: str, limit: int, within: Within = None) -> list[ChunkHit]:
    """Chunks of ``store`` matching ``query``, best first (scores: flipped bm25, higher is better).

    The word index answers first (stemmed words, CJK as bigrams; fast and well ranked). Queries
    it cannot answer (a fragment of a word, say) use the trigram index, where any substring of
    three or more characters matches; shorter terms fall back to an escaped LIKE scan.
    """
    hits = search_words(db, store, query, limit, within)
    if hits:
        return hits
    only, only_params = _within(within)
    plan = plan_query(query)
    if plan.fts_terms:
        rows = db.rows(
            "SELECT chunk_id, text, bm25(documents_fts) FROM documents_fts "
            f"WHERE documents_fts MATCH ? AND resource_name = ?{only} ORDER BY 3 LIMIT ?",
            (plan.match, store, *only_params, limit),
        )
        hits = [ChunkHit(chunk_id=r[0], text=r[1], score=-float(r[2])) for r in rows]
    if hits or not plan.short_terms:
        return hits
    clauses = " + ".join("(text LIKE ? ESCAPE '\\')" for _ in plan.short_terms)
    params: list[object] = [f"%{_escape_like(t)}%" for t in plan.short_terms]
    rows = db.rows(
        f"SELECT chunk_id, text, {clauses} AS n FROM documents_fts "
        f"WHERE resource_name = ? AND n > 0{only} ORDER BY n DESC, length(text) ASC LIMIT ?",
        (*params, store, *only_params, limit),
    )
    return [ChunkHit(chunk_id=r[0], text=r[1], score=float(r[2])) for r in rows]
