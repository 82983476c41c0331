"""A team's PostgreSQL index cannot be corrupted by a misconfigured member or a lost lock.

One database follows one memory folder, known by the id in its ``folder.json`` (docs/team.md,
'One folder per database'); a write whose store lock was lost is not made. Every test runs a real
server, real temp homes, real git repositories, and the faces as subprocesses.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import git
from served import Served

from coffer_memory import IndexFolderMismatch, IndexUnavailable, MemoryService
from coffer_memory._config import Settings

psycopg = pytest.importorskip(
    "psycopg", reason="PostgreSQL tests need psycopg: pip install 'coffer-memory[postgresql]'"
)
SCRIPTS = Path(sys.executable).parent
FIX = "point this home's memory at the team's shared folder"


def member(home: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> MemoryService:
    """One team member: a service of its own home on the shared database."""
    monkeypatch.setenv("COFFER_PG_URL", url)
    return MemoryService(settings=Settings.load(home, index={"backend": "postgresql"}))


def home_on(folder: Path, home: Path) -> Path:
    """A home whose ``memory`` is a link to ``folder`` (as docs/team.md asks)."""
    home.mkdir(parents=True)
    (home / "memory").symlink_to(folder)
    return home


def texts(svc: MemoryService, query: str) -> list[str]:
    return [h.text for h in svc.recall(query, stores=["global"], mode="keyword").hits]


def rows(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        found = conn.execute("SELECT path FROM coffer_documents ORDER BY path").fetchall()
    return [str(r[0]) for r in found]


def bound(url: str) -> str | None:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT value FROM coffer_meta WHERE key = 'folder_id'").fetchone()
    return str(row[0]) if row else None


def folder_id(folder: Path) -> str:
    return str(json.loads((folder / "folder.json").read_text())["id"])


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    folder = tmp_path / "mnt" / "team-memory"
    folder.mkdir(parents=True)
    return folder


# -- one folder per database ------------------------------------------------------------------------
def test_a_member_with_a_folder_of_its_own_is_refused_before_it_removes_the_others_rows(
    pg_url: str, shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/team.md warned: a member whose home kept a memory/ folder of its own made its first read
    remove the rows of every fact the others wrote."""
    alice = home_on(shared, tmp_path / "alice")
    with member(alice, pg_url, monkeypatch) as svc:
        svc.remember("the otter owns the staging deploy key", store="global")
    team_rows = rows(pg_url)
    assert len(team_rows) == 1 and bound(pg_url) == folder_id(shared)
    assert stat.S_IMODE((shared / "folder.json").stat().st_mode) == 0o600

    bob = tmp_path / "bob"  # a laptop home with facts of its own, from before it joined the team
    with MemoryService(bob) as svc:
        svc.remember("bob's own note about zebras", store="global")
    for call in ("recall", "remember"):
        with member(bob, pg_url, monkeypatch) as svc, pytest.raises(IndexFolderMismatch) as caught:
            if call == "recall":
                svc.recall("otter", stores=["global"], mode="keyword")
            else:
                svc.remember("bob writes to the team", store="global")
        assert caught.value.code == "INDEX_UNAVAILABLE" and FIX in str(caught.value)
        assert caught.value.bound_to == folder_id(shared) and caught.value.folder_id is None
        assert "no folder.json" in str(caught.value)
        assert rows(pg_url) == team_rows  # was: [] (bob's read removed them), then bob's own rows
    assert not (bob / "memory" / "folder.json").exists()  # bob's folder is not claimed either
    assert len(list((bob / "memory").rglob("*.md"))) == 1

    carol = tmp_path / "carol"  # a folder that was bound to another team's database
    (carol / "memory").mkdir(parents=True)
    (carol / "memory" / "folder.json").write_text('{"format": 1, "id": "%s"}\n' % ("ab" * 16))
    with (
        member(carol, pg_url, monkeypatch) as svc,
        pytest.raises(IndexFolderMismatch, match="another folder"),
    ):
        svc.recall("otter", stores=["global"])
    with member(alice, pg_url, monkeypatch) as svc:
        assert texts(svc, "otter") == ["the otter owns the staging deploy key"]


def test_the_shared_folder_is_known_by_its_content_not_its_path(
    pg_url: str, shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each host reaches the folder through another link or mount path: all are one folder."""
    alias = tmp_path / "other-mount"
    alias.symlink_to(shared)
    homes = [home_on(shared, tmp_path / "a"), home_on(alias, tmp_path / "b")]
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "memory").symlink_to(alias / ".")  # a link through a link
    homes.append(tmp_path / "c")
    for n, home in enumerate(homes):
        with member(home, pg_url, monkeypatch) as svc:
            svc.remember(f"the walrus fact number {n}", store="global")
            assert len(texts(svc, "walrus")) == n + 1
    assert len(rows(pg_url)) == 3 and bound(pg_url) == folder_id(shared)


def test_a_git_synced_folder_joins_once_it_is_pulled_and_the_marker_is_committable(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    a_home, b_home = tmp_path / "a", tmp_path / "b"
    for home in (a_home, b_home):
        home.mkdir()
    git(a_home, "clone", "-q", str(origin), "memory")
    with member(a_home, pg_url, monkeypatch) as svc:
        svc.remember("the heron migrates in March", store="global")
    git(a_home / "memory", "add", "-A")
    git(a_home / "memory", "commit", "-q", "-m", "first facts and folder.json")

    git(b_home, "clone", "-q", str(origin), "memory")  # cloned before host A pushed: empty
    with member(b_home, pg_url, monkeypatch) as svc:
        with pytest.raises(IndexFolderMismatch, match="sync or pull it first"):
            svc.recall("heron", stores=["global"])
        assert rows(pg_url) == ["knowledge/inbox/" + p.name for p in a_home.joinpath("memory").rglob("*.md")]
        git(a_home / "memory", "push", "-q", "origin", "main")
        git(b_home / "memory", "pull", "-q", "origin", "main")
        # The same process joins on its next request, without a restart.
        assert texts(svc, "heron") == ["the heron migrates in March"]
        svc.remember("the heron nests by the weir", store="global")
    assert git(b_home / "memory", "status", "--porcelain", "folder.json") == ""  # unchanged by use
    assert folder_id(a_home / "memory") == folder_id(b_home / "memory") == bound(pg_url)


def test_a_database_from_before_folder_ids_is_adopted_by_the_team_folder_only(
    pg_url: str, shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = home_on(shared, tmp_path / "alice")
    with member(alice, pg_url, monkeypatch) as svc:
        for i in range(6):
            svc.remember(f"the kestrel fact {i}", store="global")
    # What an older coffer left: schema 3, rows, and neither a binding nor a folder.json.
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DELETE FROM coffer_meta WHERE key = 'folder_id'")
        conn.execute("UPDATE coffer_meta SET value = '3' WHERE key = 'schema_version'")
    (shared / "folder.json").unlink()
    team_rows = rows(pg_url)

    bob = tmp_path / "bob"  # first to start after the upgrade, on a folder of his own
    with MemoryService(bob) as svc:
        svc.remember("bob's private kestrel note", store="global")
    with member(bob, pg_url, monkeypatch) as svc, pytest.raises(IndexFolderMismatch, match="6 of 6 sampled"):
        svc.recall("kestrel", stores=["global"])
    assert rows(pg_url) == team_rows and bound(pg_url) is None
    assert not (bob / "memory" / "folder.json").exists()

    with member(alice, pg_url, monkeypatch) as svc:  # the team's folder: adopted without a word
        assert len(texts(svc, "kestrel")) == 6
    assert bound(pg_url) == folder_id(shared) and rows(pg_url) == team_rows
    with psycopg.connect(pg_url) as conn:  # an older coffer now refuses it, as too new
        assert conn.execute("SELECT value FROM coffer_meta WHERE key = 'schema_version'").fetchone() == ("6",)


def test_a_marker_that_is_not_coffers_is_refused_and_kept(
    pg_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_home / "memory").mkdir(parents=True)
    (tmp_home / "memory" / "folder.json").write_text("not json")
    with (
        member(tmp_home, pg_url, monkeypatch) as svc,
        pytest.raises(IndexFolderMismatch, match="no folder id"),
    ):
        svc.remember("anything", store="global")
    assert (tmp_home / "memory" / "folder.json").read_text() == "not json"
    assert bound(pg_url) is None and list((tmp_home / "memory").rglob("*.md")) == []


def test_a_link_re_pointed_while_a_process_runs_is_refused_before_it_removes_rows(
    pg_url: str, shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The link re-pointed under a running process (to an empty store): its next read removed
    every row of the store. The share unmounted (the link dangles): its writes are refused."""
    home = home_on(shared, tmp_path / "a")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "global" / "knowledge" / "inbox").mkdir(parents=True)
    with member(home, pg_url, monkeypatch) as svc:
        svc.remember("the badger digs at night", store="global")
        for target in (elsewhere, tmp_path / "unmounted" / "share"):
            (home / "memory").unlink()
            (home / "memory").symlink_to(target)
            if target == elsewhere:
                with pytest.raises(IndexFolderMismatch):
                    svc.index.reconcile("global", full=True)  # what a read does once it looks
            with pytest.raises(IndexFolderMismatch):
                svc.remember("written into the wrong folder", store="global")
            assert len(rows(pg_url)) == 1
    assert list(elsewhere.rglob("*.md")) == [] and not (tmp_path / "unmounted").exists()


# -- the faces, as subprocesses ----------------------------------------------------------------------
@pytest.fixture
def misconfigured(
    pg_url: str, shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """The environment of a member whose home has a memory folder of its own, on a bound database."""
    with member(home_on(shared, tmp_path / "alice"), pg_url, monkeypatch) as svc:
        svc.remember("the team's fact about ospreys", store="global")
    bob = tmp_path / "bob"
    (bob / "memory").mkdir(parents=True)
    return {
        **os.environ,
        "COFFER_HOME": str(bob),
        "COFFER_INDEX_BACKEND": "postgresql",
        "COFFER_PG_URL": pg_url,
    }


def _refusal_shown(said: str) -> None:
    assert "INDEX_UNAVAILABLE" in said and FIX in said and "Traceback" not in said


def test_the_cli_shows_the_refusal_without_a_traceback(misconfigured: dict[str, str], pg_url: str) -> None:
    before = rows(pg_url)
    for args in (
        ["recall", "ospreys", "--store", "global"],
        ["remember", "bob's fact", "--store", "global"],
        ["doctor"],
    ):
        run = subprocess.run(
            [str(SCRIPTS / "coffer"), *args], env=misconfigured, capture_output=True, text=True, timeout=300
        )
        assert run.returncode != 0, args
        _refusal_shown(run.stdout + run.stderr)
    assert rows(pg_url) == before
    team = {**misconfigured, "COFFER_HOME": str(Path(misconfigured["COFFER_HOME"]).parent / "alice")}
    run = subprocess.run(
        [str(SCRIPTS / "coffer"), "doctor"], env=team, capture_output=True, text=True, timeout=300
    )
    shared_id = folder_id(Path(team["COFFER_HOME"]) / "memory")
    assert f"shared index: postgresql: follows this memory folder (folder.json id {shared_id})" in run.stdout


@pytest.mark.timeout(300)
def test_rest_answers_503_with_the_refusal(misconfigured: dict[str, str], pg_url: str) -> None:
    with Served([str(SCRIPTS / "coffer-api"), "--log-level", "warning"], misconfigured) as served:
        base = f"{served.base}/api/v1/memory_stores/global"
        answers = [
            httpx.get(f"{base}/recall", params={"query": "ospreys"}, timeout=60),
            httpx.post(f"{base}/facts", json={"text": "bob's fact"}, timeout=60),
        ]
    err = served.stderr()
    for answer in answers:
        assert answer.status_code == 503, answer.text
        error = answer.json()["error"]
        assert error["code"] == "INDEX_UNAVAILABLE" and FIX in error["message"]
        assert error["details"]["bound_to"] and "Traceback" not in answer.text
    assert "Traceback" not in err
    assert len(rows(pg_url)) == 1


@pytest.mark.timeout(300)
def test_an_mcp_tool_answers_the_refusal(misconfigured: dict[str, str], pg_url: str) -> None:
    proc = subprocess.Popen(
        [str(SCRIPTS / "coffer-mcp")],
        env=misconfigured,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, object]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        proc.stdin.flush()

    def answer(wanted: int) -> dict[str, object]:
        assert proc.stdout is not None
        for line in proc.stdout:
            got: dict[str, object] = json.loads(line)
            if got.get("id") == wanted:
                return got
        raise AssertionError("coffer-mcp closed stdout without answering")

    try:
        params = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        send({"id": 1, "method": "initialize", "params": params})
        answer(1)
        send({"method": "notifications/initialized"})
        call = {"name": "coffer__remember", "arguments": {"text": "bob's fact", "scope": "global"}}
        send({"id": 2, "method": "tools/call", "params": call})
        result = answer(2)["result"]
    finally:
        _, err = proc.communicate(timeout=60)  # closes stdin: the server ends
    assert isinstance(result, dict) and result["isError"] is True
    said = "\n".join(block["text"] for block in result["content"] if block.get("type") == "text")
    assert said.startswith("INDEX_UNAVAILABLE: ")
    _refusal_shown(said)
    assert "Traceback" not in err.decode(errors="replace")
    assert len(rows(pg_url)) == 1


# -- a lost lock ---------------------------------------------------------------------------------------
def lock_holder(url: str, store: str) -> int:
    """The server process (backend pid) holding the advisory lock of ``store``."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT hashtextextended('coffer-store:' || %s, 0)", (store,)).fetchone()
        key = int(row[0]) if row else 0
        held = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
            "classid::bigint = %s AND objid::bigint = %s",
            ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF),
        ).fetchall()
    assert len(held) == 1, held
    return int(held[0][0])


def terminate(url: str, pid: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


@pytest.fixture
def two_hosts(
    pg_url: str, shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[MemoryService, MemoryService]]:
    """Two members on one folder, each with its own home: only PostgreSQL's lock serialises them
    (each home's file lock cannot reach the other, as across hosts)."""
    with (
        member(home_on(shared, tmp_path / "a"), pg_url, monkeypatch) as a,
        member(home_on(shared, tmp_path / "b"), pg_url, monkeypatch) as b,
    ):
        yield a, b


def test_a_write_whose_lock_was_lost_is_not_made_and_the_new_holders_file_stands(
    pg_url: str, two_hosts: tuple[MemoryService, MemoryService]
) -> None:
    """The lock's connection dropped mid-transaction: the write went ahead anyway and replaced the
    file another member wrote meanwhile under the lock the server had given it."""
    a, b = two_hosts
    fact = a.remember("the deploy key is in the vault", title="Deploy key", store="global")
    path = fact.path
    with a.writer.transaction("global") as tx:
        log_before = tx.read(tx.paths.consolidation_log)
        terminate(pg_url, lock_holder(pg_url, "global"))
        # b, on another host, gets the lock the server released and edits the same fact.
        b.edit_fact(fact.fact.id, body="the deploy key moved to the HSM", store="global")
        for step in (
            lambda: tx.write(path, b"---\ntitle: Deploy key\n---\nthe stale version a held\n"),
            lambda: tx.create(tx.paths.inbox / "new.md", b"---\ntitle: new\n---\nwritten without the lock\n"),
            lambda: tx.delete(path),
            lambda: tx.log("merged", "a log line written without the lock"),
        ):
            with pytest.raises(IndexUnavailable, match="write lock of store 'global' was lost"):
                step()
        assert tx.receipts == []
    assert "moved to the HSM" in path.read_text()  # b's file stands
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no new.md, no temp file
    log = a.writer.paths("global").consolidation_log
    assert (log.read_bytes() if log.exists() else None) == log_before
    assert texts(a, "HSM") == ["the deploy key moved to the HSM"]
    a.remember("a writes again once it takes the lock afresh", store="global")  # recovered
    assert texts(b, "afresh") == ["a writes again once it takes the lock afresh"]


def test_a_lock_still_held_lets_every_kind_of_write_through(
    pg_url: str, two_hosts: tuple[MemoryService, MemoryService]
) -> None:
    """The fence asks the server whether the lock is held; held, nothing changes."""
    a, _ = two_hosts
    with a.writer.transaction("global") as tx:
        made = tx.create(tx.paths.inbox / "held.md", b"---\ntitle: held\n---\nthe lock is held\n")
        tx.write(made.path, b"---\ntitle: held\n---\nthe lock is still held\n")
        tx.log("checked", "the fence let it through")
    assert texts(a, "still held") == ["the lock is still held"]
    assert b"the fence let it through" in a.writer.paths("global").consolidation_log.read_bytes()
