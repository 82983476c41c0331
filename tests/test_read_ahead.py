"""A bulk load reads its new files a window ahead of parsing them (``_index/readahead.py``): each
file's bytes and stat, or the error its read met, reach the indexer in order, as a read then
would have given them; and a rebuild of files that fail to read indexes what it did before."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import pytest

from coffer_memory import MemoryService
from coffer_memory._index import readahead
from coffer_memory._store.files import FactParseError, FileTooLarge, read_bytes


class _Entry(NamedTuple):
    path: str
    absent: bool


def test_read_ahead_gives_each_file_what_its_read_gives_in_order(tmp_path: Path) -> None:
    entries = []
    for i in range(150):  # more than a window
        path = tmp_path / f"f{i}.md"
        path.write_text(f"fact {i}\n" * (i + 1))
        entries.append(_Entry(str(path), absent=i % 7 != 3))
    entries.insert(10, _Entry(str(tmp_path / "gone.md"), absent=True))
    big = tmp_path / "big.md"
    big.write_bytes(b"x" * 5000)
    entries.insert(70, _Entry(str(big), absent=True))
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    entries.insert(100, _Entry(str(fifo), absent=True))
    got = list(readahead.read_ahead(entries, max_bytes=4096))
    assert [entry for entry, _ in got] == entries
    for entry, read in got:
        if not entry.absent:
            assert read is None  # the index has its row: ``index_file`` reads it
            continue
        try:
            expected: object = read_bytes(entry.path, max_bytes=4096)
        except (OSError, FactParseError) as exc:
            assert type(read) is type(exc) and str(read) == str(exc)
            continue
        assert isinstance(read, tuple) and read[0] == expected[0]  # type: ignore[index]
        assert read[1].st_ino == expected[1].st_ino  # type: ignore[index]
    kinds = {Path(e.path).name: type(r) for e, r in got}
    assert kinds["gone.md"] is FileNotFoundError and kinds["big.md"] is FileTooLarge
    assert kinds["pipe.md"] is IsADirectoryError


def test_read_ahead_holds_a_bounded_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readahead, "WINDOW_BYTES", 3000)
    entries = []
    for i in range(40):
        path = tmp_path / f"f{i}.md"
        path.write_bytes(b"y" * 1000)
        entries.append(_Entry(str(path), absent=True))
    reads: list[int] = []
    real = readahead.read_bytes

    def counted(path: str, *, max_bytes: int | None = None) -> tuple[bytes, os.stat_result]:
        reads.append(1)
        return real(path, max_bytes=max_bytes)

    monkeypatch.setattr(readahead, "read_bytes", counted)
    ahead = []
    for n, _ in enumerate(readahead.read_ahead(entries, max_bytes=1 << 20), start=1):
        ahead.append(len(reads) - n)
    assert max(ahead) <= 2  # three files of 1,000 bytes fill the window


def test_a_rebuild_reads_ahead_past_files_that_fail_and_indexes_the_rest(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[memory]\nmax_file_bytes = 4096\n")
    with MemoryService(home=home) as svc:
        for i in range(90):
            svc.remember(f"note number {i} about the quarterly invoices", store="global")
        inbox = svc.target(store="global").store_dir / "knowledge" / "inbox"
        inbox.mkdir(parents=True, exist_ok=True)
        (inbox / "big.md").write_text("quarterly invoices " * 400)  # over the cap: its read fails
        (inbox / "nul.md").write_bytes(b"binary\x00file")  # read, then refused by the parser
    for suffix in ("", "-wal", "-shm"):
        Path(f"{home / 'index.db'}{suffix}").unlink(missing_ok=True)
    with MemoryService(home=home) as svc:
        reports = svc.reindex()
        assert sum(r.added for r in reports) == 90
        hits = svc.recall("quarterly invoices", stores=["global"], mode="keyword", limit=200).hits
        assert len(hits) == 90
        broken = {Path(p).name: e for p, e in svc.index.db.rows("SELECT path, error FROM broken_files")}
        assert set(broken) == {"big.md", "nul.md"} and "max_file_bytes" in broken["big.md"]
