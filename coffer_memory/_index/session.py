"""Facts of one agent session: their order and their neighbours.

Facts remembered with the same ``origin_session_id`` in a store form a sequence, in id order
(a fact's id is a ULID whose time part is its creation time, to the millisecond; two facts of one
millisecond are ordered by the rest of their ids). ``documents.origin_session`` (schema 8) is
computed from the metadata JSON that the file's frontmatter gives, so a rebuild from the files
gives the same sequences. Recall lets a hit lend part of its score to its neighbours in that
sequence (a reply whose meaning lives in the turn before it), and vector indexing embeds a fact
with its predecessor's last line in front (``predecessor_context``).
"""

from __future__ import annotations

from collections.abc import Sequence

from .db import IndexDB
from .keys import KIND

# The most candidates whose neighbours one query looks up (SQLite's bound parameters are plenty).
MAX_LOOKUP = 200


def neighbours(db: IndexDB, store: str, ids: Sequence[str], depth: int) -> dict[str, list[tuple[str, int]]]:
    """For each of ``ids`` that has a session, up to ``depth`` facts before and after it in that
    session, as ``(id, offset)``: ``-1`` the one just before, ``1`` the one just after.

    One query over ``idx_documents_session``; ids without a session are left out.
    """
    if depth <= 0 or not ids:
        return {}
    wanted = list(dict.fromkeys(ids))[:MAX_LOOKUP]
    side = (
        "(SELECT group_concat(id) FROM (SELECT n.id FROM documents n WHERE n.kind = c.kind "
        "AND n.resource_name = c.resource_name AND n.origin_session = c.origin_session "
        "AND n.id {op} c.id ORDER BY n.id {order} LIMIT {depth}))"
    )
    before = side.format(op="<", order="DESC", depth=int(depth))
    after = side.format(op=">", order="ASC", depth=int(depth))
    rows = db.rows(
        f"SELECT c.id, {before}, {after} FROM documents c WHERE c.kind = ? AND c.resource_name = ? "
        f"AND c.origin_session IS NOT NULL AND c.id IN ({','.join('?' * len(wanted))})",
        (KIND, store, *wanted),
    )
    out: dict[str, list[tuple[str, int]]] = {}
    for fact_id, earlier, later in rows:
        found = [(i, -k) for k, i in enumerate(sorted(str(earlier or "").split(","), reverse=True), 1) if i]
        found += [(i, k) for k, i in enumerate(sorted(str(later or "").split(",")), 1) if i]
        if found:
            out[str(fact_id)] = found
    return out
