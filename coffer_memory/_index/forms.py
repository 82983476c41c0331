"""Other forms of a query's words, asked for when the word index holds them.

A question writes words apart that a fact writes as one (``db pool`` for ``dbpool``, ``back up``
for ``backups``, ``use auth token`` for ``useAuthToken``, ``node 18`` for ``node18``), glues a
version to its name (``python3.11``, ``node22``, ``go1.22``) where the fact says "Python 3.11",
or names a version without the ``v`` the fact gives it (``3.4`` for ``v3.4.0``). The word index
keeps each as the fact wrote it, so the question's form finds only the facts holding its other
words. ``with_forms`` asks the index's vocabulary (an ``fts5vocab`` table of the word index, in
the reading connection's temp schema) which other forms it holds, and adds those as terms:

- two adjacent content words joined, or a word and its particle (``dbpool``, ``login``), and
  three adjacent words of which two are content words (``useauthtoken``), in a query of at most
  ``_CONTENT_MAX`` content words: a name typed apart, not a sentence;
- a name with a version glued to it that the index lacks, as the name and the version
  (``python``, ``3.11``); ``base64``, which the index holds, stays whole;
- a version in the other form that the index holds (``3.4`` -> ``v3.4``, ``v2.3.1`` -> ``2.3.1``).

Only forms the index holds: a form no fact holds would still count in coverage's share of every
row (``coverage.py``) and change the ranking of every question of two words or more. Searching
every form as a term whose share does not count was tried: 7.6 % more instructions per keyword
recall at 1k facts (``bench/keyword_instructions.py``; each missing token is a lookup in every
segment), against 1.6 % for this lookup (a third of the bench's questions ask it, ~15 us per
form). A joined word written apart the other way (``appendonly`` for "append-only") would need a
lookup of every long word of every question: not done (the near-spelling fallback finds it when
nothing else is found).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

import apsw

from .db import IndexDB

_VOCAB = "temp.coffer_words_vocab"
_TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])  # the word index's (coverage.py)
_KEPT = "forms.vocab"  # the snapshot dict's key of the tokens looked up: token -> held
_WORD = re.compile("[a-z0-9]+")
_JOINED_MAX = 12  # a longer run of words is a phrase more often than a name written apart
_CONTENT_MAX = 3  # joined only in a query of at most so many content words (see the docstring)
_GLUED = re.compile(r"([a-z]{2,})(\d+(?:\.\d+)*)")
_VERSION = re.compile(r"(v?)(\d+(?:\.\d+)+)")
_HAS_DIGIT = re.compile("[0-9]")
# Particles that make a verb of a noun written as one word (``log in``, ``back up``, ``sign up``).
_PARTICLES = frozenset(["up", "in", "on", "out", "off", "down", "over"])
# Stopwords that begin a name of three words (``useAuthToken``, ``getUserName``, ``isEnabledFor``,
# ``toLocalTime``); a determiner or preposition does not (``the sso bridge``, ``for qa stored``).
_PREFIXES = frozenset(["use", "get", "is", "has", "can", "to", "on", "should"])
_tokenizers: list[apsw.FTS5Tokenizer] = []


def _plain_words(query: str) -> list[str]:
    """The query's words as the word index splits them, lower case (NFKC), a version's dots kept."""
    text = query.lower() if query.isascii() else unicodedata.normalize("NFKC", query).lower()
    return re.findall(r"[a-z0-9]+(?:\.[0-9]+)*", text)


def _joined(words: Sequence[str], stop: frozenset[str]) -> list[str]:
    """Two adjacent content words written together (or a word and its particle), and three
    adjacent words, the last two content words and the first a content word or a name's prefix
    (``use auth token``); none when the query has more than ``_CONTENT_MAX`` content words."""
    content = [w not in stop and _WORD.fullmatch(w) is not None for w in words]
    if sum(content) > _CONTENT_MAX:
        return []
    out: list[str] = []
    for i in range(len(words) - 1):
        if content[i] and (content[i + 1] or words[i + 1] in _PARTICLES):
            out.append(words[i] + words[i + 1])
        if i + 2 < len(words) and content[i + 1] and content[i + 2] and (content[i] or words[i] in _PREFIXES):
            out.append("".join(words[i : i + 3]))
    return [j for j in out if len(j) <= _JOINED_MAX and not j.isdigit()]


def _tokens(words: Sequence[str]) -> list[str | None]:
    """Each of ``words`` as the index's tokenizer stems it (None when it is not one token), from
    one tokenizer call."""
    if not _tokenizers:
        _tokenizers.append(apsw.Connection(":memory:").fts5_tokenizer(*_TOKENIZER))

    def run(text: str) -> list[str]:
        found = _tokenizers[0](
            text.encode(), apsw.FTS5_TOKENIZE_QUERY, None, include_offsets=False, include_colocated=False
        )
        return [str(t) for t in found]

    found = run(" ".join(words))
    if len(found) == len(words):
        return list(found)
    return [one[0] if len(one := run(w)) == 1 else None for w in words]


def _held(db: IndexDB, tokens: Sequence[str], kept: dict[Any, Any] | None) -> set[str]:
    """Which of ``tokens`` the word index holds (its vocabulary, asked once per snapshot)."""
    known: dict[str, bool] = kept.setdefault(_KEPT, {}) if kept is not None else {}
    asked = [t for t in dict.fromkeys(tokens) if t not in known]
    if asked:
        sql = f"SELECT term FROM {_VOCAB} WHERE term IN ({','.join('?' * len(asked))})"
        try:
            rows = db.rows(sql, asked)
        except apsw.SQLError:  # the connection's first lookup: its temp table first
            db.rows(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {_VOCAB} USING fts5vocab(main, documents_words, row)"
            )
            rows = db.rows(sql, asked)
        found = {str(r[0]) for r in rows}
        known.update((t, t in found) for t in asked)
    return {t for t in tokens if known.get(t)}


def with_forms(
    db: IndexDB, query: str, terms: list[str], stop: frozenset[str], kept: dict[Any, Any] | None = None
) -> list[str]:
    """``terms`` (``fts.keyword_terms`` of ``query``) and the other forms of the query's words
    that the word index holds (see the module docstring); ``stop``: the stopwords; ``kept``:
    ``snapshot.reading``'s dict, where the vocabulary's answers are kept."""
    if not terms:
        return terms
    words = _plain_words(query)
    joined = _joined(words, stop)
    glued: list[tuple[str, str]] = []  # a name and the version glued to it (``python3.11``)
    versions: list[str] = []  # a version in its other form (``3.4`` -> ``v3.4``)
    if _HAS_DIGIT.search(query):
        for word in words:
            if (match := _GLUED.fullmatch(word)) is not None:
                glued.append((match.group(1), match.group(2)))
            elif (version := _VERSION.fullmatch(word)) is not None:
                versions.append(version.group(2) if version.group(1) else f"v{version.group(2)}")
    asked = [
        *joined,
        *(name + number.split(".")[0] for name, number in glued),
        *(v.split(".")[0] for v in versions),
    ]
    if not asked:
        return terms
    tokens = _tokens(asked)
    held = _held(db, [t for t in tokens if t is not None], kept)
    extra = [w for w, t in zip(joined, tokens, strict=False) if t in held]
    for (name, number), token in zip(glued, tokens[len(joined) :], strict=False):
        if token not in held:  # the index has the name and the version apart, if at all
            extra += [name, number]
    extra += [v for v, t in zip(versions, tokens[len(joined) + len(glued) :], strict=True) if t in held]
    have = set(terms)
    extra = [e for e in dict.fromkeys(extra) if e not in have]
    return [*terms, *extra] if extra else terms
