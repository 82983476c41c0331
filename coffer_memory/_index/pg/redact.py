"""A connection string's password kept out of every message and log line, by its structure.

The password is found where libpq reads one (a URL's user information, a ``password`` query
parameter, a ``password=`` pair) and that field alone is replaced. Replacing the password's text
wherever it occurred mangled messages when it was short or common (``a`` turned
``connection to server at`` into ``connection to server ***t``; one equal to the user name hid
the name) and missed the fragments libpq echoes of a URL it cannot read. So a message about a
URL libpq cannot read is made from the URL with its password replaced, and a URL libpq would
read another way than it is written (an unencoded ``@`` or ``/`` in the password, which moves
part of it into the host or database name of every later message) is refused before it is used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import unquote

import psycopg

from ..._errors import InvalidInput
from .failures import first_line

SHOWN = "***"
# ``scheme:`` and its slashes, whatever the scheme (a typo in it is still a URL to the reader).
_URL_HEAD = re.compile(r"\s*[A-Za-z][\w+.-]*:/+")
# A ``password`` pair of the key=value form: its value is single-quoted (backslash escapes) or
# runs to the next space (libpq's grammar).
_PAIR = re.compile(r"(?<![\w.-])(password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s']\S*)")
_NOTHING_READ = "write it as postgresql://user:password@host:port/database (docs/team.md, 'Set-up')"


def _split_url(url: str) -> tuple[str, str, str | None, str, str] | None:
    """``(head, user, password, rest, query)`` of a URL, or None for the key=value form. The user
    information runs to the last ``@`` before the query, so that everything a password may hold,
    written right or not, counts as the password; ``password`` is None when there is no ``:``."""
    head = _URL_HEAD.match(url)
    if head is None:
        return None
    body, mark, query = url[head.end() :].partition("?")
    at = body.rfind("@")
    if at < 0:
        return url[: head.end()], "", None, body, mark + query
    user, colon, password = body[:at].partition(":")
    return url[: head.end()], user, password if colon else None, body[at:], mark + query


def _redact_query(query: str) -> str:
    """A URL's query with the value of each ``password`` parameter replaced."""
    if not query:
        return query
    params = query[1:].split("&")
    for i, param in enumerate(params):
        key, eq, _ = param.partition("=")
        if eq and unquote(key).strip().lower() == "password":
            params[i] = f"{key}={SHOWN}"
    return "?" + "&".join(params)


def redact(conninfo: str) -> str:
    """``conninfo`` (a URL or key=value pairs) with each password field as ``***``; the rest as
    written, character for character."""
    parts = _split_url(conninfo)
    if parts is None:
        return _PAIR.sub(lambda m: m.group(1) + SHOWN, conninfo)
    head, user, password, rest, query = parts
    credentials = f"{user}:{SHOWN}" if password is not None else user
    return f"{head}{credentials}{rest}{_redact_query(query)}"


def scrub(text: str, conninfo: str) -> str:
    """``text`` (an error message, a log line) with ``conninfo`` in it shown redacted. Nothing
    else in ``text`` changes: libpq's messages about a connection name its host, port, user and
    database, never its password (``refuse_ambiguous`` sees to it that these are what the URL says
    they are), and its messages about a string it cannot read are made from the redacted string
    (``unreadable``)."""
    for form in dict.fromkeys((conninfo, conninfo.strip())):
        if form:
            text = text.replace(form, redact(form))
    return text


def unreadable(conninfo: str) -> InvalidInput:
    """``InvalidInput`` for a connection string libpq cannot read, saying why in libpq's words
    about the string with its password replaced (its words about the string itself repeat the
    part they stumbled on, which may be the password)."""
    shown = redact(conninfo)
    try:
        psycopg.conninfo.conninfo_to_dict(shown)
    except psycopg.ProgrammingError as exc:
        why = first_line(exc)
    else:  # read once its password is replaced: the password is what libpq cannot read
        why = (
            "its password is not written as a URL holds one: percent-encode '%', spaces, '@', ':' "
            "and '/' in it (%25, %20, %40, %3A, %2F)"
        )
    return InvalidInput(
        f"the PostgreSQL URL is not a connection string libpq reads ({why}): {_NOTHING_READ}",
        field="index.url",
    )


def refuse_ambiguous(conninfo: str, read: Mapping[str, object]) -> None:
    """``InvalidInput`` when libpq reads (``read``) another password from the URL ``conninfo`` than
    is written in its user information: an unencoded ``@`` or ``/`` in the password, whose part after
    it libpq takes for the host or the database, and so repeats in its messages."""
    parts = _split_url(conninfo)
    if parts is None or parts[2] is None:
        return
    if read.get("password") != unquote(parts[2]):
        raise InvalidInput(
            f"libpq reads the PostgreSQL URL {redact(conninfo)} another way than it is written: "
            "percent-encode '@', ':' and '/' in the user name and password (%40, %3A, %2F); "
            f"{_NOTHING_READ}",
            field="index.url",
        )
