"""Facts of one agent session (``origin_session_id``): their order in the index, neighbour lending
in recall, and the index rows a rebuild from the files gives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from test_vector import hash_plugin, vector_service  # noqa: F401  (a fixture, used by name)

from coffer_memory import MemoryService, Settings
from coffer_memory._index import session
from coffer_memory._index.db import IndexDB

# A chat as an agent would remember it, one fact per turn: the reply that says which instrument
# shares no word with the question; the turn before it does.
CHAT = [
    "Caroline: I went to the LGBTQ support group yesterday and it was powerful.",
    "Melanie: That sounds lovely! Which musical instrument do you play these days?",
    "Caroline: Yeah, mostly the clarinet, and I started violin lessons!",
    "Melanie: Nice. I painted a lake sunrise last weekend.",
    "Caroline: Send me a photo of it please.",
]
OTHER = [
    "The release branch is cut on Fridays.",
    "Deploys run make release after the migrations.",
    "Melanie bought new running shoes for the race.",
]
QUESTION = "What musical instrument is played?"


def remember_chat(svc: MemoryService, origin: str | None, store: str = "global") -> list[str]:
    ids = [
        svc.remember(t, title=f"turn {i}", store=store, origin_session_id=origin).fact.id
        for i, t in enumerate(CHAT)
    ]
    for text in OTHER:
        svc.remember(text, store=store)
    return ids


def remember_tagged(svc: MemoryService, odd: int) -> list[str]:
    """The chat as session ``chat-1``, every turn tagged ``chat`` but turn ``odd`` (tagged ``x``)."""
    return [
        svc.remember(
            t,
            title=f"turn {i}",
            store="global",
            origin_session_id="chat-1",
            tags=["x"] if i == odd else ["chat"],
        ).fact.id
        for i, t in enumerate(CHAT)
    ]


@pytest.fixture
def svc(tmp_home: Path) -> Iterator[MemoryService]:
    with MemoryService(home=tmp_home) as service:
        yield service


@pytest.fixture
def lending_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Session facts' word rows without their predecessor's words (``test_keyword_context.py``),
    so keyword recall finds a reply only through lending."""
    from coffer_memory._index import reindex

    monkeypatch.setattr(reindex, "KEYWORD_CONTEXT_LINES", 0)


def index_rows(home: Path) -> list[tuple[object, ...]]:
    conn = apsw.Connection(str(home / "index.db"))
    try:
        return list(
            conn.execute(
                "SELECT resource_name, id, path, origin_session, metadata FROM documents ORDER BY resource_name, id"
            )
        )
    finally:
        conn.close()


def test_facts_of_a_session_are_a_sequence_in_id_order(svc: MemoryService, tmp_home: Path) -> None:
    ids = remember_chat(svc, "chat-1")
    db = IndexDB(tmp_home / "index.db")
    try:
        near = session.neighbours(db, "global", [ids[0], ids[2], ids[4]], depth=2)
        assert near[ids[0]] == [(ids[1], 1), (ids[2], 2)]
        assert near[ids[2]] == [(ids[1], -1), (ids[0], -2), (ids[3], 1), (ids[4], 2)]
        assert near[ids[4]] == [(ids[3], -1), (ids[2], -2)]
        other = [r[1] for r in index_rows(tmp_home) if r[3] is None]
        assert len(other) == len(OTHER)
        assert session.neighbours(db, "global", other, depth=2) == {}  # no session, no neighbours
    finally:
        db.close()


@pytest.mark.usefixtures("lending_alone")
def test_a_reply_is_found_through_the_turn_before_it(svc: MemoryService) -> None:
    ids = remember_chat(svc, "chat-1")
    hits = svc.recall(QUESTION, stores=["global"], mode="keyword", limit=5).hits
    # The question's turn, then what it lends: the two after it, more than the one before.
    assert [h.id for h in hits] == [ids[1], ids[2], ids[3], ids[0]]
    assert hits[1].text == CHAT[2] and hits[1].title == "turn 2"  # shares no word with the question
    assert hits[0].score > hits[1].score == hits[2].score > hits[3].score


@pytest.mark.usefixtures("lending_alone")
def test_both_index_backends_lend(index_backend: str, tmp_home: Path) -> None:
    """On PostgreSQL the keyword search runs there; the neighbours come from the local index."""
    with MemoryService(settings=Settings.load(tmp_home)) as svc:
        ids = remember_tagged(svc, odd=3)
        hits = svc.recall(QUESTION, stores=["global"], mode="keyword", limit=5).hits
        assert [h.id for h in hits] == [ids[1], ids[2], ids[3], ids[0]]
        hits = svc.recall(QUESTION, stores=["global"], mode="keyword", limit=5, tags=["chat"]).hits
        assert [h.id for h in hits] == [ids[1], ids[2], ids[0]]


def test_without_a_session_the_reply_is_not_found(svc: MemoryService) -> None:
    ids = remember_chat(svc, None)
    hits = [h.id for h in svc.recall(QUESTION, stores=["global"], mode="keyword", limit=5).hits]
    assert hits == [ids[1]]


def test_facts_without_a_session_rank_exactly_as_without_lending(
    svc: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no session among the candidates the lists are the ones recall gave before lending."""
    from coffer_memory import _retrieval

    remember_chat(svc, None)
    svc.remember("Caroline plays the clarinet in a band on Sundays.", store="global", tags=["music"])
    queries = [QUESTION, "release branch Fridays", "Melanie", "photo of the lake"]
    asked = [(q, tags) for q in queries for tags in (None, ["music"])]

    def answers() -> list[list[tuple[str, float]]]:
        return [
            [(h.id, h.score) for h in svc.recall(q, stores=["global"], mode="keyword", limit=3, tags=t).hits]
            for q, t in asked
        ]

    lent = answers()
    monkeypatch.setattr(_retrieval, "NEIGHBOUR_MODES", ())
    assert answers() == lent
    assert any(lent)


@pytest.mark.usefixtures("lending_alone")
def test_lending_stays_inside_filters_and_stores(svc: MemoryService, repo: Path) -> None:
    ids = remember_tagged(svc, odd=2)
    hits = [h.id for h in svc.recall(QUESTION, stores=["global"], mode="keyword", tags=["chat"]).hits]
    assert ids[1] in hits and ids[2] not in hits  # the reply lacks the tag: never returned
    hits = [h.id for h in svc.recall(QUESTION, stores=["global"], mode="keyword").hits]
    assert ids[2] in hits
    assert [h.id for h in svc.recall(QUESTION, stores=["global"], mode="keyword", tags=["x"]).hits] == []

    # The same session id in another store is another sequence: nothing is lent across stores.
    project = svc.remember(CHAT[1], title="asked", scope="project", cwd=repo, origin_session_id="chat-2")
    reply = svc.remember(CHAT[2], title="reply", store="global", origin_session_id="chat-2").fact.id
    hits = svc.recall(QUESTION, stores=[project.store, "global"], mode="keyword", limit=10).hits
    assert project.fact.id in [h.id for h in hits]
    assert reply not in [h.id for h in hits]


def test_a_rebuild_gives_the_same_session_rows(svc: MemoryService, tmp_home: Path) -> None:
    remember_chat(svc, "chat-1")
    first = svc.remember("Melanie: a later turn of the same chat", store="global", origin_session_id="chat-1")
    before = index_rows(tmp_home)
    assert [r[3] for r in before].count("chat-1") == len(CHAT) + 1
    assert first.fact.id == max(r[1] for r in before if r[3] == "chat-1")  # the newest is last
    svc.close()
    for name in ("index.db", "index.db-wal", "index.db-shm"):
        (tmp_home / name).unlink(missing_ok=True)
    with MemoryService(home=tmp_home) as again:
        again.recall("clarinet", stores=["global"], mode="keyword")
    assert index_rows(tmp_home) == before


def test_the_session_column_comes_with_an_older_index(tmp_home: Path) -> None:
    """An index of schema 7 gets the column and its index from the metadata it already holds."""
    with MemoryService(home=tmp_home) as svc:
        ids = remember_chat(svc, "chat-1")
    conn = apsw.Connection(str(tmp_home / "index.db"))
    conn.execute("DROP INDEX idx_documents_session; ALTER TABLE documents DROP COLUMN origin_session")
    conn.execute("PRAGMA user_version=7")
    conn.close()
    settings = Settings.load(tmp_home)
    with MemoryService(settings=settings) as svc:
        hits = [h.id for h in svc.recall(QUESTION, stores=["global"], mode="keyword", limit=5).hits]
    assert ids[2] in hits
    assert [r[3] for r in index_rows(tmp_home)].count("chat-1") == len(CHAT)


# -- vectors: a session fact is embedded with the last line of the fact before it ----------------
def all_vectors(home: Path) -> dict[str, bytes]:
    import sqlite_vec

    conn = apsw.Connection(str(home / "index.db"))
    try:
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        table = next(conn.execute("SELECT table_name FROM vec_stores WHERE resource_name = 'global'"))[0]
        return {str(k): bytes(v) for k, v in conn.execute(f"SELECT chunk_id, embedding FROM {table}")}
    finally:
        conn.close()


def embedded(text: str) -> bytes:
    """What the hash embedder (256 wide) stores for ``text``."""
    from coffer_hash_embedder import HashEmbedder

    from coffer_memory._index.vec import to_blob

    return to_blob(HashEmbedder(256).embed_batch([text])[0])


@pytest.fixture
def vsvc(hash_plugin: None, tmp_home: Path) -> Iterator[MemoryService]:  # noqa: F811
    with vector_service(tmp_home, provider="hash", dimensions=256) as service:
        yield service


def test_a_session_fact_is_embedded_with_the_line_before_it(vsvc: MemoryService, tmp_home: Path) -> None:
    ids = remember_chat(vsvc, "chat-1")
    lone = vsvc.remember("Yeah, mostly the clarinet!", title="lone", store="global").fact.id
    stored = all_vectors(tmp_home)
    assert stored[f"{ids[0]}:0"] == embedded(f"turn 0\n\u2063\n{CHAT[0]}")  # the first has none before it
    assert stored[f"{ids[2]}:0"] == embedded(f"{CHAT[1]}\nturn 2\n\u2063\n{CHAT[2]}")
    assert stored[f"{lone}:0"] == embedded(
        "lone\n\u2063\nYeah, mostly the clarinet!"
    )  # no session: as before


def test_vector_recall_finds_the_reply_by_its_context(
    vsvc: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    from coffer_memory import _retrieval

    monkeypatch.setattr(_retrieval, "NEIGHBOUR_MODES", ())  # vectors alone, no lending
    ids = remember_chat(vsvc, "chat-1")
    hits = [h.id for h in vsvc.recall("Which musical instrument?", stores=["global"], mode="vector").hits]
    assert set(hits[:2]) == {ids[1], ids[2]}  # the question's turn and the reply that shares no word


def test_a_changed_or_deleted_predecessor_re_embeds_its_successor(
    vsvc: MemoryService, tmp_home: Path
) -> None:
    ids = remember_chat(vsvc, "chat-1")
    vsvc.edit_fact(ids[1], body="Melanie: What do you do on weekends?", store="global")
    stored = all_vectors(tmp_home)
    assert stored[f"{ids[2]}:0"] == embedded(
        f"Melanie: What do you do on weekends?\nturn 2\n\u2063\n{CHAT[2]}"
    )
    vsvc.delete_fact(ids[1], store="global")
    stored = all_vectors(tmp_home)
    assert stored[f"{ids[2]}:0"] == embedded(f"{CHAT[0]}\nturn 2\n\u2063\n{CHAT[2]}")
    assert f"{ids[1]}:0" not in stored
    # The index says the vectors are those of the files: no row waits for its embedding.
    conn = apsw.Connection(str(tmp_home / "index.db"))
    assert list(conn.execute("SELECT id FROM documents WHERE content_sha256 = ''")) == []
    conn.close()


def test_a_rebuild_gives_the_same_vectors(hash_plugin: None, tmp_home: Path) -> None:  # noqa: F811
    with vector_service(tmp_home, provider="hash", dimensions=256) as svc:
        ids = remember_chat(svc, "chat-1")
        svc.delete_fact(ids[3], store="global")
        svc.remember(
            "Melanie: the photo is on its way", title="late", store="global", origin_session_id="chat-1"
        )
    before, rows = all_vectors(tmp_home), index_rows(tmp_home)
    for name in ("index.db", "index.db-wal", "index.db-shm"):
        (tmp_home / name).unlink(missing_ok=True)
    with vector_service(tmp_home, provider="hash", dimensions=256) as svc:
        svc.recall("clarinet", stores=["global"], mode="vector")
    assert all_vectors(tmp_home) == before
    assert index_rows(tmp_home) == rows


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_vector_and_hybrid_lend_inside_the_filter(vsvc: MemoryService, mode: str) -> None:
    ids = remember_tagged(vsvc, odd=3)
    question = "Which musical instrument do you play these days?"
    hits = [h.id for h in vsvc.recall(question, stores=["global"], mode=mode, limit=3).hits]
    assert set(hits) == {ids[1], ids[2], ids[3]}  # the question's turn and the two after it
    hits = [h.id for h in vsvc.recall(question, stores=["global"], mode=mode, limit=3, tags=["chat"]).hits]
    assert {ids[1], ids[2]} <= set(hits) and ids[3] not in hits
