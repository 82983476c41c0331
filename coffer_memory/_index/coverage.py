"""Coverage: how many of a query's terms a keyword hit holds, and the ranking it corrects.

bm25 over an OR of the query's terms lets one rare term outweigh several common ones: a short
chunk holding only ``instruments`` outranks the one holding ``melanie``, ``play`` and
``instruments``. The candidates bm25 found are re-scored as ``bm25 × (1 + w × share of the query
terms present)``, so a hit holding more of the question moves up among hits of similar bm25.
The terms are compared as the word index sees them (the same tokenizer, CJK runs as their
pieces), from the texts the search already read: no extra query. A CJK piece is looked up as a
substring (a bigram of the index is two adjacent CJK characters), which is what the index saw
without segmenting every candidate again.
"""

from __future__ import annotations

import itertools
import threading
import unicodedata
from collections.abc import Callable, Collection, KeysView, Mapping, Sequence
from typing import Any

import apsw

from .cjk import CJK_RUN, has_cjk
from .hant import fold

# Chosen on LoCoMo's dev conversations (0-4), keyword turn level: R@5 by weight 0 → 0.529,
# 0.3 → 0.533, 1 → 0.545, 2 → 0.549, 4 → 0.553, 1000 (coverage first) → 0.556; flat past 4.
COVERAGE_WEIGHT = 4.0
# The word index's tokenizer (migration 4 in db.py), as apsw names it.
_TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])
# Each thread's tokenizer, on a connection of its own: FTS5's built-in tokenizers are the same on
# every connection, and making one (``Connection.fts5_tokenizer``) was ~2.6 us of every recall.
_local = threading.local()


def _tokenizer() -> apsw.FTS5Tokenizer:
    """This thread's word-index tokenizer (``_TOKENIZER``)."""
    tokenize: apsw.FTS5Tokenizer | None = getattr(_local, "tokenize", None)
    if tokenize is None:
        tokenize = _local.tokenize = apsw.Connection(":memory:").fts5_tokenizer(*_TOKENIZER)
    return tokenize


def _tokens(tokenize: apsw.FTS5Tokenizer, text: str, reason: int) -> list[str]:
    # Without offsets or colocated tokens, apsw returns a list of the bare token strings.
    found = tokenize(text.encode("utf-8"), reason, None, include_offsets=False, include_colocated=False)
    return found  # type: ignore[return-value]


_Wanted = tuple[frozenset[str], tuple[str, ...]]
# A text's tokens, as the keys of a dict: a dict of strings is never tracked by Python's garbage
# collector (a frozenset is, and the collections that walked thousands of kept token sets were a
# tenth of a keyword recall at 10k facts), and takes a third of a frozenset's memory. Kept as the
# dict's keys view, which the scoring intersects: a view made per row and recall (``.keys()``)
# was ~300 instructions a row. A view is tracked by the collector, but its one referent, the
# dict, is not.
Tokens = KeysView[str]
# Query terms as the index tokenizes them: a recall re-scores each store with the same terms.
_wanted_cache: dict[str, _Wanted | None] = {}
_WANTED_CACHE_MAX = 4096
# A query's terms as compared, the factor of each share, its single tokens and how many of those a
# row's stored tokens hold (``_plan``), by (weight, *terms).
_Plan = tuple[list[_Wanted], list[float], frozenset[str] | None, Callable[[str], int]]
_plans: dict[tuple[Any, ...], _Plan | None] = {}
_FACTORS: dict[tuple[float, int], list[float]] = {}  # ``_factors``'s, by (weight, number of terms)
# Candidate texts already re-scored, as compared and their tokens: about 3 KB each (measured at
# 10k facts), so at most ~13 MB. A single pass of 200 recalls at 10k facts met 6,200 texts in
# 16,000 candidates: 2,048 kept tokenized 12,200 of them, 4,096 kept 9,600.
_words_cache: dict[str, tuple[str, Tokens]] = {}
_WORDS_CACHE_MAX = 4096
# One string per distinct token for the kept texts' token dicts: the tokenizer makes a new string
# for every token of every text, and a kept text held ~27 of its own (~1.4 KB: a third of what a
# first-pass 1k recall left on new memory, and of its page faults: docs/benchmarks.md, kw23).
# Tokens are compared by value everywhere, so sharing them changes no score. Emptied when it holds
# more than ``_SHARED_TOKENS_MAX`` (texts tokenized after that share among themselves again). Not
# ``sys.intern``: interned strings are immortal on some Pythons (3.12's first releases, free-threaded
# builds), and every distinct token a long-lived process met would stay.
_shared_tokens: dict[str, str] = {}
_SHARED_TOKENS_MAX = 16384
_HEADER_MARK = "\u2063"  # in reindex.HEADER_END (not imported: the index writer is heavy)
# What ``_plans.get`` answers for a key it lacks (None is a kept answer there).
_UNSEEN = object()


def _wanted(tokenize: apsw.FTS5Tokenizer, term: str) -> _Wanted | None:
    if term in _wanted_cache:
        return _wanted_cache[term]
    tokens = _tokens(tokenize, term, apsw.FTS5_TOKENIZE_QUERY)
    wanted: _Wanted | None
    if not tokens:
        wanted = None
    elif term.isascii():  # its tokens are ASCII too: no CJK to look for (a search per token)
        wanted = (frozenset(tokens), ())
    else:
        cjk = tuple(t for t in tokens if has_cjk(t))
        wanted = (frozenset(tokens).difference(cjk), cjk)
    if len(_wanted_cache) >= _WANTED_CACHE_MAX:
        _wanted_cache.clear()
    _wanted_cache[term] = wanted
    return wanted


def _plain(text: str) -> bool:
    """ASCII apart from the header's U+2063, which NFKC leaves as it is: no NFKC, no CJK to look for
    (most first chunks hold it, and a CJK search of one took 3-4 us)."""
    return text.isascii() or text.replace(_HEADER_MARK, "").isascii()


def _prepared(text: str) -> tuple[str, str]:
    """``text`` as it is compared (NFKC unless plain) and as it is tokenized (CJK runs left out:
    they are matched as substrings)."""
    if _plain(text):
        return text, text
    candidate = fold(unicodedata.normalize("NFKC", text))  # as the index saw it
    return candidate, candidate if not has_cjk(candidate) else CJK_RUN.sub(" ", candidate)


def _compared(tokenize: apsw.FTS5Tokenizer, texts: Sequence[str]) -> list[tuple[str, Tokens]]:
    """Each text as it is compared (``_prepared``) and its index tokens.

    Kept per text for later recalls (a long-lived process is asked about the same memory again
    and again): tokenizing was most of the re-scoring, and the NFKC check the rest. Keyed by
    the text itself, so an edited chunk is a new key and never served stale tokens.
    """
    out = [_words_cache.get(t) for t in texts]
    todo = [i for i, found in enumerate(out) if found is None]
    if not todo:
        return out  # type: ignore[return-value]
    compared = []
    prepared = []
    for i in todo:
        candidate, tokenized = _prepared(texts[i])
        compared.append(candidate)
        prepared.append(tokenized)
    if len(_words_cache) + len(todo) > _WORDS_CACHE_MAX:
        _words_cache.clear()
    for i, candidate, words in zip(todo, compared, _tokenize_all(tokenize, prepared), strict=True):
        out[i] = _words_cache[texts[i]] = (candidate, words)
    return out  # type: ignore[return-value]


def stored_tokens(text: str) -> str:
    """What the index stores beside a chunk for coverage (``chunks.tokens``, schema 12): the
    chunk's tokens as ``_compared`` makes them, in the order met (a token met again is there
    again: taking each once cost a rebuild a third as much again as tokenizing), with a space
    before and after each (a token holds no space: unicode61 splits on it), so that a recall
    counts a query token ``t`` held by looking for `` t `` in it, without tokenizing the chunk."""
    data = text.encode("utf-8")
    # Most chunks are ASCII but for the header's mark (3 bytes in UTF-8): tokenized as they are
    # (``_prepared``), which their length tells without the copy ``_plain`` makes of them. A rebuild
    # tokenizes every chunk here: the calls written out.
    if len(data) != len(text) + 2 * text.count(_HEADER_MARK):
        data = _prepared(text)[1].encode("utf-8")
    # Without offsets or colocated tokens, apsw returns a list of the bare token strings (``_tokens``).
    tokens: list[str] = _tokenizer()(  # type: ignore[assignment]
        data, apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False, include_colocated=False
    )
    return f" {' '.join(tokens)} " if tokens else " "


def held_tokens(value: object) -> bool:
    """Whether ``value`` (a ``chunks.tokens`` value another read found not NULL) is tokens
    ``stored_tokens`` made: text with a space at each end. Other text is left unused (its chunk
    is tokenized, as without it); a value that is no text is another program's, a ``TypeError``
    that the read's values check turns into damage (``values.note_values``)."""
    if type(value) is not str:
        raise TypeError(f"chunks.tokens holds a {type(value).__name__}, not text")
    return value[:1] == " " == value[-1:]


def _from_stored(text: str, stored: str) -> tuple[str, Tokens]:
    """``_compared``'s (compared text, tokens) of ``text`` from its ``stored_tokens``."""
    if len(_shared_tokens) > _SHARED_TOKENS_MAX:
        _shared_tokens.clear()
    share = _shared_tokens.setdefault
    tokens = stored.split(" ")[1:-1]
    return _prepared(text)[0], dict.fromkeys(map(share, tokens, tokens)).keys()


def _tokenize_all(tokenize: apsw.FTS5Tokenizer, texts: Sequence[str]) -> list[Tokens]:
    """The tokens of each text, a tokenizer call each: one call over the texts joined by a
    separator token, cut apart again, took more (63 k instructions a text of the bench's 1k facts
    against 57 k: finding the separators among ~40 tokens a text, and a slice of each part)."""
    document = apsw.FTS5_TOKENIZE_DOCUMENT
    if len(_shared_tokens) > _SHARED_TOKENS_MAX:
        _shared_tokens.clear()
    share = _shared_tokens.setdefault
    found = [_tokens(tokenize, text, document) for text in texts]
    return [dict.fromkeys(map(share, tokens, tokens)).keys() for tokens in found]


def by_coverage(
    conn: apsw.Connection,
    terms: Sequence[str],
    ranked: Sequence[tuple[int, float]],
    texts: Mapping[int, Sequence[str]],
    weight: float = COVERAGE_WEIGHT,
    by_row: dict[int, tuple[str, Tokens]] | None = None,
) -> list[tuple[int, float]]:
    """``ranked`` (rowid, bm25: lower is better) re-scored by the share of ``terms`` each row's
    text (``texts[rowid][1]``) holds, best first; rowid breaks ties as in the search. A query of
    one term is unchanged.

    ``by_row`` keeps each row's compared text and tokens by rowid, for a caller whose rowids keep
    their texts (``snapshot.reading``'s dict): fewer lookups than by the text itself."""
    return [(rowid, score) for score, rowid in scored_lists(conn, terms, [ranked], texts, weight, by_row)[0]]


def scored_lists(
    conn: apsw.Connection,
    terms: Sequence[str],
    lists: Sequence[Sequence[tuple[int, float]]],
    texts: Mapping[int, Sequence[str]],
    weight: float = COVERAGE_WEIGHT,
    by_row: dict[int, tuple[str, Tokens]] | None = None,
    stored: Mapping[int, str] | None = None,
) -> list[list[tuple[float, int]]]:
    """``by_coverage`` of several ranked lists (a keyword recall's stores) with the same terms
    (looked up once, the rows of every list tokenized in one batch), as (score, rowid) pairs, the
    order they sort in: Python compares tuples whose first item is a float faster than it sorts
    by a key (a key tuple per row was most of the two sorts' ~110 k instructions a recall).

    ``stored``: rows' ``stored_tokens`` as the index keeps them (``chunks.tokens``), by rowid: such
    a row is not tokenized. In the usual query (terms of one token each) its share is counted in
    that text itself, without a token dict made or kept for it."""
    plan = _plan(terms, weight) if len(terms) >= 2 and weight > 0 else None
    if plan is None:
        return [[(score, rowid) for rowid, score in ranked] for ranked in lists]
    wanted, factors, keys, held_of = plan
    out = []
    if keys is not None and stored:
        # The usual query and index: every row's share counted in its stored tokens, without a
        # first pass over the rows for those that have none (~9 bytecodes a row, a recall
        # re-scores ~40) or a test per row; a row without (a KeyError) takes the way below.
        try:
            for ranked in lists:
                scored = [(score * factors[held_of(stored[rowid])], rowid) for rowid, score in ranked]
                scored.sort()  # by score, then rowid: the order of the search
                out.append(scored)
            return out
        except KeyError:
            out = []
    held: Mapping[int, str] = stored if stored is not None and keys is not None else {}
    compared = _compared_rows(lists, texts, by_row, held, stored or {})
    get = held.get
    for ranked in lists:
        if keys is not None:  # the usual query: one intersection (or a look per term) per row
            scored = [
                (
                    score
                    * factors[
                        len(compared[rowid][1] & keys) if (found := get(rowid)) is None else held_of(found)
                    ],
                    rowid,
                )
                for rowid, score in ranked
            ]
        else:
            shares = _shares(wanted, [compared[rowid] for rowid, _ in ranked])
            scored = [
                (score * factors[share], rowid) for (rowid, score), share in zip(ranked, shares, strict=True)
            ]
        scored.sort()  # by score, then rowid: the order of the search
        out.append(scored)
    return out


def _compared_rows(
    lists: Sequence[Sequence[tuple[int, float]]],
    texts: Mapping[int, Sequence[str]],
    by_row: dict[int, tuple[str, Tokens]] | None,
    held: Mapping[int, str],
    stored: Mapping[int, str],
) -> Mapping[int, tuple[str, Tokens]]:
    """Each row's (compared text, tokens) but those of the rows in ``held`` (counted in their
    stored tokens), from ``by_row`` when it has them, else made (and kept there): from the row's
    ``stored`` tokens when the index keeps them, else by tokenizing its text."""
    rowids = [rowid for ranked in lists for rowid, _ in ranked if rowid not in held]
    if by_row is None:
        return dict(zip(rowids, _made(rowids, texts, stored), strict=True))
    missing = [rowid for rowid in rowids if rowid not in by_row]
    if missing:
        if len(by_row) + len(missing) > _WORDS_CACHE_MAX:  # it holds tokens the cache let go
            by_row.clear()
            missing = rowids
        by_row.update(zip(missing, _made(missing, texts, stored), strict=True))
    return by_row


def _made(
    rowids: Sequence[int], texts: Mapping[int, Sequence[str]], stored: Mapping[int, str]
) -> list[tuple[str, Tokens]]:
    """The (compared text, tokens) of each row: from its stored tokens, else tokenized."""
    found = _texts(texts, rowids)
    if not stored:
        return _compared(_tokenizer(), found)
    out: list[tuple[str, Tokens] | None] = [
        None if (kept := stored.get(rowid)) is None else _from_stored(text, kept)
        for rowid, text in zip(rowids, found, strict=True)
    ]
    todo = [i for i, made in enumerate(out) if made is None]
    for i, made in zip(todo, _compared(_tokenizer(), [found[i] for i in todo]), strict=True):
        out[i] = made
    return out  # type: ignore[return-value]


def _plan(terms: Sequence[str], weight: float) -> _Plan | None:
    """The query's terms as compared (``_wanted``), the factor of each share, its single tokens
    (``_single_tokens``) and how many of those a row's stored tokens hold (``_held_count``); None
    when fewer than two terms have tokens (nothing to re-score). Kept
    per terms and weight: a recall re-scores its rows in up to two steps (``fts._scored_within``)."""
    key = (weight, *terms)
    kept = _plans.get(key, _UNSEEN)  # one lookup: a tuple's hash is worked out at each
    if kept is not _UNSEEN:
        return kept  # type: ignore[return-value]
    # The terms' kept answers looked up in C, a call of ``_wanted`` only for a term not met yet
    found: list[Any] = list(map(_wanted_cache.get, terms, itertools.repeat(_UNSEEN)))
    if _UNSEEN in found:
        tokenize = _tokenizer()
        found = [_wanted(tokenize, term) for term in terms]
    wanted: list[_Wanted] = [w for w in found if w is not None]
    plan: _Plan | None = None
    if len(wanted) >= 2:
        keys = _single_tokens(wanted)
        # ``held_of`` is asked only with single tokens (``len``: a callable never called)
        plan = (wanted, _factors(weight, len(wanted)), keys, _held_count(keys) if keys is not None else len)
    if len(_plans) >= _WANTED_CACHE_MAX:
        _plans.clear()
    _plans[key] = plan
    return plan


def _factors(weight: float, n: int) -> list[float]:
    """The factor of each possible share of ``n`` terms, worked out as the per-row expression
    works it out; kept per (weight, n): mixed int and float arithmetic is ~8 k instructions a
    new question's plan (the list is only read)."""
    factors = _FACTORS.get((weight, n))
    if factors is None:
        if len(_FACTORS) >= _WANTED_CACHE_MAX:
            _FACTORS.clear()
        factors = _FACTORS[weight, n] = [1.0 + weight * share / n for share in range(n + 1)]
    return factors


def _held_count(keys: Collection[str]) -> Callable[[str], int]:
    """How many of ``keys`` (single tokens) a row's stored tokens hold: each looked for with a space
    before and after it. Written out for the usual two to four (``sum`` over a ``map`` took half
    as long again a row), each mark made without a comprehension (made once a question: a
    generator and a sort of them were a third of a new question's re-scoring plan)."""
    if len(keys) == 2:
        a, b = keys
        a, b = f" {a} ", f" {b} "
        return lambda s: (a in s) + (b in s)
    if len(keys) == 3:
        a, b, c = keys
        a, b, c = f" {a} ", f" {b} ", f" {c} "
        return lambda s: (a in s) + (b in s) + (c in s)
    if len(keys) == 4:
        a, b, c, d = keys
        a, b, c, d = f" {a} ", f" {b} ", f" {c} ", f" {d} "
        return lambda s: (a in s) + (b in s) + (c in s) + (d in s)
    marks = tuple(f" {k} " for k in keys)
    return lambda s: sum(map(s.__contains__, marks))


def _texts(texts: Mapping[int, Sequence[str]], rowids: Sequence[int]) -> list[str]:
    return [found[1] if (found := texts.get(rowid)) else "" for rowid in rowids]


def _single_tokens(wanted: Sequence[_Wanted]) -> frozenset[str] | None:
    """The query's tokens when every term is one Latin token and no two terms share it (then a
    row's share is how many of them its tokens hold); None otherwise."""
    keys: set[str] = set()
    for latin, cjk in wanted:
        if cjk or len(latin) != 1:
            return None
        keys |= latin
    return frozenset(keys) if len(keys) == len(wanted) else None


def _shares(wanted: Sequence[_Wanted], compared: Sequence[tuple[str, Tokens]]) -> list[int]:
    """How many of the ``wanted`` terms each compared row (text, tokens) holds."""
    if any(cjk for _, cjk in wanted):
        return [
            sum(1 for latin, cjk in wanted if latin <= words and (not cjk or all(c in text for c in cjk)))
            for text, words in compared
        ]
    return _latin_shares([latin for latin, _ in wanted], [words for _, words in compared])


def _latin_shares(latins: Sequence[frozenset[str]], texts: Sequence[Tokens]) -> list[int]:
    """How many of ``latins`` (each a term's tokens) each of ``texts`` (tokens) holds all of.

    A term of one token counts once per term that is that token (``deploy`` and ``deploying``
    are one token twice): one intersection per text finds them, where a subset test per term
    took three times as long; terms of several tokens keep their subset test.
    """
    single: dict[str, int] = {}
    several = []
    for latin in latins:
        if len(latin) == 1:
            (token,) = latin
            single[token] = single.get(token, 0) + 1
        else:
            several.append(latin)
    keys = frozenset(single)
    if not several and len(single) == len(latins):
        return [len(words & keys) for words in texts]
    return [
        sum(single[t] for t in words & keys) + sum(words >= latin for latin in several) for words in texts
    ]
