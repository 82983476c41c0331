"""Other forms of a query's words, asked for when the word index holds them.

A question writes words apart that a fact writes as one (``db pool`` for ``dbpool``, ``back up``
for ``backups``, ``use auth token`` for ``useAuthToken``, ``node 18`` for ``node18``), or one that
the fact writes apart (``appendonly`` for "append-only"), glues a version to its name
(``python3.11``, ``node22``, ``go1.22``) where the fact says "Python 3.11", names Python's version
as its tags do (``py312``, ``py3.12``, ``cp312`` for "Python 3.12"), names a version without the
``v`` the fact gives it (``3.4`` for ``v3.4.0``), or mistypes a stopword (``teh``). The word index
keeps each as the fact wrote it, so the question's form finds only the facts holding its other
words. ``Forms`` works out the other forms of a query (``Forms.of``), a backend says which of them
its index holds (SQLite: ``held_sqlite``, the word index's vocabulary; PostgreSQL:
``pg/forms.py``), and ``Forms.terms`` adds those as terms:

- two adjacent content words joined, or a word and its particle (``dbpool``, ``login``), and
  three adjacent words of which two are content words (``useauthtoken``), in a query of at most
  ``_CONTENT_MAX`` content words: a name typed apart, not a sentence. Only words the query
  separates by spaces (or a ``-`` or ``_`` between letters, ``db-pool``): the parts of
  ``node:22-alpine`` are one name as written, and ``node22``, which another fact held, put that
  fact first;
- a content word of ``_SPLIT_LEN`` letters that the index lacks, in such a query, as the two
  words the index holds in a row (``appendonly`` -> "append only");
- a name with a version glued to it that the index lacks (as a phrase: ``py3.12`` is no
  ``py3.10``), as the name and the version (``python``, ``3.11``); ``base64``, which the index
  holds, stays whole;
- Python's version in each form it is written in (``python 3.12``, ``py312``, ``py3.12``,
  ``python3.12``, ``cp312``: the interpreter's tags, PEP 425);
- a version in the other form (``3.4`` -> ``v3.4``, ``v2.3.1`` -> ``2.3.1``);
- a word that is a stopword with two adjacent letters swapped (``teh``, ``taht``) and that the
  index lacks is dropped, as the stopword would be: the near-spelling fallback
  (``near.py``) looks at words of four letters or more, and only when nothing else was found.

Only forms the index holds: a form no fact holds would still count in coverage's share of every
row (``coverage.py``) and change the ranking of every question of two words or more. Searching
every form as a term whose share does not count was tried: 7.6 % more instructions per keyword
recall at 1k facts (``bench/keyword_instructions.py``; each missing token is a lookup in every
segment). Whether a form is held is asked of the word index itself, each form a quoted phrase
in one statement (``EXISTS`` of a ``MATCH``), and kept with the snapshot: the ``fts5vocab``
lookup that session 14 used counts a word's rows, which costs most for the common words a
question's own words are (asked here to find the ones the index lacks), and says nothing of a
phrase. The words a long word may split into, and the word with two letters swapped, are asked
only when the word itself is not held (a second statement, in a few questions in a hundred).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from .db import IndexDB
from .near import transpositions as _swaps
from .terms import STOPWORDS, keyword_terms

_HELD = "forms.held"  # the snapshot dict's key of the forms looked up: form -> held
_TERMS = "forms.terms"  # and of each query's terms with the forms held: query -> terms
# The most queries whose terms are kept (emptied then): a long-lived process asks again what it
# asked before, and the index's vocabulary stays while the snapshot's dict does.
TERMS_KEPT = 4096
_PLAIN = re.compile(r"[a-z0-9]+(?:\.[0-9]+)*")
_GLUE = re.compile(r"[a-z0-9][^a-z0-9\s]+[a-z0-9]")  # two words with no space between them
_END_MARKS = "?.!"  # a question's last marks, which join no two words
_JOINED_MAX = 12  # a longer run of words is a phrase more often than a name written apart
_CONTENT_MAX = 3  # joined only in a query of at most so many content words (see the docstring)
_UNKNOWN_LEN = (3, 16)  # the lengths of a word asked for, when the index may lack it
_SPLIT_LEN = (7, 16)  # the lengths of a word looked at as two words written together
_SPLIT_PART = 3  # the shortest part of such a word
_GLUED = re.compile(r"([a-z]{2,})(\d+(?:\.\d+)*)")
_VERSION = re.compile(r"(v?)(\d+(?:\.\d+)+)")
_PYTHON = re.compile(r"(?:py|python|cp)(3)\.?(\d{1,2})")  # py312, py3.12, python3.12, cp312
_PYTHON_NAMES = frozenset(["py", "python"])
_PYTHON_VERSION = re.compile(r"(3)\.(\d{1,2})")
_HAS_DIGIT = re.compile("[0-9]")
_TYPO_LEN = (3, 5)  # the lengths of a word looked at as a stopword with two letters swapped
# Particles that make a verb of a noun written as one word (``log in``, ``back up``, ``sign up``).
_PARTICLES = frozenset(["up", "in", "on", "out", "off", "down", "over"])
# Stopwords that begin a name of three words (``useAuthToken``, ``getUserName``, ``isEnabledFor``,
# ``toLocalTime``); a determiner or preposition does not (``the sso bridge``, ``for qa stored``).
_PREFIXES = frozenset(["use", "get", "is", "has", "can", "to", "on", "should"])

# Which of some forms an index holds (a form of several words: as a phrase).
Held = Callable[[Sequence[str]], set[str]]


def _plain_words(query: str) -> tuple[list[str], list[bool] | None]:
    """The query's words as the word index splits them, lower case (NFKC), a version's dots kept;
    and for each two adjacent words, whether the query writes them apart (a space between them,
    or a ``-`` or ``_`` between two words of letters: a name in snake or kebab case), or None
    when it writes every two apart (most queries: one search finds no two joined)."""
    if query.isascii():
        text = query.lower()
        # Most questions are words and spaces with a mark at the end: their words are the
        # spaces' parts, no two joined (~0.4 us against 2.2 for the two regular expressions).
        plain = text.rstrip(_END_MARKS)
        if plain.replace(" ", "").isalnum():  # ASCII: letters and digits only, no "." inside
            return plain.split(), None
    else:
        text = unicodedata.normalize("NFKC", query).lower()
    if _GLUE.search(text) is None:
        return _PLAIN.findall(text), None
    words: list[str] = []
    apart: list[bool] = []
    end = 0
    for match in _PLAIN.finditer(text):
        word = match.group()
        if words:
            between = text[end : match.start()]
            apart.append(
                between.isspace() or (between in ("-", "_") and words[-1].isalpha() and word.isalpha())
            )
        words.append(word)
        end = match.end()
    return words, apart


def _joined(words: Sequence[str], apart: Sequence[bool] | None, content: Sequence[bool]) -> list[str]:
    """Two adjacent content words written together (or a word and its particle), and three
    adjacent words, the last two content words and the first a content word or a name's prefix
    (``use auth token``), of the words written ``apart`` (None: all)."""
    out: list[str] = []
    for i in range(len(words) - 1):
        if apart is not None and not apart[i]:
            continue
        if content[i] and (content[i + 1] or words[i + 1] in _PARTICLES):
            out.append(words[i] + words[i + 1])
        if (
            i + 2 < len(words)
            and (apart is None or apart[i + 1])
            and content[i + 1]
            and content[i + 2]
            and (content[i] or words[i] in _PREFIXES)
        ):
            out.append("".join(words[i : i + 3]))
    return [j for j in out if len(j) <= _JOINED_MAX and not j.isdigit()]


def _python_versions(words: Sequence[str]) -> list[str]:
    """The forms of each Python version the query names (``py312`` -> "python 3.12", ``3.12``,
    ``py312``, ``py3.12``, ``python3.12``, ``cp312``): each names the version, not only Python."""
    found: list[str] = []
    for i, word in enumerate(words):
        if (match := _PYTHON.fullmatch(word)) is None and word in _PYTHON_NAMES and i + 1 < len(words):
            match = _PYTHON_VERSION.fullmatch(words[i + 1])
        if match is not None:
            major, minor = match.groups()
            dotted, bare = f"{major}.{minor}", f"{major}{minor}"
            found += [f"python {dotted}", dotted, f"py{bare}", f"py{dotted}", f"python{dotted}", f"cp{bare}"]
    return found


@functools.lru_cache(maxsize=4)
def _stop_typos(stop: frozenset[str]) -> frozenset[str]:
    """The words of ``_TYPO_LEN`` letters that are a stopword with two adjacent letters swapped
    (``teh``, ``taht``, ``wiht``), and no stopword themselves."""
    low, high = _TYPO_LEN
    return frozenset(v for w in stop if low <= len(w) <= high and w.isalpha() for v in _swaps(w)) - stop


_STOP_TYPOS = _stop_typos(STOPWORDS)  # the one stop set searches use, without the cache's call


@attrs.frozen
class Forms:
    """The other forms of one query's words (``Forms.of``); ``terms`` keeps the held ones."""

    terms_in: list[str]  # ``fts.keyword_terms`` of the query
    joined: list[str]
    glued: list[tuple[str, str]]  # a name and the version glued to it (``python3.11``)
    versions: list[str]  # a version in its other form (``3.4`` -> ``v3.4``)
    python: list[str]
    unknown: list[str]  # content words that may be mistyped or two words written together
    typos: list[str]  # terms that may be a stopword mistyped (``teh``)
    asked: list[str]  # the forms whose being held decides what is added or dropped
    stop: frozenset[str]

    @classmethod
    def of(cls, query: str, terms: list[str], stop: frozenset[str]) -> Forms:
        """The forms of ``query`` worth asking for; ``terms``: its ``keyword_terms``; ``stop``:
        the stopwords."""
        return cls(terms, *_forms_of(query, terms, stop), stop)

    def terms(self, held: Held) -> list[str]:
        """The query's terms with the forms ``held`` says the index holds, and without a stopword
        mistyped that it does not hold."""
        terms = self.terms_in
        if not self.asked:
            return terms
        have = held(self.asked)
        extra = [w for w in self.joined if w in have]
        for name, number in self.glued:
            if name + number not in have:  # the index has the name and the version apart, if at all
                extra += [name, number]
        extra += [v for v in (*self.versions, *self.python) if v in have]
        others = {w: _others(w, self.stop) for w in self.unknown if w not in have}
        if others:  # the second question, for words the index lacks (a few queries in a hundred)
            found = held([o for os in others.values() for o in os])
            for os in others.values():
                swapped = [o for o in os if o in found and " " not in o]
                split = [o for o in os if o in found and " " in o]
                extra += swapped or split[:1]
        dropped = {t for t in self.typos if t not in have}
        if dropped:
            terms = [t for t in terms if t not in dropped]
        seen = set(terms)
        extra = [e for e in dict.fromkeys(extra) if e not in seen]
        return [*terms, *extra] if extra else terms


def _forms_of(
    query: str, terms: list[str], stop: frozenset[str]
) -> tuple[list[str], list[tuple[str, str]], list[str], list[str], list[str], list[str], list[str]]:
    """``Forms.of``'s fields from ``joined`` to ``asked``: ``with_forms`` makes no ``Forms`` of a
    query that asks none (most: an attrs instance is nine frozen stores)."""
    words, apart = _plain_words(query)
    content = [w not in stop and "." not in w for w in words]
    joined: list[str] = []
    unknown: list[str] = []
    if sum(content) <= _CONTENT_MAX:
        joined = _joined(words, apart, content)
        low, high = _UNKNOWN_LEN
        unknown = [
            w
            for w, c in zip(words, content, strict=True)
            if c and low <= len(w) <= high and w.isalpha() and w in terms
        ]
    glued: list[tuple[str, str]] = []
    versions: list[str] = []
    python: list[str] = []
    if _HAS_DIGIT.search(query):
        for word in words:
            if _PYTHON.fullmatch(word) is not None:
                continue  # its forms are ``python``'s
            if (match := _GLUED.fullmatch(word)) is not None:
                glued.append((match.group(1), match.group(2)))
            elif (version := _VERSION.fullmatch(word)) is not None:
                versions.append(version.group(2) if version.group(1) else f"v{version.group(2)}")
        python = _python_versions(words)
    typos = _STOP_TYPOS if stop is STOPWORDS else _stop_typos(stop)
    typos_in = [t for t in terms if t in typos]
    if typos_in:
        unknown = [w for w in unknown if w not in typos]
    asked = [*joined, *(n + v for n, v in glued), *versions, *python, *unknown, *typos_in]
    return joined, glued, versions, python, unknown, typos_in, asked


def _others(word: str, stop: frozenset[str]) -> list[str]:
    """What a word the index lacks may have been meant as: the word with two adjacent letters
    swapped (``intergation``), and, for a word of ``_SPLIT_LEN`` letters, two words of
    ``_SPLIT_PART`` letters or more written together, the most even split first (``append only``)."""
    out = sorted(_swaps(word) - stop)
    low, high = _SPLIT_LEN
    if low <= len(word) <= high:
        middle = len(word) / 2
        cuts = sorted(range(_SPLIT_PART, len(word) - _SPLIT_PART + 1), key=lambda i: (abs(i - middle), i))
        out += [f"{word[:i]} {word[i:]}" for i in cuts]
    return out


def held_sqlite(db: IndexDB, forms: Sequence[str], kept: dict[Any, Any] | None = None) -> set[str]:
    """Which of ``forms`` the SQLite word index holds, each as a phrase a chunk holds (one
    statement; the answers kept with the snapshot)."""
    known: dict[str, bool] = kept.setdefault(_HELD, {}) if kept is not None else {}
    asked = [f for f in dict.fromkeys(forms) if f not in known]
    if asked:
        one = "EXISTS (SELECT 1 FROM documents_words WHERE documents_words MATCH ?)"
        [found] = db.rows(
            "SELECT " + ", ".join([one] * len(asked)), ['"' + f.replace('"', '""') + '"' for f in asked]
        )
        known.update(zip(asked, map(bool, found), strict=True))
    return {f for f in forms if known[f]}


def with_forms(
    db: IndexDB, query: str, terms: list[str], stop: frozenset[str], kept: dict[Any, Any] | None = None
) -> list[str]:
    """``terms`` (``fts.keyword_terms`` of ``query``) and the other forms of the query's words
    that the word index holds (see the module docstring); ``stop``: the stopwords; ``kept``:
    ``snapshot.reading``'s dict, where the vocabulary's answers are kept."""
    if not terms:
        return terms
    found = _forms_of(query, terms, stop)
    if not found[-1]:  # nothing asked
        return terms
    return Forms(terms, *found, stop).terms(lambda asked: held_sqlite(db, asked, kept))


def query_terms(db: IndexDB, query: str, kept: dict[Any, Any] | None = None) -> tuple[str, ...]:
    """``with_forms`` of ``query``'s ``keyword_terms`` with the stopwords: the terms a keyword
    search of ``query`` asks the word index for. With ``kept`` (``snapshot.reading``'s dict) they
    are kept per query text while the index is unchanged: the forms added are the ones the index
    held, and the dict is a new one once it changed (a write of any process, a reindex, a
    rebuild's new file). A repeated question then skips its terms, its forms and the vocabulary's
    lookups."""
    if kept is None:
        return tuple(with_forms(db, query, keyword_terms(query), STOPWORDS))
    known: dict[str, tuple[str, ...]] | None = kept.get(_TERMS)
    if known is None:
        known = kept[_TERMS] = {}
    terms = known.get(query)
    if terms is None:
        if len(known) >= TERMS_KEPT:
            known.clear()
        terms = known[query] = tuple(with_forms(db, query, keyword_terms(query), STOPWORDS, kept))
    return terms
