"""Deleting index rows: one document's (its chunks, its word and trigram index rows, its
documents row) or a whole store's. The vector rows are ``vec.VecIndex``'s to delete."""

from __future__ import annotations

import apsw

from .keys import KIND


def delete_document_rows(conn: apsw.Connection, store: str, document_id: str) -> None:
    """Delete the rows of the document ``document_id`` of ``store`` (inside the caller's transaction)."""
    for table in ("documents_fts", "documents_words"):
        conn.execute(
            f"DELETE FROM {table} WHERE rowid IN "
            "(SELECT rowid FROM chunks WHERE document_id = ? AND resource_name = ?)",
            (document_id, store),
        )
    conn.execute("DELETE FROM chunks WHERE document_id = ? AND resource_name = ?", (document_id, store))
    conn.execute(
        "DELETE FROM documents WHERE kind = ? AND resource_name = ? AND id = ?", (KIND, store, document_id)
    )


def delete_store_rows(conn: apsw.Connection, store: str) -> None:
    """Delete every row of ``store``, its state and broken-file rows included (inside the caller's
    transaction)."""
    conn.execute(
        "DELETE FROM documents_words WHERE rowid IN (SELECT rowid FROM chunks WHERE resource_name = ?)",
        (store,),
    )
    conn.execute("DELETE FROM documents_fts WHERE resource_name = ?", (store,))
    conn.execute("DELETE FROM chunks WHERE resource_name = ?", (store,))
    conn.execute("DELETE FROM documents WHERE resource_name = ?", (store,))
    conn.execute("DELETE FROM store_state WHERE resource_name = ?", (store,))
    conn.execute("DELETE FROM broken_files WHERE resource_name = ?", (store,))
