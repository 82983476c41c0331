"""``coffer import`` of a large archive prints a summary, not a line per file (fixes16: a 10k-fact
archive printed a 10,001-line table): the first entries (conflicts and skipped files first), the
counts, and ``--full`` for every entry."""

from __future__ import annotations

from pathlib import Path

from conftest import CliRunner

from coffer_memory import MemoryService
from coffer_memory._cli.porting import SHOWN_ENTRIES

FACTS = SHOWN_ENTRIES + 15


def test_a_large_import_lists_the_first_entries_and_counts(cli: CliRunner, tmp_path: Path) -> None:
    source = tmp_path / "source-home"
    with MemoryService(source) as svc:
        for i in range(FACTS):
            svc.remember(f"Fact number {i} about the widgets.", scope="global", title=f"fact {i}")
        svc.export_memory(tmp_path / "all.zip")
    out = cli("import", str(tmp_path / "all.zip"), home=tmp_path / "one")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert sum(" global " in line for line in lines) == SHOWN_ENTRIES
    assert f"and {FACTS - SHOWN_ENTRIES} more entries not listed ({FACTS} in all; --full" in out.stdout
    assert lines[-1].endswith(f"wrote {FACTS} file(s) ({FACTS} created)")
    full = cli("import", "--dry-run", "--full", str(tmp_path / "all.zip"), home=tmp_path / "two")
    assert full.returncode == 0, full.stderr
    assert sum(" global " in line for line in full.stdout.splitlines()) == FACTS
    assert "not listed" not in full.stdout
