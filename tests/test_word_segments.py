"""The word index stays in few FTS5 segments (``_index/segments.py``): one after a bulk load, a
handful under single writes; merging changes no answer, never makes a reader wait, and never
runs on a read that changes nothing. Keyword recall reads texts from FTS5's content table, which
must hold what the virtual table gives."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest

from coffer_memory import MemoryService, Settings
from coffer_memory._index import segments
from coffer_memory._index.db import IndexDB
from coffer_memory._index.fts import search_chunks, search_chunks_many
from coffer_memory._models import MemoryFact
from coffer_memory._store.files import render_fact
from coffer_memory._store.paths import GLOBAL_STORE, slugify
from tests.conftest import make_repo

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
WORDS += ["kilo", "lima", "mike", "november"]
QUERIES = ["alpha bravo", "charlie delta echo", "golf lima", "mike november kilo", "hotel", "india juliet"]


def _text(r: random.Random) -> str:
    return " ".join(r.choice(WORDS) for _ in range(r.randint(5, 40)))


def _write_files(svc: MemoryService, repo: Path, n: int, every: int = 2) -> None:
    """``n`` rendered fact files, every ``every``-th in the project store, the others in the global
    store (no index write)."""
    r = random.Random(5)
    project, global_ = svc.target(cwd=repo).store_dir, svc.target(store=GLOBAL_STORE).store_dir
    for i in range(n):
        text = _text(r)
        when = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=i)
        fact = MemoryFact(
            id="",
            title=f"fact {i}",
            description=text[:40],
            body=text,
            actor="agent",
            origin_session_id=None,
            created_at=when,
            updated_at=when,
        )
        inbox = (project if i % every == 0 else global_) / "knowledge" / "inbox"
        inbox.mkdir(parents=True, exist_ok=True)
        (inbox / f"{slugify(fact.title)}-{i}.md").write_bytes(render_fact(fact))


def _answers(db: IndexDB, stores: list[str]) -> list[object]:
    """Every query's ranked chunks (id, text, score) in every store."""
    out: list[object] = []
    for query in QUERIES:
        found = search_chunks_many(db, stores, query, 40)
        out.append({s: [(h.chunk_id, h.text, h.score) for h in hits] for s, hits in found.items()})
    return out


def _structure(db: IndexDB) -> bytes:
    """The word index's structure record: it changes with every flush, merge or optimize."""
    return bytes(db.scalar("SELECT block FROM documents_words_data WHERE id = 10"))


def test_a_rebuild_leaves_the_word_index_in_one_segment_with_the_same_answers(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    settings = Settings.load(tmp_path / "home")
    with MemoryService(settings=settings) as svc:
        _write_files(svc, repo, 300)
        svc.reindex()  # two stores: a commit each, so two segments before the optimize
        stores = [svc.target(cwd=repo).store, GLOBAL_STORE]
        db = svc.index.db
        assert segments.segment_count(db) == 1
        for i in range(12):  # single writes: a segment each, merged a step at a time
            svc.remember(f"{WORDS[i]} {WORDS[-1 - i]} remembered {i}", cwd=repo)
        assert segments.segment_count(db) > 1
        before = _answers(db, stores)
        with db.transaction():
            segments.optimize(db)
        assert segments.segment_count(db) == 1
        assert _answers(db, stores) == before  # merging moves postings, never changes a score
    (tmp_path / "home" / "index.db").unlink()
    with MemoryService(settings=settings) as svc:
        _ = svc.recall("alpha", cwd=repo, mode="keyword")  # the read rebuilds the deleted index
        db = svc.index.db
        assert segments.segment_count(db) == 1
        assert _answers(db, stores) == before


@pytest.mark.parametrize("every", [2, 5, 1000])
def test_one_store_searched_alone_ranks_as_its_own_search(tmp_path: Path, every: int) -> None:
    # One store holding most of the index takes the shared, unfiltered MATCH (the global store of
    # a REST or MCP recall); a small one keeps its filtered MATCH. Both give its own search's rows.
    repo = make_repo(tmp_path / "repo")
    with MemoryService(settings=Settings.load(tmp_path / "home")) as svc:
        _write_files(svc, repo, 240, every)
        svc.reindex()
        db = svc.index.db
        for store in (GLOBAL_STORE, svc.target(cwd=repo).store):
            for query in [*QUERIES, "nothing here", "alp"]:
                many = search_chunks_many(db, [store], query, 40, docs=10)[store]
                alone = search_chunks(db, store, query, 40)
                assert many == alone[: len(many)], (query, store)
                assert many == alone or len({c.chunk_id.split(":")[-2] for c in many}) >= 10


def test_single_writes_keep_the_word_index_in_a_few_segments(svc: MemoryService, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    counts = []
    for i in range(60):
        svc.remember(f"{WORDS[i % len(WORDS)]} note {i} about {WORDS[(i * 7) % len(WORDS)]}", cwd=repo)
        counts.append(segments.segment_count(svc.index.db))
    # FTS5 alone lets one-page segments pile up to its crisis merge (15 on a level); a merge
    # step after each write folds every four of a level into one.
    assert max(counts) <= 8, counts
    hits = svc.recall("note about", cwd=repo, mode="keyword", limit=60).hits
    assert len(hits) == 60


def test_a_reader_reads_on_while_the_word_index_is_merged(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    settings = Settings.load(tmp_path / "home")
    with MemoryService(settings=settings) as svc:
        _write_files(svc, repo, 200)
        svc.reindex()
        for i in range(10):
            svc.remember(f"{WORDS[i]} later note {i}", cwd=repo)
        stores = [svc.target(cwd=repo).store, GLOBAL_STORE]
        writer = svc.index.db
        reader = IndexDB(settings.index_path)
        try:
            expected = _answers(reader, stores)
            reader.conn.execute("BEGIN")  # a read transaction held across the merge
            assert _answers(reader, stores) == expected
            done = threading.Event()

            def merge() -> None:
                with writer.transaction():
                    segments.optimize(writer)
                done.set()

            thread = threading.Thread(target=merge)
            thread.start()
            thread.join(timeout=30)
            assert done.is_set()  # the writer did not wait for the open read
            assert segments.segment_count(writer) == 1
            assert _answers(reader, stores) == expected  # the reader's snapshot still answers
            reader.conn.execute("COMMIT")
            assert _answers(reader, stores) == expected  # and the merged index the same
        finally:
            reader.close()


def test_a_keyword_read_of_an_unchanged_index_never_merges(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    settings = Settings.load(tmp_path / "home")
    with MemoryService(settings=settings) as svc:
        for i in range(9):  # unmerged segments that a merge step would fold
            svc.remember(f"{WORDS[i]} unmerged note {i}", cwd=repo)
        count = segments.segment_count(svc.index.db)
        structure = _structure(svc.index.db)
    assert count > 1
    for _ in range(3):  # as the CLI does: a fresh service per call
        with MemoryService(settings=settings) as svc:
            assert svc.recall("unmerged note", cwd=repo, mode="keyword").hits
    conn = apsw.Connection(str(settings.index_path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert bytes(conn.execute("SELECT block FROM documents_words_data WHERE id = 10").get) == structure
    finally:
        conn.close()


def test_the_fts5_content_table_holds_what_the_trigram_table_gives(
    svc: MemoryService, tmp_path: Path
) -> None:
    # ``fts._ranked_per_store`` and ``fts._texts`` read documents_fts_content (id, c0 text, c1
    # store, c2 chunk id) directly: a SQLite that laid it out otherwise must fail here.
    repo = make_repo(tmp_path / "repo")
    for text in ["plain words", "café ünïcode 部署 the api", "x" * 3000, "line\nbreaks\n\n# heading\nmore"]:
        svc.remember(text, cwd=repo, title=f"t {text[:8]}")
    svc.remember("global words", store=GLOBAL_STORE)
    db = svc.index.db
    content = db.rows("SELECT id, c2, c0, c1 FROM documents_fts_content ORDER BY id")
    virtual = db.rows("SELECT rowid, chunk_id, text, resource_name FROM documents_fts ORDER BY rowid")
    assert len(content) >= 6 and content == virtual


def test_an_explicit_reindex_settles_the_word_index_into_one_segment(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    with MemoryService(settings=Settings.load(tmp_path / "home")) as svc:
        for i in range(9):
            svc.remember(f"{WORDS[i]} single write {i}", cwd=repo)
        db, stores = svc.index.db, [svc.target(cwd=repo).store, GLOBAL_STORE]
        before = _answers(db, stores)
        assert segments.segment_count(db) > 1
        svc.reindex()  # nothing changed on disk: only the merge writes
        assert segments.segment_count(db) == 1
        assert _answers(db, stores) == before


def test_a_background_scan_settles_what_single_writes_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A long-lived process's due full scan of a larger store runs on a thread beside the reads;
    # it also merges the word index, so a server's recalls read one segment, not ten.
    repo = make_repo(tmp_path / "repo")
    settings = Settings.load(
        tmp_path / "home",
        reconcile_full_scan_max_files=0,
        reconcile_full_scan_seconds=0,
        reconcile_watch=False,
    )
    with MemoryService(settings=settings) as svc:
        for i in range(9):
            svc.remember(f"{WORDS[i]} served write {i}", cwd=repo)
        db = svc.index.db
        assert segments.segment_count(db) > segments.SETTLED
        # Each scan thread is noted as it starts: one listed after the recall (threading.enumerate)
        # could be over already on a loaded machine, and the test then failed with nothing wrong.
        scanned: list[threading.Thread] = []
        start = threading.Thread.start

        def noted(thread: threading.Thread) -> None:
            if thread.name.startswith("coffer-scan-"):
                scanned.append(thread)
            start(thread)

        monkeypatch.setattr(threading.Thread, "start", noted)
        for _ in range(3):  # the first read's scan may run inline (no full scan on record yet)
            assert svc.recall("served write", cwd=repo, mode="keyword").hits
            for thread in scanned:
                thread.join(30)
        assert scanned  # the scan ran in the background, where it may write
        assert segments.segment_count(db) == 1
        assert len(svc.recall("served write", cwd=repo, mode="keyword", limit=20).hits) == 9


def _trigram(db: IndexDB) -> tuple[list[tuple[object, ...]], list[list[tuple[object, ...]]], int]:
    """The trigram index's every (term, rowid, offset), its answers to a few fragments, its segments."""
    db.conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.tri_vocab USING fts5vocab(main, documents_fts, instance)"
    )
    terms = db.rows("SELECT term, doc, col, offset FROM tri_vocab ORDER BY term, doc, col, offset")
    found = [
        db.rows(
            "SELECT rowid, chunk_id FROM documents_fts WHERE documents_fts MATCH ? ORDER BY rank, rowid", (q,)
        )
        for q in ("lph", "harli", "ovember kil", "otel")
    ]
    return terms, found, int(db.scalar("SELECT count(DISTINCT segid) FROM documents_fts_idx"))


def test_a_bulk_load_holds_more_trigram_terms_before_writing_a_segment_and_indexes_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    settings = Settings.load(tmp_path / "home")
    with MemoryService(settings=settings) as svc:
        _write_files(svc, repo, 400, every=1000)  # one fact in the project store, the rest global
        svc.reindex()
        db = svc.index.db
        assert (
            db.scalar("SELECT v FROM documents_fts_config WHERE k = 'hashsize'")
            == segments.TRIGRAM_HASH_BYTES
        )
        held = _trigram(db)
    # The same load writing its trigram terms out every 16 KiB, as FTS5's 1 MiB default does
    # every few hundred files of a larger load: the same terms and answers, in more segments.
    monkeypatch.setattr(segments, "TRIGRAM_HASH_BYTES", 16 * 1024)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{tmp_path / 'home' / 'index.db'}{suffix}").unlink(missing_ok=True)
    with MemoryService(settings=settings) as svc:
        svc.reindex()
        flushed = _trigram(svc.index.db)
    assert held[0] == flushed[0] and len(held[0]) > 10_000
    assert held[1] == flushed[1] and all(held[1])
    assert held[2] <= 2 < flushed[2]  # a segment per store, against one per 16 KiB
