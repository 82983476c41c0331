"""What a long-lived process keeps between keyword recalls, and what must make it forget.

``_index/snapshot.reading`` keeps chunk rows, documents rows, session neighbours and store counts
while the index is unchanged; ``Targets`` keeps a checkout's target with ``find_git``'s answer.
Every test compares a warm, long-lived service with what a fresh one answers.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from conftest import count_state_reads, git, make_repo

from coffer_memory import MemoryService, RecallResult, Settings
from coffer_memory import _recall_rows as recall_rows
from coffer_memory import _scope as scope_mod
from coffer_memory._index import reindex as reindex_module
from coffer_memory._index.db import IndexDB
from coffer_memory._index.fts import best_documents, best_per_document, search_chunks, search_chunks_many
from coffer_memory._index.snapshot import reading
from coffer_memory._retrieval import KnowledgeRetrieval
from coffer_memory._store.paths import GLOBAL_STORE

WORDS = ["deploy", "redis", "cache", "migrations", "invoice", "exporter", "topic", "部署", "数据库"]


def _hits(result: RecallResult) -> list[tuple[object, ...]]:
    return [(h.id, h.text, h.score, h.source, h.time, h.store, h.path, h.title) for h in result.hits]


def _fresh(home: Path, query: str, **kw: object) -> list[tuple[object, ...]]:
    with MemoryService(home) as other:
        return _hits(other.recall(query, mode="keyword", **kw))  # type: ignore[arg-type]


@pytest.fixture
def warm(tmp_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryService]:
    """A service with facts in the global store (a few in one agent session) and warm keyword caches."""
    monkeypatch.setattr(reindex_module, "RACY_NS", 0)
    r = random.Random(3)
    with MemoryService(tmp_home) as svc:
        for i in range(30):
            text = " ".join(r.choice(WORDS) for _ in range(6))
            svc.remember(text, title=f"fact {i}", scope="global", origin_session_id="s1" if i % 3 else None)
        for word in WORDS:
            svc.recall(word + " deploy", stores=[GLOBAL_STORE], mode="keyword")
        yield svc


def test_a_keyword_recall_checks_its_arguments_once_and_makes_one_result(
    warm: MemoryService, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service checks query, mode and limit and hands the checked mode and the targets on: the
    retrieval neither checks them again nor is its result copied to add the targets."""
    checks: list[str] = []
    made: list[RecallResult] = []
    check, init = KnowledgeRetrieval.check, RecallResult.__init__

    def counted_check(self: KnowledgeRetrieval, *args: Any) -> Any:
        checks.append(args[0])
        return check(self, *args)

    def counted_init(self: RecallResult, *args: Any, **kwargs: Any) -> None:
        made.append(self)
        init(self, *args, **kwargs)

    monkeypatch.setattr(KnowledgeRetrieval, "check", counted_check)
    monkeypatch.setattr(RecallResult, "__init__", counted_init)
    result = warm.recall("deploy redis", stores=[GLOBAL_STORE], mode="keyword")
    assert checks == ["deploy redis"]
    assert made == [result]
    assert [t.store for t in result.targets] == [GLOBAL_STORE]
    assert _hits(result) == _fresh(tmp_home, "deploy redis", stores=[GLOBAL_STORE])


def test_reading_keeps_rows_while_the_index_is_unchanged(tmp_path: Path) -> None:
    writer = IndexDB(tmp_path / "index.db")
    reader = IndexDB(tmp_path / "index.db")
    with reading(reader) as kept:
        kept["row"] = 1
    with reading(reader) as kept:
        assert kept == {"row": 1}
    writer.set_kv("x", "1")  # another connection commits
    with reading(reader) as kept:
        assert kept == {}
        kept["row"] = 2
    reader.set_kv("y", "1")  # this connection writes (data_version does not move for it)
    with reading(reader) as kept:
        assert kept == {}
        kept["row"] = 3
    reader.repair()  # reopened: another connection
    with reading(reader) as kept:
        assert kept == {}
        kept["row"] = 4
    with reader.transaction(), reading(reader) as kept:
        assert kept == {}  # inside a caller's transaction (it may roll back): nothing kept
        kept["row"] = 5
    with reading(reader) as kept:
        assert kept == {"row": 4}
    assert reader.conn.get_autocommit()  # the read transaction is over


def _rewrite(path: Path, old: str, new: str) -> None:
    """A hand edit as editors save: a new file renamed over the old one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(path.read_text().replace(old, new))
    tmp.rename(path)


def test_a_hand_edit_reaches_the_next_recall_of_a_warm_service(warm: MemoryService, tmp_home: Path) -> None:
    inbox = warm.paths(GLOBAL_STORE).inbox
    path = sorted(inbox.glob("fact-1*.md"))[0]
    # A new title and time (the documents row a warm recall keeps) and a new word (the chunk row).
    _rewrite(path, "title: fact 1", "title: renamed fact")
    _rewrite(path, "updated_at: 20", "updated_at: 19")
    text = path.read_text()
    body = text.split("\n---\n", 1)[1]
    path.write_text(text.replace(body, body.rstrip("\n") + " zeppelin\n"))
    for query in ("zeppelin deploy", "redis cache", "部署 redis"):
        got = _hits(warm.recall(query, stores=[GLOBAL_STORE], mode="keyword"))
        assert got == _fresh(tmp_home, query, stores=[GLOBAL_STORE])
    assert any(h.title == "renamed fact" for h in warm.recall("zeppelin", stores=[GLOBAL_STORE]).hits)


def test_a_reused_rowid_is_never_served_the_old_text(warm: MemoryService, tmp_home: Path) -> None:
    db = warm.index.db
    last = db.scalar("SELECT max(rowid) FROM documents_fts")
    doc = db.scalar("SELECT document_id FROM chunks WHERE rowid = ?", (last,))
    path = db.file(db.scalar("SELECT path FROM documents WHERE id = ?", (doc,)))
    warm.recall("deploy redis cache", stores=[GLOBAL_STORE], mode="keyword")
    path.unlink()
    warm.recall("deploy", stores=[GLOBAL_STORE], mode="keyword")  # the delete is indexed
    warm.remember("deploy redis cache zeppelin newcomer", title="newcomer", scope="global")
    assert db.scalar("SELECT max(rowid) FROM documents_fts") == last  # SQLite gave the rowid again
    for query in ("deploy redis cache", "newcomer", "zeppelin"):
        got = _hits(warm.recall(query, stores=[GLOBAL_STORE], mode="keyword"))
        assert got == _fresh(tmp_home, query, stores=[GLOBAL_STORE])
    assert "newcomer" in warm.recall("newcomer", stores=[GLOBAL_STORE]).hits[0].text


def test_a_reused_rowid_is_never_counted_with_the_old_tokens(warm: MemoryService) -> None:
    """The tokens coverage keeps per rowid are let go when the index changes: a rowid given again
    to a text without the old one's words holds only the new words (checked against the plain
    per-store search, which looks each candidate's tokens up by its text)."""
    db = warm.index.reader_db
    query = "deploy redis cache zeppelin"
    warm.remember("deploy redis cache migrations invoice", title="old", scope="global")
    last = db.scalar("SELECT max(rowid) FROM documents_fts")
    with reading(db) as kept:  # the old row's tokens kept
        assert best_documents(db, [GLOBAL_STORE], query, 10, kept) == _plain_best(db, query, 10)
    doc = db.scalar("SELECT document_id FROM chunks WHERE rowid = ?", (last,))
    db.file(db.scalar("SELECT path FROM documents WHERE id = ?", (doc,))).unlink()
    warm.recall("deploy", stores=[GLOBAL_STORE], mode="keyword")  # the delete is indexed
    warm.remember("zeppelin deploy", title="new", scope="global")
    assert db.scalar("SELECT max(rowid) FROM documents_fts") == last  # SQLite gave the rowid again
    with reading(db) as kept:
        got = best_documents(db, [GLOBAL_STORE], query, 10, kept)
    assert got == _plain_best(db, query, 10)
    assert doc not in got[GLOBAL_STORE]


def _plain_best(db: IndexDB, query: str, limit: int) -> dict[str, dict[str, tuple[str, float]]]:
    """``best_documents`` of the global store from ``search_chunks`` (no rows kept between calls)."""
    chunks = search_chunks(db, GLOBAL_STORE, query, 4 * limit)
    return {GLOBAL_STORE: best_per_document(((c.chunk_id, c.text, c.score) for c in chunks), limit)}


def test_a_session_neighbour_added_later_lends_at_once(warm: MemoryService, tmp_home: Path) -> None:
    warm.remember("the quasar telescope question", title="asks", scope="global", origin_session_id="s2")
    assert [h.title for h in warm.recall("quasar", stores=[GLOBAL_STORE], mode="keyword").hits] == ["asks"]
    warm.remember("a reply with no shared word", title="reply", scope="global", origin_session_id="s2")
    after = warm.recall("quasar", stores=[GLOBAL_STORE], mode="keyword")
    assert [h.title for h in after.hits] == ["asks", "reply"]  # lent by the question it follows
    assert _hits(after) == _fresh(tmp_home, "quasar", stores=[GLOBAL_STORE])


def test_the_first_session_fact_of_a_store_lends_at_once(tmp_home: Path) -> None:
    # A store without a session fact skips the neighbour lookups (kept as "no sessions here"):
    # its first session facts must lend on the next recall of the same warm service.
    with MemoryService(tmp_home) as svc:
        svc.remember("the quasar telescope question", title="asks", scope="global")
        svc.remember("an unrelated note on redis", title="other", scope="global")
        assert [h.title for h in svc.recall("quasar", stores=[GLOBAL_STORE], mode="keyword").hits] == ["asks"]
        for text, title in [
            ("the quasar telescope again", "asks again"),
            ("a reply with no shared word", "reply"),  # found by its context: the line before it
            ("and one more after it", "later"),  # found only through what the question lends
        ]:
            svc.remember(text, title=title, scope="global", origin_session_id="s9")
        after = svc.recall("quasar", stores=[GLOBAL_STORE], mode="keyword")
        assert "later" in [h.title for h in after.hits]
        assert _hits(after) == _fresh(tmp_home, "quasar", stores=[GLOBAL_STORE])


def test_a_new_project_store_and_a_new_checkout_are_found(
    warm: MemoryService, tmp_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        scope_mod, "_RACY_NS", 0
    )  # find_git caches at once (its racy window is for real clocks)
    repo = make_repo(tmp_path / "repo")
    sub = repo / "sub"
    sub.mkdir()
    first = warm.recall("deploy", cwd=repo, mode="keyword")
    assert first.targets[0].project_root == repo.resolve() and not first.targets[0].store_dir.exists()
    warm.remember("deploy the project with make release", title="project fact", cwd=repo)
    assert warm.recall("release", cwd=repo, mode="keyword").hits[0].store == first.targets[0].store
    assert _hits(warm.recall("deploy release", cwd=repo, mode="keyword")) == _fresh(
        tmp_home, "deploy release", cwd=repo
    )
    git(repo, "checkout", "-q", "-b", "feature")  # HEAD changes: a new answer, the same store
    switched = warm.recall("deploy", cwd=sub, mode="keyword").targets[0]
    assert switched.branch == "feature" and switched.store == first.targets[0].store
    git(sub, "init", "-q", "-b", "inner")  # a checkout inside: its own project store
    nested = warm.recall("deploy", cwd=sub, mode="keyword").targets[0]
    assert nested.project_root == sub.resolve() and nested.store != first.targets[0].store


def test_best_documents_are_what_the_chunk_lists_give(warm: MemoryService) -> None:
    db = warm.index.reader_db
    r = random.Random(5)
    kept: dict[object, object] = {}
    for _ in range(60):
        query = " ".join(r.choice([*WORDS, "zz", "de", "the"]) for _ in range(r.randint(1, 4)))
        limit = r.choice([1, 3, 10])
        stores = [GLOBAL_STORE]
        many = search_chunks_many(db, stores, query, 4 * limit, docs=limit)
        expected = best_per_document(((c.chunk_id, c.text, c.score) for c in many[GLOBAL_STORE]), limit)
        assert best_documents(db, stores, query, limit) == {GLOBAL_STORE: expected}, query
        with reading(db) as kept_now:
            kept = kept_now
            assert best_documents(db, stores, query, limit, kept) == {GLOBAL_STORE: expected}, query
    assert kept  # rows were kept across the queries


def test_a_recall_over_more_stores_than_one_statement_takes(
    tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The documents rows come from a SELECT per store joined by UNION ALL, a limited number of
    # stores a statement (SQLite takes 500 in one compound statement): 7 here, over 30 stores.
    monkeypatch.setattr(recall_rows, "STORES_PER_QUERY", 7)
    with MemoryService(tmp_home) as svc:
        stores = [f"project-{i:026d}" for i in range(30)]
        for i, store in enumerate(stores):
            svc.remember(f"zeppelin number {i}", store=store)
        got = svc.recall("zeppelin", stores=stores, mode="keyword", limit=50)
        assert sorted(h.store for h in got.hits) == stores
        for hit in got.hits:
            assert hit.text == f"zeppelin number {stores.index(hit.store)}"


def test_an_error_inside_reading_ends_its_transaction(tmp_path: Path) -> None:
    reader = IndexDB(tmp_path / "index.db")
    with pytest.raises(apsw.SQLError), reading(reader):
        reader.rows("SELECT * FROM no_such_table")
    assert reader.conn.get_autocommit()  # no read transaction left open to pin an old snapshot
    writer = IndexDB(tmp_path / "index.db")
    writer.set_kv("seen", "yes")
    with reading(reader):
        assert reader.get_kv("seen") == "yes"


def test_a_large_store_check_keeps_its_state_and_sees_another_process(
    tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Above the per-file threshold a read compares the recall folders' mtimes with the store's
    # state row, kept from the last check; another process's writes record new mtimes there.
    monkeypatch.setattr(reindex_module, "RACY_NS", 0)
    settings = Settings.load(tmp_home, reconcile_full_scan_max_files=0, reconcile_full_scan_seconds=3600)
    with MemoryService(settings=settings) as warm, MemoryService(settings=settings) as other:
        warm.remember("the falcon build agent", scope="global")
        reads = count_state_reads(warm, monkeypatch)

        def recall(query: str) -> list[str]:
            return [h.text for h in warm.recall(query, stores=[GLOBAL_STORE], mode="keyword").hits]

        for _ in range(2):  # the first may bring the index in line with the new fact's folders
            assert recall("falcon") == ["the falcon build agent"]
        reads.clear()
        for _ in range(3):
            assert recall("falcon") == ["the falcon build agent"]
        assert reads == []  # the state row kept from the last check
        other.remember("the kestrel deploy agent", scope="global")  # another writer connection
        assert recall("kestrel") == ["the kestrel deploy agent"]
        reads.clear()
        assert recall("kestrel") == ["the kestrel deploy agent"]
        assert reads == []  # the other process's new mtimes were taken in, not asked for again
        inbox = warm.paths(GLOBAL_STORE).inbox
        (inbox / "by-hand.md").write_text("# By hand\n\nthe osprey agent\n")
        assert [t.split("\n")[-1] for t in recall("osprey")] == [
            "the osprey agent"
        ]  # an outside create shows at once
        next(inbox.glob("the-kestrel*.md")).unlink()
        assert recall("kestrel") == []  # and an outside delete
