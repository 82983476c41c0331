"""One long file whose every chunk holds a word must not hide the other facts that hold it.

Keyword recall ranks chunks and keeps one hit per document, from the first ``4 x limit`` ranked
chunks. A hand-written file of a few hundred KB using the word on every page filled all of them:
``recall zeta --limit 50`` answered the long file alone where seven facts hold ``zeta`` (found by
review28, session 28). A real home, the long file written beside the facts as a user would.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_attack_home_entries import _coffer

from coffer_memory import MemoryService

SMALL = 6
PARAGRAPH = "The zeta word appears in this long paragraph of filler text, page after page. " * 6


def _home_with_long_file(home: Path, sections: int = 800) -> Path:
    with MemoryService(home) as svc:
        for i in range(SMALL):
            svc.remember(f"Small note {i} about zeta rays.", title=f"small {i}", scope="global")
    folder = next(home.rglob("small-0*.md")).parent
    body = "\n\n".join(f"Section {i}. {PARAGRAPH}" for i in range(sections))
    long_file = folder / "long.md"
    long_file.write_text(f"---\ntitle: long\n---\n\n{body}\n")
    return long_file


@pytest.mark.parametrize("limit", [3, 7, 10, 50])
def test_a_long_file_does_not_hide_the_other_facts(tmp_home: Path, limit: int) -> None:
    _home_with_long_file(tmp_home)
    with MemoryService(tmp_home) as svc:
        svc.reindex()
        hits = svc.recall("zeta", stores=["global"], mode="keyword", limit=limit).hits
    assert len(hits) == min(limit, SMALL + 1)
    assert len({h.id for h in hits}) == len(hits)
    if limit > SMALL:
        assert {h.title for h in hits} == {"long", *(f"small {i}" for i in range(SMALL))}


def test_a_filtered_recall_and_a_fragment_too(tmp_home: Path) -> None:
    """The per-store paths: a filter (a query per store) and the trigram fallback (a fragment the
    word index cannot answer) keep one hit per document the same way."""
    _home_with_long_file(tmp_home)
    with MemoryService(tmp_home) as svc:
        svc.reindex()
        filtered = svc.recall("zeta", stores=["global"], mode="keyword", limit=10, since="2000-01-01").hits
        fragment = svc.recall("zet", stores=["global"], mode="keyword", limit=10).hits
    assert len({h.id for h in filtered}) == SMALL + 1
    assert len({h.id for h in fragment}) == SMALL + 1


def test_the_cli_lists_every_fact(tmp_home: Path) -> None:
    _home_with_long_file(tmp_home)
    out = _coffer(
        tmp_home, "recall", "zeta", "--store", "global", "--mode", "keyword", "--limit", "50", "--json"
    )
    assert out.returncode == 0, out.stderr
    hits = json.loads(out.stdout)["hits"]
    assert len({h["id"] for h in hits}) == SMALL + 1
