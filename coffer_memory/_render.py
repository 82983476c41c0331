"""Plain-text tables and one-line summaries for the CLI and the demo (no dependencies)."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from ._models import MemoryHit, StoreInfo


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


def score_text(score: float) -> str:
    """A recall score as the table prints it: four significant digits, never an exponent (``.4g``
    alone printed a tiny keyword score as ``2.834e-06``); a score that would take one is written
    with four decimals (``0.0000``, ``12345.6789``)."""
    text = f"{score:.4g}"
    return f"{score:.4f}" if "e" in text else text


def hits_table(hits: Sequence[MemoryHit], *, text_width: int = 60) -> str:
    """Recall hits as a table: rank, score, scope, title, text."""
    if not hits:
        return "(no hits)"
    rows = [
        (i, score_text(h.score), h.source.split(":", 1)[0], shorten(h.title, 28), shorten(h.text, text_width))
        for i, h in enumerate(hits, start=1)
    ]
    return table(("#", "score", "scope", "title", "text"), rows)


def stores_table(stores: Sequence[StoreInfo]) -> str:
    """Stores as a table: name, display name, fact count, folder."""
    if not stores:
        return "(no stores yet)"
    rows = [(s.name, s.display_name, s.fact_count, s.store_dir) for s in stores]
    return table(("store", "name", "facts", "folder"), rows)
