"""The index's repair history outlives the index it was noted in: each repair moves the damaged
index aside and rebuilds it, and the history kept in the moved file went with it. Real homes,
index.db changed by another program, ``coffer`` in a subprocess.
"""

from __future__ import annotations

from pathlib import Path

import apsw
from test_attack_home_entries import _coffer

from coffer_memory import MemoryService

# Two changes of another program's, each one a repair (the index moved aside and rebuilt).
CHANGES = ("DROP TABLE kv", "DROP TABLE documents_words; CREATE VIEW documents_words AS SELECT 1 AS text")


def test_every_repair_is_listed_after_the_index_was_replaced_again(tmp_home: Path) -> None:
    """Damage twice: ``coffer doctor`` listed only the last repair (the history lived in the index
    the second repair moved aside). Both are listed, oldest first, and the home recalls."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
    for change in CHANGES:
        conn = apsw.Connection(str(tmp_home / "index.db"))
        conn.execute(change)
        conn.close()
        proc = _coffer(tmp_home, "recall", "kiln", "--store", "global")
        assert proc.returncode == 0 and "kiln" in proc.stdout, proc.stderr
    proc = _coffer(tmp_home, "doctor")
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("repaired: ")]
    assert len(lines) == 2, proc.stdout
    assert "kv" in lines[0] and "documents_words" in lines[1], lines
    moved = sorted(p.name for p in tmp_home.glob("index.db.corrupt-*[0-9]Z"))
    assert all(name in line for name, line in zip(moved, lines, strict=True)), (moved, lines)
    with MemoryService(tmp_home) as svc:  # the library's doctor says the same
        assert [ln.split(": ", 1)[1] for ln in svc.doctor().index_repairs] == [
            ln.removeprefix("repaired: ").split(": ", 1)[1] for ln in lines
        ]
