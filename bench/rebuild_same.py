"""A cold rebuild writes the same index rows before and after a change: every table dumped, to compare.

``build`` writes a home of N bench facts (``bench/limit.py``'s corpus) with the checkout's code.
``dump`` deletes the home's index, rebuilds it from the files (``MemoryService.reindex``) with the
code of ``--coffer-src`` (default: this checkout), and writes every table of the index, the
FTS5 shadow tables' blobs too, each table's rows sorted, one ``repr`` a line. The columns that
say when (``store_state``'s scan times) or what the file system said within the racy window
(``file_ctime_ns`` of a file changed less than 2 s before, kept as -1) are written as ``T``:
dump a home whose files are older than that. Run it with the code before and after and compare:

    .venv/bin/python bench/rebuild_same.py build /tmp/same10k --facts 10000
    .venv/bin/python bench/rebuild_same.py dump /tmp/same10k /tmp/before.txt --coffer-src /tmp/base
    .venv/bin/python bench/rebuild_same.py dump /tmp/same10k /tmp/after.txt
    cmp /tmp/before.txt /tmp/after.txt
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

for i, arg in enumerate(sys.argv):  # before anything imports coffer_memory
    if arg == "--coffer-src" and i + 1 < len(sys.argv):
        sys.path.insert(0, os.path.abspath(sys.argv[i + 1]))

import apsw  # noqa: E402

import coffer_memory  # noqa: E402
from coffer_memory import MemoryService, Settings  # noqa: E402

sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
from _limit_corpus import write_corpus  # noqa: E402

# Columns whose value is a time of the run, not of the files.
WHEN = {"store_state": {"last_full_scan", "last_scan", "scanned_at"}}


def build(home: Path, facts: int) -> None:
    """``facts`` bench facts in a project store and the global one (``limit.py``'s corpus)."""
    repo = home.parent / f"{home.name}-repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    with MemoryService(settings=Settings.load(home)) as svc:
        write_corpus(svc, repo, facts)


def dump(home: Path, out: Path) -> int:
    """Rebuild ``home``'s index from its files and write every table's rows; the row count."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{home / 'index.db'}{suffix}").unlink(missing_ok=True)
    with MemoryService(settings=Settings.load(home)) as svc:
        svc.reindex()
    conn = apsw.Connection(str(home / "index.db"), flags=apsw.SQLITE_OPEN_READONLY)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    written = 0
    with out.open("w") as f:
        for table in tables:
            columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
            when = {i for i, c in enumerate(columns) if c in WHEN.get(table, ()) or c == "file_ctime_ns"}
            try:
                rows = list(conn.execute(f'SELECT * FROM "{table}"'))
            except apsw.Error as exc:  # a virtual table that cannot be read as a whole
                f.write(f"## {table}: {type(exc).__name__}\n")
                continue
            f.write(f"## {table} {len(rows)} {columns}\n")
            shown = [tuple("T" if i in when else v for i, v in enumerate(r)) for r in rows]
            for row in sorted(shown, key=repr):
                f.write(repr(row) + "\n")
            written += len(rows)
    conn.close()
    return written


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write a home of bench facts")
    b.add_argument("home", type=Path)
    b.add_argument("--facts", type=int, default=10_000)
    d = sub.add_parser("dump", help="rebuild a home's index and dump every table")
    d.add_argument("home", type=Path)
    d.add_argument("out", type=Path)
    d.add_argument("--coffer-src", help="the checkout whose code rebuilds (read before the imports)")
    args = parser.parse_args()
    if args.command == "build":
        build(args.home, args.facts)
        return
    rows = dump(args.home, args.out)
    print(f"{rows} rows of {args.home} rebuilt by {Path(coffer_memory.__file__).parent.parent} -> {args.out}")


if __name__ == "__main__":
    main()
