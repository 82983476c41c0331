"""A column added to or dropped from one of FTS5's own tables (``documents_fts_data``, ``_idx``,
``_content``, ``_docsize``, ``_config``; ``documents_words``' likewise), with no constraint word
in it: the check of those tables' SQL compared only their constraint words with what this SQLite
makes, so such a table passed it and ``doctor`` said all was well, while FTS5 read and wrote
rows of another layout than its own. The columns are compared now, by name and in order: such a
file is moved aside and rebuilt from the files. Real homes, ``ALTER TABLE`` by another
connection, ``coffer`` in a subprocess."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from test_attack_home_entries import _coffer
from test_attack_left_open4 import _clean, _kiln

# Each own table with a column of it that is no key (the one dropped).
OWN = {
    "documents_fts_data": "block",
    "documents_fts_idx": "pgno",
    "documents_fts_content": "c3",
    "documents_fts_docsize": "sz",
    "documents_fts_config": "v",
    "documents_words_data": "block",
    "documents_words_docsize": "origin",
}


def _alter(index: Path, sql: str) -> None:
    conn = apsw.Connection(str(index))
    conn.execute(sql)
    conn.close()


@pytest.mark.parametrize("change", ["add", "drop"])
@pytest.mark.parametrize("table", sorted(OWN))
def test_a_column_added_to_or_dropped_from_fts5s_own_table_is_damage(
    tmp_home: Path, table: str, change: str
) -> None:
    _kiln(tmp_home)
    index = tmp_home / "index.db"
    if change == "add":
        _alter(index, f"ALTER TABLE {table} ADD COLUMN extra")
    else:
        _alter(index, f"ALTER TABLE {table} DROP COLUMN {OWN[table]}")
    steps = [
        ("doctor",),
        ("remember", "The kettle boils over.", "--store", "global", "--title", "boils"),
        ("recall", "kettle boils", "--store", "global", "--mode", "keyword"),
    ]
    said = [_coffer(tmp_home, *args) for args in steps]
    for proc in said:
        _clean(proc)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    (line,) = [ln for ln in said[0].stdout.splitlines() if ln.startswith("repaired: ")]
    assert table in line and "moved to index.db.corrupt-" in line, line
    assert "boils" in said[2].stdout, said[2].stdout
