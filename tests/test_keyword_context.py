"""A session fact's word-index row holds its predecessor's last line as low-weight context
(``reindex.KEYWORD_CONTEXT_LINES``, ``fts.CONTEXT_WEIGHT``): the rows, their ranking, and the
rows a rebuild, an edit, a delete and an upgrade from schema 8 leave."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from test_session_neighbours import CHAT, QUESTION, remember_chat

from coffer_memory import MemoryService, Settings
from coffer_memory._index import fts
from coffer_memory._index.cjk import index_text
from coffer_memory._index.db import IndexDB


@pytest.fixture
def svc(tmp_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryService]:
    from coffer_memory import _retrieval

    monkeypatch.setattr(_retrieval, "NEIGHBOUR_MODES", ())  # the word index alone, no lending
    with MemoryService(home=tmp_home) as service:
        yield service


def word_rows(home: Path) -> list[tuple[str, str, str, int]]:
    """Every token of the word index as (chunk id, column, term, offset): what a contentless
    FTS5 table can show of its rows."""
    conn = apsw.Connection(str(home / "index.db"))
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, documents_words, instance)")
        return list(
            conn.execute(
                "SELECT c.id, v.col, v.term, v.offset FROM temp.v v JOIN chunks c ON c.rowid = v.doc "
                "ORDER BY 1, 2, 4, 3"
            )
        )
    finally:
        conn.close()


def context_of(home: Path, fact_id: str) -> list[str]:
    """The terms in the ``context`` column of a fact's first word-index row, in order."""
    return [t for c, col, t, _ in word_rows(home) if c.endswith(f":{fact_id}:0") and col == "context"]


def terms(text: str) -> list[str]:
    """``text`` as the word index's tokenizer gives it."""
    conn = apsw.Connection(":memory:")
    tokenize = conn.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
    found = tokenize(
        index_text(text).encode(),
        apsw.FTS5_TOKENIZE_DOCUMENT,
        None,
        include_offsets=False,
        include_colocated=False,
    )
    conn.close()
    return [str(t) for t in found]


def rebuilt(home: Path) -> None:
    for name in ("index.db", "index.db-wal", "index.db-shm"):
        (home / name).unlink(missing_ok=True)
    with MemoryService(home=home) as again:
        again.recall("clarinet", stores=["global"], mode="keyword")


def test_a_reply_is_found_by_keyword_through_the_turn_before_it(svc: MemoryService, tmp_home: Path) -> None:
    ids = remember_chat(svc, "chat-1")
    hits = svc.recall(QUESTION, stores=["global"], mode="keyword", limit=5).hits
    # The question's own turn first (its words weigh most), then the reply that shares no word.
    assert [h.id for h in hits[:2]] == [ids[1], ids[2]]
    assert hits[1].text == CHAT[2]  # the context is matched, never shown
    assert context_of(tmp_home, ids[2]) == terms(CHAT[1])
    assert context_of(tmp_home, ids[0]) == []  # the first of its session has nothing before it


def test_without_a_session_the_reply_is_not_found_by_keyword(svc: MemoryService, tmp_home: Path) -> None:
    ids = remember_chat(svc, None)
    assert [h.id for h in svc.recall(QUESTION, stores=["global"], mode="keyword", limit=5).hits] == [ids[1]]
    assert {col for _, col, _, _ in word_rows(tmp_home)} == {"text", "store"}


def test_facts_without_a_session_rank_as_with_the_old_word_index(svc: MemoryService, tmp_home: Path) -> None:
    """Rows without context: bm25 over the three columns gives the rows and scores of the
    two-column index of schema 8 (same rows, same statistics)."""
    remember_chat(svc, None)
    svc.remember("Caroline plays the clarinet in a band on Sundays.", store="global")
    old = apsw.Connection(":memory:")
    old.execute(
        "CREATE VIRTUAL TABLE documents_words USING fts5(text, store, content='', contentless_delete=1, "
        "tokenize='porter unicode61 remove_diacritics 2')"
    )
    db = IndexDB(tmp_home / "index.db")
    try:
        for rowid, text, chunk in db.rows("SELECT rowid, text, chunk_id FROM documents_fts"):
            old.execute(
                "INSERT INTO documents_words (rowid, text, store) VALUES (?, ?, ?)",
                (rowid, index_text(text), chunk.split(":", 1)[0]),
            )
        for query in [QUESTION, "release branch Fridays", "Melanie", "photo of the lake", "clarinet"]:
            match = fts._words_match(fts.keyword_terms(query), "global")
            mine = fts._ranked_words(db, match, 10)
            theirs = list(
                old.execute(
                    "SELECT rowid, bm25(documents_words, 1.0, 0.0) AS s FROM documents_words "
                    "WHERE documents_words MATCH ? ORDER BY s, rowid LIMIT 10",
                    (match,),
                )
            )
            assert mine and mine == theirs, query
    finally:
        db.close()
        old.close()


def test_a_rebuild_gives_the_same_word_rows(svc: MemoryService, tmp_home: Path) -> None:
    ids = remember_chat(svc, "chat-1")
    svc.edit_fact(ids[1], body="Melanie: What do you do on weekends?", store="global")
    svc.delete_fact(ids[3], store="global")
    svc.remember("Melanie: the photo is on its way", title="late", store="global", origin_session_id="chat-1")
    before = word_rows(tmp_home)
    assert any(col == "context" for _, col, _, _ in before)
    svc.close()
    rebuilt(tmp_home)
    assert word_rows(tmp_home) == before


def test_an_edited_or_deleted_predecessor_changes_the_context(svc: MemoryService, tmp_home: Path) -> None:
    ids = remember_chat(svc, "chat-1")
    svc.edit_fact(ids[1], body="Melanie: What do you do on weekends?\nAnd which songs?", store="global")
    assert context_of(tmp_home, ids[2]) == terms("And which songs?")  # its last line only
    assert svc.recall("songs", stores=["global"], mode="keyword").hits[1].id == ids[2]
    svc.delete_fact(ids[1], store="global")
    assert context_of(tmp_home, ids[2]) == terms(CHAT[0])
    assert ids[2] not in [h.id for h in svc.recall("songs", stores=["global"], mode="keyword").hits]
    svc.delete_fact(ids[0], store="global")  # now the first of its session
    assert context_of(tmp_home, ids[2]) == []


def test_an_index_of_schema_8_gets_the_context_column(
    tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The word index is made again on upgrade; session facts are read again, so the rows are
    those of a rebuild."""
    from coffer_memory import _retrieval

    monkeypatch.setattr(_retrieval, "NEIGHBOUR_MODES", ())
    with MemoryService(home=tmp_home) as svc:
        ids = remember_chat(svc, "chat-1")
    fresh = word_rows(tmp_home)
    conn = apsw.Connection(str(tmp_home / "index.db"))
    conn.execute(
        "DROP TABLE documents_words; CREATE VIRTUAL TABLE documents_words USING fts5(text, store, "
        "content='', contentless_delete=1, tokenize='porter unicode61 remove_diacritics 2')"
    )
    for rowid, text, chunk in list(conn.execute("SELECT rowid, text, chunk_id FROM documents_fts")):
        conn.execute(
            "INSERT INTO documents_words (rowid, text, store) VALUES (?, ?, ?)",
            (rowid, index_text(text), chunk.split(":", 1)[0]),
        )
    conn.execute("PRAGMA user_version=8")
    conn.close()
    with MemoryService(settings=Settings.load(tmp_home)) as svc:
        hits = [h.id for h in svc.recall(QUESTION, stores=["global"], mode="keyword", limit=5).hits]
    assert hits[:2] == [ids[1], ids[2]]
    assert word_rows(tmp_home) == fresh


def test_a_predecessor_edited_or_removed_by_hand_is_followed(svc: MemoryService, tmp_home: Path) -> None:
    """A file changed or deleted outside coffer is picked up by the next read's scan (a bulk
    load), which leaves the rows a rebuild gives."""
    ids = remember_chat(svc, "chat-1")
    path = Path(svc.get_fact(ids[1], store="global").path)
    path.write_text(path.read_text().replace(CHAT[1], "Melanie: And which songs?"))
    svc.recall("songs", stores=["global"], mode="keyword")
    assert context_of(tmp_home, ids[2]) == terms("Melanie: And which songs?")
    edited = word_rows(tmp_home)
    path.unlink()
    svc.recall("songs", stores=["global"], mode="keyword")
    assert context_of(tmp_home, ids[2]) == terms(CHAT[0])
    gone = word_rows(tmp_home)
    assert gone != edited
    svc.close()
    rebuilt(tmp_home)
    assert word_rows(tmp_home) == gone


def test_a_load_cut_short_is_finished_by_the_next(svc: MemoryService, tmp_home: Path) -> None:
    """A bulk load commits its batches and writes its session facts' context at its end; the
    mark it commits with them makes the next load write every session fact's context."""
    ids = remember_chat(svc, "chat-1")
    before = word_rows(tmp_home)
    conn = apsw.Connection(str(tmp_home / "index.db"))
    rowid, text, chunk = next(
        conn.execute(
            "SELECT c.rowid, f.text, f.chunk_id FROM chunks c JOIN documents_fts f ON f.rowid = c.rowid "
            "WHERE c.document_id = ? AND c.position = 0",
            (ids[2],),
        )
    )
    conn.execute("DELETE FROM documents_words WHERE rowid = ?", (rowid,))  # as the batch wrote it
    conn.execute(
        "INSERT INTO documents_words (rowid, text, store, context) VALUES (?, ?, ?, '')",
        (rowid, index_text(text), chunk.split(":", 1)[0]),
    )
    conn.execute("INSERT INTO kv (key, value) VALUES ('keyword_context_pending', '1')")
    conn.close()
    assert context_of(tmp_home, ids[2]) == []
    svc.reindex()
    assert word_rows(tmp_home) == before
    conn = apsw.Connection(str(tmp_home / "index.db"))
    assert list(conn.execute("SELECT key FROM kv WHERE key = 'keyword_context_pending'")) == []
    conn.close()
