"""Plain-text tables and one-line summaries for the CLI and the demo (no dependencies)."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from ._models import MemoryHit, StoreInfo
from ._notebook import score_text


def width(text: str) -> int:
    """Terminal columns ``text`` takes: wide (CJK) characters count two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def shorten(text: str, columns: int) -> str:
    """One line of at most ``columns`` terminal columns, with an ellipsis when cut."""
    flat = " ".join(text.split())
    if width(flat) <= columns:
        return flat
    out, used = [], 0
    for char in flat:
        used += width(char)
        if used > columns - 1:
            break
        out.append(char)
    return "".join(out) + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """An aligned text table with a header rule."""
    cells = [[str(c) for c in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(width(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c + " " * (w - width(c)) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


FUSED_NOTE = (
    "# is the order across stores (reciprocal rank fusion of each store's own ranking); "
    "store score compares hits of one store only"
)
"""Said under a table of hits from more than one store, whose scores need not fall down the list."""


def hits_table(hits: Sequence[MemoryHit], *, text_width: int = 60) -> str:
    """Recall hits as a table: rank, score, scope, title, text.

    Hits of several stores are ranked by fusing each store's ranking, not by score (the scores of
    two stores are not comparable): the column is then ``store score`` and a note says so."""
    if not hits:
        return "(no hits)"
    rows = [
        (i, score_text(h.score), h.source.split(":", 1)[0], shorten(h.title, 28), shorten(h.text, text_width))
        for i, h in enumerate(hits, start=1)
    ]
    if len({h.store for h in hits}) < 2:
        return table(("#", "score", "scope", "title", "text"), rows)
    return table(("#", "store score", "scope", "title", "text"), rows) + "\n" + FUSED_NOTE


def stores_table(stores: Sequence[StoreInfo]) -> str:
    """Stores as a table: name, display name, fact count, folder."""
    if not stores:
        return "(no stores yet)"
    rows = [(s.name, s.display_name, s.fact_count, s.store_dir) for s in stores]
    return table(("store", "name", "facts", "folder"), rows)
