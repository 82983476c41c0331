"""What a document's index rows hold: the passages indexed for it (its chunks, the first led by
a header of its title and description) and its ``metadata`` column."""

from __future__ import annotations

import functools
import json
from typing import Any

import apsw

from .._models import MemoryFact
from .._store.files import format_time
from .._store.lanes import journal_sessions
from .._store.paths import project_id_of
from .chunking import chunk_markdown
from .keys import HEADER_END

# ASCII text folded in one ``bytes.translate``: the characters ``str.split`` splits it on made
# spaces, capitals made small (as ``str.lower`` makes them).
_FOLD = bytes(
    32 if b in b"\t\n\v\f\r\x1c\x1d\x1e\x1f" else b + 32 if 65 <= b <= 90 else b for b in range(256)
)


def folded(text: str) -> str:
    """``" ".join(text.split()).lower()``, which ``index_header`` compares: made of ASCII text's
    bytes without a string per word (a rebuild folds every body: splitting them into words and
    joining them again was ~6% of a cold 10k rebuild's instructions, docs/benchmarks.md, rb31)."""
    if not text.isascii():
        return " ".join(text.split()).lower()
    spaced = text.encode().translate(_FOLD).decode()
    while "  " in spaced:  # each pass halves every run of spaces (``in`` on bytes was 3x slower)
        spaced = spaced.replace("  ", " ")
    return spaced.strip(" ")


def index_header(title: str, description: str, body: str) -> str:
    """Title and description lines that the body does not already say, for the first chunk."""
    title, description = title.strip(), description.strip()
    if not title and not description:
        return ""
    # A part found in the body as written is found in it folded (folding keeps a passage's words
    # and their order, and only "Σ" lowers by its neighbours): most descriptions are the body's
    # first sentence, and the body is folded only for a part not found as written.
    body_words = None
    said = bool(title) and "Σ" not in title and title in body
    if title and not said:
        body_words = folded(body)
        said = folded(title).removesuffix("…") in body_words  # derived ones are prefixes
    if (
        not description
        or description == title
        or ("Σ" not in description and description in body)
        or folded(description).removesuffix("…") in (body_words or folded(body))
    ):
        return "" if said or not title else title + HEADER_END
    return description + HEADER_END if said or not title else f"{title}\n{description}{HEADER_END}"


def indexed_chunks(title: str, description: str, body: str) -> list[str]:
    """The passages indexed for a document: its body's chunks, the first one led by its header.

    Keyword and vector search then match a topic's title ("Deploying") even when its body
    never repeats it. ``strip_header`` takes the header off again for display.
    """
    chunks = chunk_markdown(body)
    header = index_header(title, description, body)
    if not header:
        return chunks
    return [header + chunks[0], *chunks[1:]] if chunks else [header.strip()]


@functools.lru_cache(maxsize=256)
def _plain_metadata(actor: str, origin: str | None) -> str:
    return json.dumps({"actor": actor, "origin_session_id": origin})


@functools.lru_cache(maxsize=64)
def project_id(store: str) -> str:
    """The project ULID a store name holds (cached: a rebuild asks per file)."""
    return project_id_of(store)


def metadata_json(fact: MemoryFact, rel: str) -> str:
    """``documents.metadata`` as JSON; most files share one of a few (a rebuild asks per file)."""
    if rel.startswith("journal/"):
        return json.dumps(metadata(fact, rel))
    return _plain_metadata(fact.actor, fact.origin_session_id)


def described(
    fact: MemoryFact, rel: str, times: tuple[str, str] | None = None
) -> tuple[str, str, str, str, str]:
    """What a ``documents`` row says of the fact beside its chunks: ``title``, ``description``,
    ``metadata``, ``created_at`` and ``updated_at`` (``times``: those two as the file wrote them)."""
    created, updated = times or (format_time(fact.created_at), format_time(fact.updated_at))
    return fact.title, fact.description, metadata_json(fact, rel), created, updated


def metadata(fact: MemoryFact, rel: str) -> dict[str, Any]:
    """``documents.metadata``: who wrote the file and, for a journal day, which sessions fed it."""
    meta: dict[str, Any] = {"actor": fact.actor, "origin_session_id": fact.origin_session_id}
    if rel.startswith("journal/"):
        # Distilled entries name their session in the heading; one day file holds many sessions.
        meta["origin_session_ids"] = journal_sessions(fact.body)
    return meta


def write_tags(
    conn: apsw.Connection, document_rowid: int, tags: tuple[str, ...], *, replace: bool = False
) -> None:
    """The ``document_tags`` rows of one document (dropped with it by a trigger)."""
    if replace:
        conn.execute("DELETE FROM document_tags WHERE document_rowid = ?", (document_rowid,))
    for tag in tags:
        conn.execute(
            "INSERT OR IGNORE INTO document_tags (document_rowid, tag) VALUES (?, ?)", (document_rowid, tag)
        )
