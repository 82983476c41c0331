"""Text as PostgreSQL holds and searches it: what ``text`` may hold, LIKE literals, tsquery terms."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..cjk import index_forms

_PUNCT = re.compile(r"[^\w]+")
# What substrings (``ILIKE``) are searched in: a chunk's NFKC form in lower case where NFKC changes
# its text (``searched``), else its text, as SQLite's trigram index holds it (``cjk.index_forms``).
SEARCHED = "coalesce(c.searched, c.text)"


def searched_form(text: str) -> str | None:
    """The ``searched`` column of a chunk's text: its NFKC form in lower case, None when that is
    the text (ASCII: no work)."""
    _, searched, written = index_forms(text)
    return None if written is None else searched


def storable(text: str) -> str:
    """``text`` as PostgreSQL's ``text`` can hold it: NUL (which a hand-edited file or a YAML
    ``\\0`` may carry) and lone surrogates (a YAML ``\\ud800``) become U+FFFD. Rejected as they
    are, one such document failed every push of its store, and so every recall of it."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    return text


# Tokens PostgreSQL's parser keeps whole where SQLite's tokenizer splits them: paths
# (``kv/team/payments``, ``src/app/main.py``), hosts and dotted names, e-mail addresses.
_JOINED = re.compile(r"\w+(?:[./@:\\]+\w+)+")


def with_parts(text: str) -> str:
    """``text`` followed by the parts of each token PostgreSQL's parser would keep whole
    (``kv/team/payments`` -> ``kv team payments``), so a recall of ``payments`` finds it, as on
    SQLite; the whole token stays too (a query of the whole path still matches it)."""
    parts = [" ".join(_PUNCT.sub(" ", m.group()).split()) for m in _JOINED.finditer(text)]
    return f"{text}\n{' '.join(parts)}" if parts else text


def escape_like(term: str) -> str:
    """``term`` as a LIKE pattern's literal text (backslash is the escape character)."""
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def tsquery_terms(terms: Sequence[str]) -> list[str]:
    """Each term, and beside it the same term with punctuation as spaces when that differs.

    PostgreSQL's parser keeps ``make-release`` whole next to its parts, so the term alone asks
    for a token that ``make release`` in a text lacks; ``infra/k8s`` is one token in the text
    and in the query, so the spaced form alone would miss it. Asking for either matches both.
    """
    out: list[str] = []
    for term in terms:
        spaced = " ".join(_PUNCT.sub(" ", term).split())
        out.extend(dict.fromkeys(t for t in (term, spaced) if t))
    return out


# What to do about a server's refusal, by the words of its message (libpq gives connection
# failures no SQLSTATE): the member reads one line and knows which part of the URL to fix.
_ADVICE = (
    (
        "password authentication failed",
        "check the user name and password in the URL (COFFER_PG_URL, "
        "the keyring's index.credential_ref, or PGPASSWORD / ~/.pgpass)",
    ),
    (
        "no password supplied",
        "put the password in the URL (COFFER_PG_URL, the keyring's "
        "index.credential_ref) or in PGPASSWORD / ~/.pgpass",
    ),
    (
        "does not exist",
        "correct the name in the URL, or have the database and roles created as docs/team.md ('Roles') shows",
    ),
    ("Connection refused", "is PostgreSQL running there? check the host and port in the URL"),
    (
        "no pg_hba.conf entry",
        "the server does not let this user reach this database from here: "
        "its administrator adds a line to pg_hba.conf",
    ),
    (
        "permission denied for schema",
        "this role may not create coffer's tables: start coffer once as "
        "the database's owner, which creates them (docs/team.md, 'Roles'), or GRANT CREATE ON SCHEMA "
        "public to this role",
    ),
)


def advised(message: str) -> str:
    """``message`` (a server's refusal), followed by what to do about it when that is known."""
    for words, advice in _ADVICE:
        if words in message:
            return f"{message}: {advice}"
    return message
