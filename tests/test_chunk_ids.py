"""A chunk id another program rewrote into a text that is no chunk id (``UPDATE documents_fts
SET chunk_id = 'x'``): its storage class is text, as coffer writes, so the rows' value checks
passed it, and every keyword recall that met the row died with a raw ``IndexError`` (the id cut
into its parts), in every face, until the process was gone; ``reindex`` left the row (the file
is unchanged) and ``doctor`` said all was well. It is damage now, as other values another
program writes are: the read that meets it rebuilds the index from the files, and ``doctor``
names it. Real homes, the file written by another connection, ``coffer`` in a subprocess."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from test_attack_home_entries import _coffer

from coffer_memory import MemoryService
from coffer_memory._index.values import values_problem

# How another program rewrites the chunk ids (every row's, or the kiln fact's alone), and the
# column the damage is said of.
TAMPERED = {
    "fts-every-row-x": ("UPDATE documents_fts SET chunk_id = 'x'", "documents_fts.chunk_id"),
    "fts-one-colon": (
        "UPDATE documents_fts SET chunk_id = 'abc:def' WHERE text LIKE '%kiln%'",
        "documents_fts.chunk_id",
    ),
    "fts-empty": (
        "UPDATE documents_fts SET chunk_id = '' WHERE text LIKE '%kiln%'",
        "documents_fts.chunk_id",
    ),
    "fts-no-position": (
        "UPDATE documents_fts SET chunk_id = chunk_id || 'z' WHERE text LIKE '%kiln%'",
        "documents_fts.chunk_id",
    ),
    "chunks-x": (
        "UPDATE chunks SET id = 'x' WHERE document_id = (SELECT id FROM documents WHERE title = 'kiln')",
        "chunks.id",
    ),
}


def _kiln(home: Path) -> None:
    with MemoryService(home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
        svc.remember("The kettle whistles.", title="kettle", scope="global")


def _tamper(index: Path, sql: str) -> None:
    conn = apsw.Connection(str(index))
    conn.execute(sql)
    assert conn.changes() >= 1
    conn.close()


def test_chunk_ids_coffer_writes_are_no_problem(tmp_home: Path) -> None:
    """The shape check passes every id coffer writes (a fact split into several chunks too)."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
        svc.remember("\n\n".join(f"Paragraph {i} about the kiln. " * 35 for i in range(6)), scope="global")
        assert len(svc.db.rows("SELECT id FROM chunks")) > 2
    conn = apsw.Connection(str(tmp_home / "index.db"))
    assert values_problem(conn) is None
    conn.close()


def tampered(home: Path, sql: str) -> bytes:
    """The bytes of ``home``'s index once ``sql`` ran on it (the kiln facts remembered first)."""
    _kiln(home)
    _tamper(home / "index.db", sql)
    return (home / "index.db").read_bytes()


def recall_answers(home: Path, mode: str) -> None:
    """``coffer recall`` in ``mode`` answers the kiln fact, with no raw error."""
    proc = _coffer(home, "recall", "kiln runs hot", "--store", "global", "--mode", mode)
    assert "unexpected" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0 and "kiln" in proc.stdout, proc.stdout + proc.stderr


def doctor_says(home: Path, bad: bytes, said: str) -> None:
    """``coffer doctor`` on the index ``bad`` names ``said`` and moves the file aside."""
    (home / "index.db").write_bytes(bad)
    proc = _coffer(home, "doctor")
    assert "unexpected" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert said in proc.stdout and "moved to index.db.corrupt-" in proc.stdout, proc.stdout


@pytest.mark.parametrize("how", sorted(TAMPERED))
def test_a_chunk_id_that_is_none_is_damage_rebuilt_from_the_files(tmp_home: Path, how: str) -> None:
    sql, said = TAMPERED[how]
    bad = tampered(tmp_home, sql)
    for mode in ("keyword", "grep"):  # a two-part id too: it names no document (test_chunk_orphans.py)
        (tmp_home / "index.db").write_bytes(bad)  # each recall meets the ids afresh
        recall_answers(tmp_home, mode)
    doctor_says(tmp_home, bad, said)


def test_a_chunk_id_rewritten_under_a_running_service_is_met_by_its_next_recall(tmp_home: Path) -> None:
    """Under a service holding the index open (coffer-api, coffer-mcp): every keyword recall
    died with the ``IndexError`` until it was restarted."""
    _kiln(tmp_home)
    with MemoryService(tmp_home) as svc:
        assert [h.title for h in svc.recall("kiln", stores=["global"], mode="keyword").hits] == ["kiln"]
        _tamper(tmp_home / "index.db", "UPDATE documents_fts SET chunk_id = 'x'")
        assert [h.title for h in svc.recall("kiln", stores=["global"], mode="keyword").hits] == ["kiln"]
        assert "documents_fts.chunk_id" in svc.db.repairs()[-1]
