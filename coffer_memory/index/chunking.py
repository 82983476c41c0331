"""Heading- and block-aware Markdown chunking with fixed memory constants."""

from __future__ import annotations

import re

MEMORY_CHUNK_CHARS = 1200
MEMORY_CHUNK_OVERLAP = 120

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def _blocks(text: str) -> list[tuple[str, bool]]:
    """Split into (block, is_heading): fenced code kept whole, paragraphs split on blank lines."""
    blocks: list[tuple[str, bool]] = []
    current: list[str] = []
    fence: str | None = None

    def flush() -> None:
        if current:
            block = "\n".join(current).strip("\n")
            if block.strip():
                blocks.append((block, False))
            current.clear()

    for line in text.splitlines():
        marker = _FENCE.match(line)
        if fence is not None:
            current.append(line)
            if marker and marker.group(1) == fence:
                fence = None
                flush()
            continue
        if marker:
            flush()
            fence = marker.group(1)
            current.append(line)
        elif _HEADING.match(line):
            flush()
            blocks.append((line.strip(), True))
        elif not line.strip():
            flush()
        else:
            current.append(line)
    flush()
    return blocks


def _split_long(block: str, size: int, overlap: int) -> list[str]:
    pieces: list[str] = []
    start = 0
    while start < len(block):
        end = min(len(block), start + size)
        if end < len(block):
            cut = block.rfind("\n", start + size // 2, end)
            if cut == -1:
                cut = block.rfind(" ", start + size // 2, end)
            if cut != -1:
                end = cut
        pieces.append(block[start:end].strip())
        if end >= len(block):
            break
        start = max(end - overlap, start + 1)
    return [p for p in pieces if p]


def chunk_markdown(
    text: str, *, max_chars: int = MEMORY_CHUNK_CHARS, overlap: int = MEMORY_CHUNK_OVERLAP
) -> list[str]:
    """Passages of at most ``max_chars``: a short text is one chunk; sections never share one.

    A section's heading is repeated at the top of each of its chunks so every passage keeps
    its context; a block longer than ``max_chars`` is cut at a line or word boundary with
    ``overlap`` characters carried over.
    """
    stripped = text.strip()
    if not stripped:
        return []
    if len(stripped) <= max_chars:
        return [stripped]
    chunks: list[str] = []
    heading = ""
    parts: list[str] = []

    def emit() -> None:
        body = "\n\n".join(parts).strip()
        if body:
            chunks.append(f"{heading}\n\n{body}" if heading else body)
        parts.clear()

    for block, is_heading in _blocks(stripped):
        if is_heading:
            emit()
            heading = block
            continue
        budget = max_chars - (len(heading) + 2 if heading else 0)
        budget = max(budget, max_chars // 2)
        if len(block) > budget:
            emit()
            for piece in _split_long(block, budget, overlap):
                parts.append(piece)
                emit()
            continue
        used = sum(len(p) + 2 for p in parts)
        if parts and used + len(block) > budget:
            emit()
        parts.append(block)
    emit()
    if not chunks and heading:
        chunks.append(heading)
    return chunks
