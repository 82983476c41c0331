"""Rich displays for notebooks: records (one dict per row) and escaped HTML and Markdown tables.

The value objects in ``models`` call these from ``to_records``, ``_repr_html_`` and
``_repr_markdown_``. Every text from a fact is escaped: a fact holding ``<script>`` shows it as
text, never runs it.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

CELL_CHARS = 160
"""Longer texts are cut in table cells (``to_records`` keeps them whole)."""


def plain(value: Any) -> Any:
    """A record value: paths as strings, tuples as lists, the rest as is."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    return value


def fields(item: Any) -> dict[str, Any]:
    """An attrs instance's fields, made plain, in declaration order."""
    return {k: plain(v) for k, v in attrs.asdict(item, recurse=False).items()}


def record_of(item: Any) -> dict[str, Any]:
    """One row for ``item``: its own ``to_record()`` if it has one, else its attrs fields."""
    own = getattr(item, "to_record", None)
    if callable(own):
        row: dict[str, Any] = own()
        return row
    return fields(item) if attrs.has(type(item)) else {"value": item}


def score_text(score: float) -> str:
    """A score with four significant digits and never in exponent form, so that scores side by
    side compare at a glance (``4.125e-06`` reads ``0.000004125``, beside ``52.26``)."""
    text = f"{score:.4g}"
    if "e" not in text or not math.isfinite(score):
        return text
    fixed = f"{score:.{max(0, 3 - math.floor(math.log10(abs(score))))}f}"
    return fixed.rstrip("0").rstrip(".") if "." in fixed else fixed


def cell(value: Any) -> str:
    """A value as one short line of text."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    if isinstance(value, float):
        return score_text(value)
    if isinstance(value, list | tuple):
        return ", ".join(cell(v) for v in value)
    text = " ".join(str(value).split())
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def html_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], caption: str = "") -> str:
    """An HTML table of ``columns`` of ``rows``, every cell escaped; with no column, the caption."""
    if not columns:  # an empty listing of unknown items: a table with no column is not a table
        return f"<p><strong>{html.escape(caption)}</strong></p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell(r.get(c)))}</td>" for c in columns) + "</tr>" for r in rows
    )
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def md_escape(text: str) -> str:
    """Text for Markdown: HTML characters as entities (a notebook renders raw HTML in Markdown)."""
    return html.escape(text, quote=False)


def md_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], caption: str = "") -> str:
    """A Markdown table of ``columns`` of ``rows``; pipes and HTML characters escaped."""

    def fmt(value: Any) -> str:
        return md_escape(cell(value)).replace("|", "\\|")

    if not columns:  # as in html_table: "|  |" then "|" is not a table
        return f"**{md_escape(caption)}**"
    lines = [f"**{md_escape(caption)}**", ""] if caption else []
    lines.append("| " + " | ".join(columns) + " |")
    lines.append("|" + "---|" * len(columns))
    lines += ["| " + " | ".join(fmt(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def _about(row: Mapping[str, Any]) -> str:
    return " · ".join(cell(row.get(k)) for k in ("id", "updated_at", "tags", "store") if row.get(k))


def fact_html(row: Mapping[str, Any]) -> str:
    """One fact: its title, a line of facts about it and its body, escaped."""
    meta = _about(row)
    return (
        f"<div><strong>{html.escape(str(row['title']))}</strong>"
        f"<div><small>{html.escape(meta)}</small></div>"
        f'<pre style="white-space: pre-wrap">{html.escape(str(row["body"]))}</pre></div>'
    )


def fact_markdown(row: Mapping[str, Any]) -> str:
    """One fact in Markdown: a heading, a line of facts about it and its body (HTML escaped)."""
    meta = _about(row)
    return f"**{md_escape(str(row['title']))}**\n\n*{md_escape(meta)}*\n\n{md_escape(str(row['body']))}"
