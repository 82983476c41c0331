"""chunk_markdown keeps fenced code whole however it is fenced (CommonMark fence rules)."""

from __future__ import annotations

import pytest

from coffer_memory import chunk_markdown

TICKS3, TICKS4, TICKS5 = "`" * 3, "`" * 4, "`" * 5
FILLER = "\n\n".join(f"Paragraph {i} " + "word " * 30 for i in range(4))


def _doc(block: str) -> str:
    return f"# Setup\n\n{FILLER}\n\n{block}\n\nAfter the block " + "more " * 20


def _chunks_with(block: str) -> list[str]:
    chunks = chunk_markdown(_doc(block), max_chars=400, overlap=40)
    assert len(chunks) > 1  # long enough to go through the block splitter
    return chunks


FENCED = {
    "four-ticks-around-three": (
        f"{TICKS4}markdown\nExample:\n{TICKS3}python\n# comment in code\nx = 1\n{TICKS3}\n"
        f"# still inside\n{TICKS4}"
    ),
    "five-ticks-around-four-and-three": (
        f"{TICKS5}\n{TICKS4}md\n{TICKS3}sh\n# comment in code\n{TICKS3}\n{TICKS4}\n# still inside\n{TICKS5}"
    ),
    "tildes-around-ticks": f"~~~md\n{TICKS3}\n# comment in code\n{TICKS3}\n# still inside\n~~~",
    "ticks-around-tildes": f"{TICKS3}\n~~~\n# comment in code\n~~~\n# still inside\n{TICKS3}",
    "indented-in-a-list": f"1. Install:\n\n    {TICKS3}sh\n    # comment in code\n    pip install x\n    {TICKS3}",
    "closing-fence-longer-than-opening": f"{TICKS3}sh\n# comment in code\n{TICKS3}{TICKS3}",
}


@pytest.mark.parametrize("block", FENCED.values(), ids=FENCED.keys())
def test_a_fence_stays_whole_and_its_comments_are_no_headings(block: str) -> None:
    chunks = _chunks_with(block)
    fence = block.split("\n\n")[-1].strip()  # a list item: its text may end the chunk before
    assert any(fence in c for c in chunks), chunks
    assert not any(c.startswith(("# comment", "# still")) for c in chunks)
    # The section heading before the block still heads the chunk that holds it.
    assert all(c.startswith("# Setup") for c in chunks)


def test_an_unclosed_fence_runs_to_the_end() -> None:
    doc = f"# Notes\n\n{FILLER}\n\n{TICKS4}\n{TICKS3}\n# comment in code\n{TICKS3}\n\n# Not a heading\n\ncode"
    chunks = chunk_markdown(doc, max_chars=400, overlap=40)
    assert not any(c.startswith(("# comment", "# Not a heading")) for c in chunks)
    assert any("# Not a heading" in c for c in chunks)


def test_a_backtick_line_with_a_backtick_in_its_info_is_no_fence() -> None:
    doc = f"# One\n\n{FILLER}\n\n{TICKS3}inline` code{TICKS3}\n\n# Two\n\n" + "tail " * 40
    chunks = chunk_markdown(doc, max_chars=400, overlap=40)
    assert any(c.startswith("# Two") for c in chunks)


def test_a_shorter_fence_inside_does_not_close_but_an_equal_one_does() -> None:
    block = f"{TICKS4}\n{TICKS3}\n# comment in code\n{TICKS4}"
    doc = _doc(block) + "\n\n# Next\n\n" + "tail " * 40
    chunks = chunk_markdown(doc, max_chars=400, overlap=40)
    assert any(block in c for c in chunks)
    assert any(c.startswith("# Next") for c in chunks)
