"""A chunk row whose document is not there (the index out of step with itself: another program
deleted a ``documents`` row, or rewrote a chunk id into one of the right shape that names no
document). A keyword recall that met the row raised nothing and answered without the fact, in
every face, until ``doctor`` was run (and ``doctor`` passed a well-shaped id naming no document).
It is damage now, as other values another program writes are: the recall that meets it rebuilds
the index from the files and answers the fact, and ``doctor`` names it. Real homes, the file
written by another connection, ``coffer`` in a subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_chunk_ids import _kiln, _tamper, doctor_says, recall_answers, tampered

from coffer_memory import MemoryService
from coffer_memory._index.keys import store_scope

KILN = "(SELECT id FROM documents WHERE title = 'kiln')"
# How another program puts the index out of step (the kiln fact's rows), and the table the
# damage is said of.
TAMPERED = {
    "fts-names-no-document": (
        f"UPDATE documents_fts SET chunk_id = '{store_scope('global')}:nosuchdoc:0' WHERE text LIKE '%kiln%'",
        "documents_fts",
    ),
    "fts-one-colon": (
        "UPDATE documents_fts SET chunk_id = 'abc:def' WHERE text LIKE '%kiln%'",
        "documents_fts",
    ),
    "document-row-gone": (f"DELETE FROM documents WHERE id = {KILN}", "chunks"),
    "chunks-name-no-document": (
        f"UPDATE chunks SET document_id = 'nosuchdoc' WHERE document_id = {KILN}",
        "chunks",
    ),
}


@pytest.mark.parametrize("how", sorted(TAMPERED))
def test_a_chunk_row_with_no_document_is_damage_rebuilt_from_the_files(tmp_home: Path, how: str) -> None:
    sql, said = TAMPERED[how]
    bad = tampered(tmp_home, sql)
    recall_answers(tmp_home, "keyword")
    assert list(tmp_home.glob("index.db.corrupt-*")), "the recall rebuilt nothing"
    for moved in tmp_home.glob("index.db.corrupt-*"):
        moved.unlink()
    doctor_says(tmp_home, bad, said)


def test_a_document_row_deleted_under_a_running_service_is_met_by_its_next_recall(tmp_home: Path) -> None:
    """Under a service holding the index open (coffer-api, coffer-mcp), with the rows of earlier
    recalls kept: the next recall after the change meets it."""
    _kiln(tmp_home)
    with MemoryService(tmp_home) as svc:
        assert [h.title for h in svc.recall("kiln", stores=["global"], mode="keyword").hits] == ["kiln"]
        _tamper(tmp_home / "index.db", f"DELETE FROM documents WHERE id = {KILN}")
        assert [h.title for h in svc.recall("kiln", stores=["global"], mode="keyword").hits] == ["kiln"]
        assert "chunks" in svc.db.repairs()[-1]
