"""What fix24 left open (a constraint written into one of index.db's tables, a ledger another
process holds or overwrites, a trigger planted under a running process), pinned: each test here
failed before its fix. Real homes, real SQLite files, ``coffer`` in a subprocess.
"""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from test_attack_home_entries import _coffer

from coffer_memory import MemoryService
from coffer_memory._index import shape

# Another program's constraint in the SQL of one of the index's tables: written into the schema
# (``PRAGMA writable_schema``, as a tool that "fixes" a schema does), or the table made again with it.
CONSTRAINED = {
    "check-chunks": ("chunks", ", CHECK (position < 0))"),
    "check-documents": ("documents", ", CHECK (title != 'kettle'))"),
    "unique-remade": ("chunks", None),
}
# The chunks table made again, with its rows and its index, and one more constraint: a second
# fact of a store refused.
REMADE = """
CREATE TABLE chunks_new (id TEXT PRIMARY KEY, document_id TEXT NOT NULL, kind TEXT NOT NULL,
    resource_name TEXT NOT NULL, position INTEGER NOT NULL, UNIQUE (kind, resource_name));
INSERT INTO chunks_new SELECT * FROM chunks;
DROP TABLE chunks;
ALTER TABLE chunks_new RENAME TO chunks;
CREATE INDEX idx_chunks_document ON chunks(document_id);
"""


def _constrain(index: Path, how: str) -> None:
    table, tail = CONSTRAINED[how]
    conn = apsw.Connection(str(index))
    if tail is None:
        conn.execute(REMADE)
        conn.close()
        return
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    new = sql.rstrip().removesuffix(")") + tail
    conn.execute("PRAGMA writable_schema=ON")
    conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (new, table))
    # As SQLite's docs ask of such an edit: other connections then read the schema again.
    (cookie,) = conn.execute("PRAGMA schema_version").fetchone()
    conn.execute(f"PRAGMA schema_version = {cookie + 1}")
    conn.execute("PRAGMA writable_schema=OFF")
    conn.close()


@pytest.mark.parametrize("how", sorted(CONSTRAINED))
def test_a_constraint_written_into_an_index_table_is_damage(tmp_home: Path, how: str) -> None:
    """A ``CHECK`` (or a ``UNIQUE``) another program wrote into the SQL of one of the index's
    tables: ``remember`` made its file durable but left it unindexed, and ``reindex``, ``recall``
    and ``doctor`` died with a raw ``ConstraintError`` (the CLI's "unexpected"). The shape check
    compares each table's SQL with the one the migrations make: such a file is moved aside and
    rebuilt from the files, and the fact written meanwhile is found."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
    _constrain(tmp_home / "index.db", how)
    proc = _coffer(tmp_home, "remember", "The kettle whistles.", "--store", "global", "--title", "kettle")
    assert proc.returncode == 0, proc.stderr
    assert "unexpected" not in proc.stderr and "Traceback" not in proc.stderr
    for args in (("reindex",), ("recall", "kettle whistles", "--store", "global", "--mode", "keyword")):
        proc = _coffer(tmp_home, *args)
        assert proc.returncode == 0, proc.stderr
        assert "unexpected" not in proc.stderr and "Traceback" not in proc.stderr
    assert "kettle" in proc.stdout
    proc = _coffer(tmp_home, "doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("repaired: ")]
    assert CONSTRAINED[how][0] in line and "moved to index.db.corrupt-" in line


@pytest.mark.parametrize("how", sorted(CONSTRAINED))
def test_a_constraint_written_under_a_running_service_is_met_as_damage(tmp_home: Path, how: str) -> None:
    """The same written while a service holds the index open: the write that meets it is durable
    (its receipt says the index is pending), never a raw ``ConstraintError``; the next read moves
    the file aside, rebuilds it and finds the fact."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
        _constrain(tmp_home / "index.db", how)
        kettle = svc.remember("The kettle whistles.", title="kettle", scope="global")
        assert kettle.receipt is not None
        found = {h.title for h in svc.recall("kettle whistles", stores=["global"], mode="keyword").hits}
        assert found == {"kettle"}
        (repair,) = svc.doctor().index_repairs
        assert CONSTRAINED[how][0] in repair


def test_the_index_knows_the_sql_its_migrations_give_each_table(tmp_home: Path) -> None:
    """``shape.TABLE_SQL`` is what the migrations make: a migration that changed a table without
    saying so there would have every index moved aside (and rebuilt) at its next open."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
        made = dict(svc.db.rows("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
    found = {name: shape.table_sql(made.get(name)) for name in shape.TABLE_SQL}
    assert found == shape.TABLE_SQL, {n: f"{c:#010x}" for n, c in found.items()}
    assert set(shape.TABLE_SQL) == {*shape.PLAIN_TABLES, *shape.FTS_TABLES}
