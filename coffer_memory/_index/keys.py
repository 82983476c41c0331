"""Identifiers shared by the index tables: store scopes, chunk ids, the first chunk's header mark."""

from __future__ import annotations

import functools
import hashlib

KIND = "memory"
# Ends the title/description header of a first chunk; an invisible separator that no
# tokenizer indexes, so hits can drop the header without guessing.
HEADER_END = "\n\u2063\n"
# A trigram row's text as its fact writes it (``documents_fts``): ``written`` where the ``text``
# searched is its NFKC form in lower case (``cjk.index_forms``), else ``text`` itself.
SHOWN = "coalesce(written, text)"


@functools.cache  # a rebuild asks twice per file; a home has a handful of stores
def store_scope(store: str, kind: str = KIND) -> str:
    """The 12-hex digest of (kind, store) that keeps chunk ids unique across stores."""
    return hashlib.sha256(f"{kind}\x00{store}".encode()).hexdigest()[:12]


def chunk_id(store: str, document_id: str, position: int) -> str:
    """``<store-scope>:<doc-id>:<position>`` (the chunks table's id)."""
    return f"{store_scope(store)}:{document_id}:{position}"


def vec_chunk_id(document_id: str, position: int, window: int = 0) -> str:
    """``<doc-id>:<position>``, or ``<doc-id>:<position>:<window>`` for a chunk's later vector
    windows: the bare id of a vec0 row (the vec table is per store)."""
    return f"{document_id}:{position}:{window}" if window else f"{document_id}:{position}"


def chunk_of_vec_id(bare: str) -> tuple[str, int]:
    """The document id and chunk position of a vec0 row's bare id (either form)."""
    parts = bare.split(":")
    return parts[0], int(parts[1])


def document_id_of_chunk(chunk: str) -> str:
    """The document id inside a chunk id of either form."""
    parts = chunk.split(":")
    return parts[-2]


def strip_header(text: str) -> str:
    """A chunk's text without the header ``rows.indexed_chunks`` put in front of the first one."""
    _, sep, rest = text.partition(HEADER_END)
    return rest if sep else text
