"""Durability: concurrent writers, SIGKILL mid-write, index rebuild, atomic writes, outside edits.

Everything here is real: child processes started with ``sys.executable`` (tests/_writer.py),
real files under a temp home, a real git repository, a real apsw SQLite index.
"""

from __future__ import annotations

import os
import random
import select
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import apsw
import frontmatter
import pytest

from coffer_memory import MemoryService
from coffer_memory._config import Settings
from coffer_memory._models import FactRecord
from coffer_memory._store.files import atomic_write

WRITER = Path(__file__).with_name("_writer.py")
ROOT = Path(__file__).resolve().parents[1]


# -- helpers --------------------------------------------------------------------------------------
def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_child_env(),
    )


def _read_ready(proc: subprocess.Popen[str], timeout: float = 60.0) -> None:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "child never said ready"
    line = proc.stdout.readline()
    if line != "ready\n":
        err = proc.stderr.read() if proc.stderr else ""
        raise AssertionError(f"unexpected first line {line!r}; stderr: {err}")


def _acks(text: str) -> list[tuple[str, str, str, str]]:
    """Complete ``token\\tstore\\tid\\tpath`` lines (a torn last line is not an acknowledgement)."""
    out = []
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            continue
        parts = line.rstrip("\n").split("\t")
        if len(parts) == 4:
            out.append((parts[0], parts[1], parts[2], parts[3]))
    return out


def _all_facts(svc: MemoryService, store: str, page: int = 7) -> list[FactRecord]:
    """Every fact of a store's knowledge lane, paging through ``list_facts`` with its cursor."""
    items: list[FactRecord] = []
    cursor = None
    while True:
        result = svc.list_facts(store=store, limit=page, cursor=cursor)
        items.extend(result.items)
        if result.next_cursor is None:
            return items
        cursor = result.next_cursor


def _visible_md(root: Path) -> list[Path]:
    """Markdown files under ``root`` minus hidden ones (pathlib's glob, unlike a shell, matches dotfiles)."""
    return sorted(
        p for p in root.rglob("*.md") if not any(s.startswith(".") for s in p.relative_to(root).parts)
    )


def _query(db_path: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return list(conn.execute(sql, params))
    finally:
        conn.close()


def _check_index_integrity(db_path: Path) -> None:
    """SQLite and FTS5 integrity, and the chunk <-> FTS rowid pairing the deletes rely on."""
    conn = apsw.Connection(str(db_path))
    try:
        assert list(conn.execute("PRAGMA integrity_check")) == [("ok",)]
        conn.execute("INSERT INTO documents_fts(documents_fts) VALUES('integrity-check')")
        unpaired = list(
            conn.execute(
                "SELECT c.id FROM chunks c LEFT JOIN documents_fts f ON f.rowid = c.rowid "
                "WHERE f.chunk_id IS NULL OR f.chunk_id != c.id"
            )
        )
        assert unpaired == []
        n_chunks = next(conn.execute("SELECT count(*) FROM chunks"))[0]
        n_fts = next(conn.execute("SELECT count(*) FROM documents_fts"))[0]
        assert n_chunks == n_fts
        orphans = list(
            conn.execute(
                "SELECT c.id FROM chunks c LEFT JOIN documents d "
                "ON d.id = c.document_id AND d.resource_name = c.resource_name WHERE d.id IS NULL"
            )
        )
        assert orphans == []
        chunkless = list(
            conn.execute(
                "SELECT d.path FROM documents d WHERE NOT EXISTS "
                "(SELECT 1 FROM chunks c WHERE c.document_id = d.id AND c.resource_name = d.resource_name)"
            )
        )
        assert chunkless == []
    finally:
        conn.close()


def _hits_with(
    svc: MemoryService, token: str, repo: Path, mode: str = "keyword", limit: int = 5
) -> list[Path]:
    """Paths of recall hits whose text contains ``token``."""
    result = svc.recall(token, cwd=repo, mode=mode, limit=limit)
    return [h.path for h in result.hits if token in h.text]


def _project_store(svc: MemoryService, repo: Path) -> str:
    return svc.resolve_store(cwd=repo)


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


# -- 1. concurrency --------------------------------------------------------------------------------
N_PROCS = 4
M_FACTS = 25
GLOBAL_EVERY = 5  # each worker also writes M_FACTS // GLOBAL_EVERY global facts


def test_concurrent_writers_lose_nothing(tmp_home: Path, repo: Path, tmp_path: Path) -> None:
    """4 processes x 25 remembers into one project store (+5 each into global), started together.

    Half the project facts share one title, so the processes race for the same slugs.
    """
    start = tmp_path / "start"
    procs = [
        _spawn("burst", str(tmp_home), str(repo), str(w), str(M_FACTS), str(GLOBAL_EVERY), str(start))
        for w in range(N_PROCS)
    ]
    try:
        for proc in procs:
            _read_ready(proc)
        start.touch()
        outputs = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    acks = [a for out, _ in outputs for a in _acks(out)]
    n_global = N_PROCS * (M_FACTS // GLOBAL_EVERY)
    assert len(acks) == N_PROCS * M_FACTS + n_global

    with MemoryService(tmp_home) as svc:
        project = _project_store(svc, repo)
        paths = {s: svc.paths(s) for s in (project, "global")}
        # Files: exactly one per acknowledged remember, each holding its own token.
        project_files = _visible_md(paths[project].inbox)
        global_files = _visible_md(paths["global"].inbox)
        assert len(project_files) == N_PROCS * M_FACTS
        assert len(global_files) == n_global
        shared = [p for p in project_files if p.name.startswith("shared-collision-title")]
        assert len(shared) == N_PROCS * ((M_FACTS + 1) // 2)  # the colliding slugs all survived
        for token, store, _fact_id, path in acks:
            assert token in Path(path).read_text(encoding="utf-8"), (token, path)
            assert Path(path).parent == paths[store].inbox
        assert len({a[3] for a in acks}) == len(acks)  # no two acks name the same file
        assert len({a[2] for a in acks}) == len(acks)  # nor the same id

        # Index: one documents row per file, ids as acknowledged, through list_facts paging and SQL.
        rows = _query(
            svc.settings.index_path,
            "SELECT resource_name, count(*) FROM documents WHERE path LIKE '%/knowledge/inbox/%' "
            "GROUP BY resource_name",
        )
        assert dict(rows) == {project: N_PROCS * M_FACTS, "global": n_global}  # type: ignore[arg-type]
        for store in (project, "global"):
            listed = _all_facts(svc, store)
            assert sorted(r.fact.id for r in listed) == sorted(a[2] for a in acks if a[1] == store)
            assert len({str(r.path) for r in listed}) == len(listed)
        counts = {info.name: info.fact_count for info in svc.stores()}
        assert counts == {project: N_PROCS * M_FACTS, "global": n_global}

        # Recall: every fact by its unique token.
        for token, _store, _fact_id, path in acks:
            assert Path(path) in _hits_with(svc, token, repo), token

        report = svc.doctor()
        assert report.ok, (report.broken, report.index_mismatches)
    _check_index_integrity(tmp_home / "index.db")


# -- 2. crash safety -------------------------------------------------------------------------------
KILL_ROUNDS = 8


def test_sigkill_mid_remember_leaves_no_torn_files_and_loses_no_ack(tmp_home: Path, repo: Path) -> None:
    """A writer SIGKILLed at random points: files whole, every acknowledged fact kept and recallable."""
    seed = int(os.environ.get("COFFER_TEST_SEED") or random.SystemRandom().randrange(1 << 30))
    rng = random.Random(seed)
    acks: list[tuple[str, str, str, str]] = []
    for round_no in range(KILL_ROUNDS):
        proc = _spawn("loop", str(tmp_home), str(repo), f"r{round_no}")
        try:
            _read_ready(proc)
            time.sleep(rng.uniform(0.010, 0.200))
        finally:
            proc.send_signal(signal.SIGKILL)
            out, err = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL, f"seed={seed} round={round_no}: {err}"
        acks.extend(_acks(out))
    assert acks, f"seed={seed}: no child ever acknowledged a write"

    with MemoryService(tmp_home) as svc:
        project = _project_store(svc, repo)
        stores = {project: svc.paths(project), "global": svc.paths("global")}
        # Every visible Markdown file is whole: frontmatter parses, body present.
        texts: dict[Path, str] = {}
        for sp in stores.values():
            for path in _visible_md(sp.root):
                raw = path.read_bytes()
                assert raw, f"seed={seed}: empty file {path}"
                post = frontmatter.loads(raw.decode("utf-8"))
                assert post.metadata.get("title") and post.metadata.get("created_at"), (seed, path)
                assert post.content.strip(), f"seed={seed}: no body in {path}"
                texts[path] = raw.decode("utf-8")
        # Leftover temp files of killed writers, plus two planted ones (a torn fact and a hidden
        # .md holding a whole fact): none of them may be recalled or reported.
        inbox = stores[project].inbox
        leftovers = [p for sp in stores.values() for p in sp.root.rglob(".tmp-*")]
        whole = texts[Path(acks[0][3])].replace(acks[0][0], "hiddentmptokenz")
        (inbox / ".tmp-planted.md").write_text(whole, encoding="utf-8")
        (inbox / ".tmp-torn.part").write_text(whole[: len(whole) // 2] + " tornpartokenz", encoding="utf-8")

        for token, store, _fact_id, path in acks:
            assert token in texts.get(Path(path), ""), f"seed={seed}: acknowledged {token} not in {path}"
            assert Path(path).parent == stores[store].inbox
            assert Path(path) in _hits_with(svc, token, repo), f"seed={seed}: {token} not recalled"
        for token in ("hiddentmptokenz", "tornpartokenz"):
            for mode in ("keyword", "grep"):
                assert svc.recall(token, cwd=repo, mode=mode).hits == (), (token, mode)

        # The index agrees with the files (ids as acknowledged), before and after a full reindex.
        for store in stores:
            listed = {r.fact.id for r in _all_facts(svc, store)}
            acked = {a[2] for a in acks if a[1] == store}
            assert acked <= listed, f"seed={seed}: acknowledged ids missing from the index"
            assert len(listed) == len(_visible_md(stores[store].knowledge))
        svc.reindex()
        report = svc.doctor()
        assert report.ok, (seed, report.broken, report.index_mismatches)
        mentioned = " ".join([*report.index_mismatches, *(str(b.path) for b in report.broken)])
        assert ".tmp-" not in mentioned
        # Recall and doctor never choke on them; reindex removes those of writers now dead (their
        # pid is in the name) and keeps the planted, pid-less ones until they are ten minutes old.
        assert not any(p.exists() for p in leftovers)
        assert (inbox / ".tmp-planted.md").exists() and (inbox / ".tmp-torn.part").exists()
    _check_index_integrity(tmp_home / "index.db")


# -- 3. rebuild ------------------------------------------------------------------------------------
TOPIC_SECTIONS = 4


def _dump(db_path: Path) -> dict[str, list[tuple[object, ...]]]:
    return {
        # All but file_ctime_ns: a file indexed within the ctime tick of its last change keeps
        # none (it is hashed again later), so that column depends on timing, not on the files.
        "documents": _query(
            db_path,
            "SELECT id, kind, resource_name, project_id, path, title, description, metadata, content_sha256, "
            "source_mode, locked, created_at, updated_at, file_size, file_mtime_ns, file_ino "
            "FROM documents ORDER BY resource_name, path",
        ),
        "chunks": _query(db_path, "SELECT * FROM chunks ORDER BY id"),
        "fts": _query(db_path, "SELECT text, resource_name, chunk_id FROM documents_fts ORDER BY chunk_id"),
    }


def _topic_doc() -> str:
    sections = []
    for n in range(TOPIC_SECTIONS):
        para = " ".join(f"section{n}word{k}" for k in range(70))
        sections.append(f"## Section {n}\n\n{para}\n\n{para.upper()}\n")
    head = "---\ntitle: Big topic\ndescription: a topic document\n---\n\n# Big topic\n\n"
    return head + "\n".join(sections)


def test_index_rebuilds_identically_from_files(tmp_home: Path, repo: Path) -> None:
    """Delete index.db (+ -wal/-shm): a fresh service rebuilds the same rows and the same fact ids."""
    with MemoryService(tmp_home) as svc:
        for i in range(36):
            title = "Repeated title" if i % 3 == 0 else None
            svc.remember(f"Project fact {i} about rebuilding rbp{i:03d}z", title=title, cwd=repo)
        for i in range(10):
            svc.remember(f"Global fact {i} rbg{i:03d}z", scope="global", cwd=repo)
        project = _project_store(svc, repo)
        sp, gp = svc.paths(project), svc.paths("global")
        (sp.knowledge / "plain.md").write_text("# Plain heading\n\nNo frontmatter here plaintokz.\n")
        (sp.knowledge / "legacy.md").write_text("---\nname: Legacy named fact\n---\n\nLegacy body legtokz.\n")
        topic = _topic_doc()
        assert len(topic) > 3000
        (sp.knowledge / "topics").mkdir()
        (sp.knowledge / "topics" / "big.md").write_text(topic)
        sp.journal.mkdir()
        (sp.journal / "2026-01-02.md").write_text("Journal entry jrntokz.\n")
        (gp.knowledge / "global-plain.md").write_text("A global note with no heading gplaintokz.\n")
        svc.recall("anything", cwd=repo)

        before = _dump(svc.settings.index_path)
        ids_before = {s: sorted(r.fact.id for r in _all_facts(svc, s)) for s in (project, "global")}
        titles = {r.path.name: r.fact.title for r in _all_facts(svc, project)}
    assert titles["legacy.md"] == "Legacy named fact"
    assert titles["plain.md"] == "Plain heading"
    assert len(before["documents"]) == 36 + 10 + 5
    big_chunks = [r for r in before["fts"] if "section0word0" in str(r[0]) or "Section 3" in str(r[0])]
    assert len({r[2] for r in big_chunks}) >= 2
    assert len(ids_before[project]) == 36 + 3 and len(ids_before["global"]) == 11

    for suffix in ("", "-wal", "-shm"):
        Path(f"{tmp_home / 'index.db'}{suffix}").unlink(missing_ok=True)
    assert not (tmp_home / "index.db").exists()

    with MemoryService(tmp_home) as svc:
        assert svc.recall("plaintokz", cwd=repo).hits
        after = _dump(svc.settings.index_path)
        ids_after = {s: sorted(r.fact.id for r in _all_facts(svc, s)) for s in (project, "global")}
    for table in before:
        assert after[table] == before[table], table
    assert ids_after == ids_before
    _check_index_integrity(tmp_home / "index.db")


# -- 4. atomic write primitives --------------------------------------------------------------------
def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_write_modes_and_no_clobber(tmp_path: Path, umask_022: None) -> None:
    base = tmp_path / "aw"
    target = base / "a" / "b" / "fact.md"
    atomic_write(target, b"first\n")
    assert target.read_bytes() == b"first\n"
    assert _mode(target) == 0o600
    assert _mode(base / "a") == 0o700 and _mode(base / "a" / "b") == 0o700
    assert _mode(base) == 0o700

    # overwrite=True replaces in place, the result is still 0600 even if the old file was 0644.
    os.chmod(target, 0o644)
    atomic_write(target, b"second\n", overwrite=True)
    assert target.read_bytes() == b"second\n"
    assert _mode(target) == 0o600

    # overwrite=False never clobbers.
    with pytest.raises(FileExistsError):
        atomic_write(target, b"third\n", overwrite=False)
    assert target.read_bytes() == b"second\n"
    assert sorted(os.listdir(target.parent)) == ["fact.md"]

    fresh = target.parent / "new.md"
    atomic_write(fresh, b"new\n", overwrite=False)
    assert fresh.read_bytes() == b"new\n" and _mode(fresh) == 0o600
    assert sorted(os.listdir(target.parent)) == ["fact.md", "new.md"]


@pytest.mark.parametrize("overwrite", [True, False])
def test_atomic_write_failure_mid_write_keeps_original(tmp_path: Path, overwrite: bool) -> None:
    """A write that fails after the temp file exists leaves the target untouched and no temp behind."""
    folder = tmp_path / "f"
    target = folder / "fact.md"
    atomic_write(target, b"original bytes\n")
    with pytest.raises(TypeError):
        atomic_write(target, "not bytes", overwrite=overwrite)  # type: ignore[arg-type]
    assert target.read_bytes() == b"original bytes\n"
    assert os.listdir(folder) == ["fact.md"]


def test_atomic_write_file_too_large_keeps_original(tmp_path: Path) -> None:
    """RLIMIT_FSIZE in a child: the write fails part-way with EFBIG; the original stays, no temp left."""
    folder = tmp_path / "f"
    target = folder / "fact.md"
    atomic_write(target, b"original bytes\n")
    proc = subprocess.run(
        [sys.executable, str(WRITER), "fsize", str(target), "4096", str(1 << 20)],
        capture_output=True,
        text=True,
        env=_child_env(),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "raised True"
    assert target.read_bytes() == b"original bytes\n"
    assert os.listdir(folder) == ["fact.md"]


# -- 5. outside edits ------------------------------------------------------------------------------
def _rewrite_in_place(path: Path, old: str, new: str) -> None:
    """Same inode, same folder (no folder mtime change), different size."""
    data = path.read_text(encoding="utf-8").replace(old, new)
    inode = os.stat(path).st_ino
    with open(path, "r+", encoding="utf-8") as handle:
        handle.write(data)
        handle.truncate()
    assert os.stat(path).st_ino == inode


def test_outside_edits_small_store(svc: MemoryService, repo: Path) -> None:
    """A small store is fully stat'ed on every read: in-place edits, deletes and new files show at once."""
    a = svc.remember("Alpha fact oldalphaz.", cwd=repo)
    b = svc.remember("Bravo fact bravotokz.", cwd=repo)
    svc.remember("Charlie fact charlietokz.", cwd=repo)
    assert _hits_with(svc, "oldalphaz", repo) == [a.path]

    _rewrite_in_place(a.path, "oldalphaz", "newalphaz with a longer body")
    assert _hits_with(svc, "newalphaz", repo) == [a.path]
    assert _hits_with(svc, "oldalphaz", repo) == []

    b.path.unlink()
    assert _hits_with(svc, "bravotokz", repo) == []
    assert b.fact.id not in {r.fact.id for r in _all_facts(svc, b.store)}

    hand = svc.paths(a.store).knowledge / "hand-written.md"
    hand.write_text("# Hand note\n\nWritten by a human handtokz.\n")
    assert _hits_with(svc, "handtokz", repo) == [hand]
    assert hand in {r.path for r in _all_facts(svc, a.store)}
    assert svc.doctor().ok


def _last_full_scan(db_path: Path, store: str) -> float:
    rows = _query(db_path, "SELECT last_full_scan FROM store_state WHERE resource_name = ?", (store,))
    return float(rows[0][0])  # type: ignore[arg-type]


def test_outside_edits_large_store(tmp_home: Path, repo: Path) -> None:
    """Large-store setting (no full stat scan on reads for an hour): the folder-mtime fast path.

    Expected: a file created, renamed, moved or deleted by hand changes its folder's mtime, so
    it is seen on the very next read. An in-place edit of an existing file does not touch the
    folder, so it is only guaranteed to show after ``svc.reindex()`` (or once the periodic full
    scan is due, here after 3600 s); this test asserts the reindex path only.
    """
    settings = Settings.load(tmp_home, reconcile_full_scan_max_files=0, reconcile_full_scan_seconds=3600)
    with MemoryService(settings=settings) as svc:
        a = svc.remember("Alpha fact oldalphaz.", cwd=repo)
        b = svc.remember("Bravo fact bravotokz.", cwd=repo)
        svc.remember("Charlie fact charlietokz.", cwd=repo)
        assert _hits_with(svc, "charlietokz", repo)
        sp = svc.paths(a.store)
        db_path = settings.index_path
        scanned_at = _last_full_scan(db_path, a.store)

        created = sp.inbox / "hand-new.md"
        created.write_text("# New by hand\n\nCreated by hand createdtokz.\n")
        assert _hits_with(svc, "createdtokz", repo) == [created]

        renamed = sp.inbox / "hand-renamed.md"
        created.rename(renamed)
        assert _hits_with(svc, "createdtokz", repo) == [renamed]

        moved = sp.knowledge / "topics" / "moved.md"
        moved.parent.mkdir()
        renamed.rename(moved)
        assert _hits_with(svc, "createdtokz", repo) == [moved]

        journal = sp.journal / "2026-01-02.md"
        journal.parent.mkdir()
        journal.write_text("Journal by hand journaltokz.\n")
        assert _hits_with(svc, "journaltokz", repo) == [journal]

        b.path.unlink()
        assert _hits_with(svc, "bravotokz", repo) == []
        moved.unlink()
        assert _hits_with(svc, "createdtokz", repo) == []
        assert _last_full_scan(db_path, a.store) == scanned_at  # all of the above via folder mtimes

        _rewrite_in_place(a.path, "oldalphaz", "newalphaz with a longer body")
        svc.reindex()
        assert _hits_with(svc, "newalphaz", repo) == [a.path]
        assert _hits_with(svc, "oldalphaz", repo) == []
        assert svc.doctor().ok


# -- 6. broken frontmatter -------------------------------------------------------------------------
BROKEN = "---\ntitle: [unclosed\ndescription: broken\n---\n\nBody of a broken file {token}.\n"


def test_broken_frontmatter_is_skipped_and_reported(svc: MemoryService, repo: Path) -> None:
    good = svc.remember("A good fact goodtokz.", cwd=repo)
    spoiled = svc.remember("Soon to be spoiled spoiltokz.", cwd=repo)
    sp = svc.paths(good.store)
    broken = sp.knowledge / "broken.md"
    broken.write_text(BROKEN.format(token="brokentokz"))
    # A fact that was indexed, then broken by hand: its rows must go too.
    spoiled.path.write_text(BROKEN.format(token="spoiltokz"))

    for mode in ("keyword", "grep"):
        for token in ("brokentokz", "spoiltokz"):
            hits = svc.recall(token, cwd=repo, mode=mode).hits
            assert not {broken, spoiled.path} & {h.path for h in hits}, (mode, token)
        assert good.path in {h.path for h in svc.recall("goodtokz", cwd=repo, mode=mode).hits}

    assert {r.path for r in _all_facts(svc, good.store)} == {good.path}
    report = svc.doctor()
    assert not report.ok
    assert {b.path for b in report.broken} == {broken, spoiled.path}
    assert report.index_mismatches == ()

    # Repair by hand: back in recall, doctor clean.
    broken.write_text("---\ntitle: Repaired\n---\n\nRepaired body brokentokz.\n")
    assert _hits_with(svc, "brokentokz", repo) == [broken]
    spoiled.path.unlink()
    assert svc.doctor().ok


def test_reindex_sweeps_temp_files_left_by_dead_writers(svc: MemoryService) -> None:
    """A writer killed between mkstemp and rename leaves a hidden temp file; reindex removes old ones."""
    svc.remember("keep me", scope="global")
    inbox = svc.paths("global").inbox
    old, fresh = inbox / ".tmp-old.part", inbox / ".tmp-fresh.part"
    old.write_text("half a fact")
    fresh.write_text("a write in progress")
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    svc.reindex()
    assert not old.exists() and fresh.exists()
    assert len(svc.list_facts(store="global").items) == 1


def test_large_store_sees_in_place_edits_through_the_background_scan(tmp_home: Path) -> None:
    """Above the full-scan threshold a service runs the due full scan on a background thread."""
    settings = Settings.load(tmp_home, reconcile_full_scan_max_files=0, reconcile_full_scan_seconds=0.0)
    with MemoryService(settings=settings) as svc:
        r = svc.remember("the build agent is called falcon", scope="global")
        svc.recall("falcon", stores=["global"])
        text = r.path.read_text().replace("falcon", "kestrel-and-more")
        r.path.write_text(text)  # in place: the folder's mtime does not move
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if svc.recall("kestrel", stores=["global"]).hits:
                break
            time.sleep(0.05)
        assert svc.recall("kestrel", stores=["global"]).hits[0].id == r.fact.id
