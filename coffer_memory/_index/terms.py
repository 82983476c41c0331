"""A user's text as search terms: the words searched (stopwords dropped, clitics off, camelCase
names also as their words, CJK runs as the tokens of their pieces) and the plan of the trigram
fallback. The keyword search (``fts.py``), grep's patterns and the PostgreSQL index share them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

import attrs

from .cjk import CJK_RUN, has_cjk, query_terms
from .english import without_clitic

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


# Comparison and range characters never join the parts of a name, but they glue a version to
# its package in what people paste (``python>=3.11``, ``node^20``, ``a,b``): a word is split at
# them, so each part is searched on its own, not as a phrase the fact would have to spell out.
_OPERATORS = re.compile("[<>=^~|,;]+")
_OPERATOR = re.compile("[<>=^~|,;]")  # the check: three times faster than with the "+"


def _words(query: str) -> list[str]:
    words = []
    text = unicodedata.normalize("NFKC", query)
    for raw in (_OPERATORS.sub(" ", text) if _OPERATOR.search(text) else text).split():
        word = raw.strip(_EDGE_PUNCT).lower()
        if word:
            words.append(word)
    return words


# A lower-case letter or digit before an upper-case one, or an acronym before a capitalised
# word: where a camelCase or PascalCase name joins its words (``maxRetries``, ``OOMKilled``).
# Written to start at the upper-case letter, so that a search skips to one in C: 0.3 us against
# 1.2 us for a question (the plain alternation was tried at every character).
_CAMEL_JOIN = re.compile("[A-Z](?:(?<=[a-z0-9][A-Z])|(?<=[A-Z][A-Z])(?=[a-z]))")
_CAMEL_PART = re.compile("[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def _product(name: str, parts: Sequence[str]) -> bool:
    """A capitalised word and an acronym (``PostgreSQL``, ``MySQL``, ``GraphQL``): a product's
    name, written as one word in every fact that names it."""
    return name[0].isupper() and parts[-1].isupper() and not parts[0].isupper()


def _camel_phrases(query: str) -> list[str]:
    """The words of each camelCase or PascalCase name in ``query``, as one phrase each
    (``maxRetries`` -> ``max retries``): the word index keeps the name as one token, so a
    question naming it in another case than the fact (``max_retries``, ``HARBOR_LOG_LEVEL``,
    "max retries") found nothing. A name whose parts are not all two characters or more
    (``iPhone``), or a product's name (``_product``), is left alone."""
    phrases = []
    for name in re.findall("[A-Za-z0-9]+", unicodedata.normalize("NFKC", query)):
        if _CAMEL_JOIN.search(name):
            parts = _CAMEL_PART.findall(name)
            if len(parts) > 1 and all(len(p) > 1 for p in parts) and not _product(name, parts):
                phrases.append(" ".join(parts).lower())
    return phrases


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


# In a query that mixes scripts, each word outside the CJK runs is given this many times: a
# two-character CJK word comes as three terms (its bigram and its characters), so ``etl.keytab``
# beside ``文件放在哪里`` weighed a third of a CJK word and lost to facts that merely hold
# ``文件放在``. FTS5's bm25 has no weight per phrase, but a phrase given twice counts twice, and so
# it does in the coverage re-scoring. Keyword R@5 / MRR with 1, 2, 3, 4: held-out zh 0.954/0.908,
# 0.957/0.923, 0.957/0.929, 0.954/0.930; zh_memory (with ja+ko) 0.961/0.903, 0.974/0.914,
# 0.969/0.922, 0.969/0.922. Three is the parity of the count, and the plateau of both sets.
MIXED_WORD_WEIGHT = 3


# A character ``str.isalnum`` says True for: ``\w`` is those and "_" (both test ``Py_UNICODE_ISALNUM``).
_ALNUM = re.compile(r"[^\W_]")


def keyword_terms(query: str, *, characters: bool = True, written: bool = False) -> list[str]:
    """The search terms of a query: words (English clitics off, ``english.without_clitic``) minus
    stopwords, camelCase names also as their words (``_camel_phrases``), CJK runs as the tokens of
    their pieces (question words and particles cut out, see ``cjk.query_terms``; ``written``: CJK
    pieces also as the query writes them, for grep). With
    CJK tokens (``characters``), the other words come ``MIXED_WORD_WEIGHT`` times."""
    words: list[str] = []
    runs: list[str] = []
    for word in _words(query):
        if word.isascii():  # no CJK run, one part, its edges stripped already (``_words``)
            if found := without_clitic(word):
                words.append(found)
            continue
        runs += CJK_RUN.findall(word)
        words += [
            w for w in (without_clitic(p.strip(_EDGE_PUNCT)) for p in CJK_RUN.sub(" ", word).split()) if w
        ]
    if _CAMEL_JOIN.search(query if query.isascii() else unicodedata.normalize("NFKC", query)):
        words += _camel_phrases(query)  # full-width names too (ＵｓｅｒＩｄ)
    content = [w for w in words if w not in STOPWORDS] or ([] if runs else words)
    terms = [w for w in dict.fromkeys(content) if _ALNUM.search(w)]
    cjk_terms = query_terms(runs, characters=characters, written=written)
    if characters and cjk_terms:
        terms *= MIXED_WORD_WEIGHT
    return terms + cjk_terms
