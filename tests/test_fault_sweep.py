"""What the fault sweep (bench/fault_sweep.py) found, pinned deterministically: each test here
failed before its fix. Real homes, real index files, real processes where a process matters.
"""

from __future__ import annotations

from pathlib import Path

from coffer_memory import MemoryNotFound, MemoryService
from coffer_memory._config import Settings


def test_a_rebuild_by_another_process_never_hides_a_fact_from_a_running_reader(tmp_home: Path) -> None:
    """``reindex --rebuild`` dropped a store's rows and committed before indexing the files again:
    a long-lived process reading meanwhile (a server, coffer-mcp) answered MEMORY_NOT_FOUND for
    facts on disk and recalled nothing (bench/fault_sweep.py: a REST edit refused with 404 while
    the CLI rebuilt; with 300 facts two reads in three missed). A reader now sees the rows from
    before the rebuild until it commits.
    """
    # Every store counts as large and its full scan is never due: the reader answers from the
    # state it read last (what a server does between full scans).
    settings = Settings.load(tmp_home, reconcile_full_scan_max_files=0, reconcile_full_scan_seconds=3600)
    seen: list[tuple[bool, bool]] = []
    with MemoryService(settings=settings) as reader, MemoryService(settings=settings) as rebuilder:
        ids = [
            reader.remember(f"Fact {i}: the kiln{i}q runs hot.", title=f"kiln {i}", scope="global").fact.id
            for i in range(6)
        ]
        for _ in range(2):  # the first read after its own writes scans; the next one keeps the state
            assert reader.recall("kiln3q", stores=["global"], mode="keyword").hits

        def during(store: str, done: int, total: int) -> None:
            if store != "global" or seen:
                return
            try:
                found = reader.get_fact(ids[3], store="global").fact.id == ids[3]
            except MemoryNotFound:
                found = False
            hits = [h.id for h in reader.recall("kiln3q", stores=["global"], mode="keyword").hits]
            seen.append((found, ids[3] in hits))

        rebuilder.reindex("global", rebuild=True, progress=during)
        assert seen == [(True, True)]
        assert [h.id for h in reader.recall("kiln3q", stores=["global"], mode="keyword").hits] == [ids[3]]
        assert not reader.doctor().index_mismatches
