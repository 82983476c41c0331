"""A query's terms, with the forms the word index holds (``_index/forms.py``), kept per query text
while the index is unchanged (``snapshot.reading``'s dict), and what must make a warm service
forget them: a write by another process, a reindex, a rebuild.

Each test asks ``db pool`` of a warm service whose index holds no ``dbpool`` (so its terms are
``db`` and ``pool`` alone), then makes the index hold ``dbpool`` in one fact that holds neither
``db`` nor ``pool``: only the joined form finds that fact, so kept terms that outlived the change
would miss it. Every answer is compared with a fresh service's.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from coffer_memory import MemoryService, RecallResult
from coffer_memory._index import reindex as reindex_module
from coffer_memory._store.paths import GLOBAL_STORE

QUERY = "db pool"
JOINED = "Connections go through `dbpool.New()`; at most 20 per pod."
OTHERS = [
    "The pool of workers is 8; the db is sharded by tenant.",
    "A db migration runs before the pool of consumers starts.",
    "The worker pool drains before a deploy.",
]

# Another process remembers JOINED in the global store of the home given as argv[1].
WRITER = """
import sys
from coffer_memory import MemoryService
with MemoryService(sys.argv[1]) as svc:
    svc.remember(sys.argv[2], title="joined", scope="global")
"""


def _hits(result: RecallResult) -> list[tuple[object, ...]]:
    return [(h.id, h.text, h.score, h.title) for h in result.hits]


def _ask(svc: MemoryService) -> list[tuple[object, ...]]:
    return _hits(svc.recall(QUERY, stores=[GLOBAL_STORE], mode="keyword"))


def _fresh(home: Path) -> list[tuple[object, ...]]:
    with MemoryService(home) as other:
        return _ask(other)


@pytest.fixture
def warm(tmp_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryService]:
    """A service that asked ``QUERY`` twice of facts holding ``db`` and ``pool`` apart."""
    monkeypatch.setattr(reindex_module, "RACY_NS", 0)
    with MemoryService(tmp_home) as svc:
        for i, text in enumerate(OTHERS):
            svc.remember(text, title=f"other {i}", scope="global")
        first = _ask(svc)
        assert _ask(svc) == first
        assert all(title != "joined" for *_, title in first)
        yield svc


def _joined_found(svc: MemoryService, home: Path) -> None:
    found = _ask(svc)
    assert "joined" in [title for *_, title in found]
    assert found == _fresh(home)


def test_a_write_by_another_process_makes_the_kept_terms_go(warm: MemoryService, tmp_home: Path) -> None:
    subprocess.run([sys.executable, "-c", WRITER, str(tmp_home), JOINED], check=True, timeout=120)
    _joined_found(warm, tmp_home)


@pytest.mark.parametrize("rebuild", [False, True])
def test_a_reindex_makes_the_kept_terms_go(warm: MemoryService, tmp_home: Path, rebuild: bool) -> None:
    # A file written by hand, which the reindex indexes (a read would too: it is asked after).
    day = "2026-02-01T10:00:00.000+00:00"
    (tmp_home / "memory" / "global" / "knowledge" / "inbox" / "joined.md").write_text(
        f"---\nkind: knowledge\ntitle: joined\ndescription: d\nmetadata:\n  actor: user\n"
        f"created_at: {day}\nupdated_at: {day}\n---\n\n{JOINED}\n",
        encoding="utf-8",
    )
    warm.reindex(rebuild=rebuild)
    _joined_found(warm, tmp_home)


def test_a_write_through_this_service_makes_the_kept_terms_go(warm: MemoryService, tmp_home: Path) -> None:
    warm.remember(JOINED, title="joined", scope="global")
    _joined_found(warm, tmp_home)
