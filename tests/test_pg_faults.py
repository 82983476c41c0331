"""A team's PostgreSQL under faults and odd input: connections the server ends, a server that
restarts or stops, a lock lost in the middle of a write, text PostgreSQL cannot hold, a read-only
role, and a database migrated by a newer coffer. Every test runs a real server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import CliRunner
from pg_server import PgServer, PgUnavailable

from coffer_memory import IndexUnavailable, MemoryService
from coffer_memory._config import Settings

psycopg = pytest.importorskip(
    "psycopg", reason="PostgreSQL tests need psycopg: pip install 'coffer-memory[postgresql]'"
)
from coffer_memory._index.pg.schema import SCHEMA_VERSION  # noqa: E402  (imports psycopg)


def member(home: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> MemoryService:
    """One team member: a service of its own home on the shared database."""
    monkeypatch.setenv("COFFER_PG_URL", url)
    return MemoryService(settings=Settings.load(home, index={"backend": "postgresql"}))


def texts(svc: MemoryService, query: str) -> list[str]:
    return [h.text for h in svc.recall(query, stores=["global"], mode="keyword").hits]


def end_sessions(url: str) -> None:
    """What an administrator's pg_terminate_backend (or a proxy's idle timeout) does to coffer."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND datname = current_database()"
        )


def two_homes(tmp_path: Path) -> list[Path]:
    """Alice's and Bob's homes, each with ``memory`` a link to one shared folder."""
    shared = tmp_path / "shared"
    shared.mkdir()
    for name in ("alice", "bob"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "memory").symlink_to(shared)
    return [tmp_path / "alice", tmp_path / "bob"]


def facts_on_disk(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "memory").rglob("*.md"))


def test_connections_the_server_ended_are_replaced_not_reported(
    pg_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool handed out a connection the server had ended: INDEX_UNAVAILABLE with the server up.
    Now the read, and the write's lock, are tried again on a fresh connection."""
    with member(tmp_home, pg_url, monkeypatch) as svc:
        svc.remember("the pager rotates on Mondays", store="global")
        end_sessions(pg_url)
        assert texts(svc, "pager rotates") == ["the pager rotates on Mondays"]
        end_sessions(pg_url)
        svc.remember("the pager moves to Tuesdays in May", store="global")
        end_sessions(pg_url)
        assert len(texts(svc, "pager")) == 2


def test_a_write_whose_lock_connection_drops_writes_nothing_and_a_retry_writes_once(
    pg_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection holding the store's lock dropped before the file was written: the driver's
    raw OperationalError escaped (a 500), then the file was written without the lock (another
    host could hold it by then). Now: INDEX_UNAVAILABLE, nothing written, and a retry writes once."""
    fact = b"---\ntitle: held\n---\nwritten once the lock is back\n"
    with member(tmp_home, pg_url, monkeypatch) as svc:
        svc.recall("warm the pool", stores=["global"])
        with (
            pytest.raises(IndexUnavailable, match="write lock of store 'global' was lost"),
            svc.writer.transaction("global") as tx,
        ):
            end_sessions(pg_url)
            tx.create(tx.paths.inbox / "held.md", fact)
        assert facts_on_disk(tmp_home) == []
        with svc.writer.transaction("global") as tx:  # the retry takes the lock afresh
            tx.create(tx.paths.inbox / "held.md", fact)
        assert texts(svc, "lock is back") == ["written once the lock is back"]
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT path FROM coffer_documents WHERE store = 'global'").fetchall()
    assert rows == [("knowledge/inbox/held.md",)]


def test_a_nul_byte_in_a_hand_edited_file_does_not_stop_recall_of_its_store(
    pg_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL refuses NUL in text: one such file failed every push of its store, so every
    recall of the store answered the driver's raw DataError. A NUL byte in the file makes it a
    binary file, broken and found by no mode (session 13: grep skipped it, keyword found it); a
    NUL that YAML's ``\\0`` escape puts in a title or tag is stored without it."""
    with member(tmp_home, pg_url, monkeypatch) as svc:
        fact = svc.remember("the otter guards the staging key", store="global")
        inbox = fact.path.parent
        (inbox / "pasted.md").write_bytes(b"---\ntitle: pasted\n---\na zebra \x00 crossing\n")
        (inbox / "escaped.md").write_bytes(b'---\ntitle: "nul \\0 title"\ntags: ["a\\0b"]\n---\nan okapi\n')
        assert texts(svc, "otter") == ["the otter guards the staging key"]
        assert texts(svc, "zebra crossing") == []
        assert texts(svc, "okapi") == ["an okapi"]
        assert [b.path.name for b in svc.doctor().broken] == ["pasted.md"]


def test_user_text_in_tsquery_syntax_is_words_not_operators(
    pg_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with member(tmp_home, pg_url, monkeypatch) as svc:
        svc.remember("deploy via make-release & never push tags", store="global")
        for query in ["!&|():*", "'", "\\", "%_", "release:*", "deploy <-> tags", "deploy & !tags"]:
            svc.recall(query, stores=["global"], mode="keyword")  # no syntax error from the server
        assert texts(svc, "release:*") == ["deploy via make-release & never push tags"]
        assert texts(svc, "%_") == []


@pytest.fixture
def reader_url(pg_url: str) -> Iterator[str]:
    """The same database through a role that may only read coffer's tables (docs/team.md, Roles)."""
    role = "coffer_reader"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {role}")
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT CONNECT ON DATABASE {conn.info.dbname} TO {role}")
    base, _, rest = pg_url.partition("://")
    yield f"{base}://{role}@{rest.partition('@')[2]}"
    drop_role(pg_url, role)


def drop_role(url: str, role: str) -> None:
    end_sessions(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE {role}")


def test_a_read_only_member_recalls_and_is_refused_before_a_write_touches_a_file(
    pg_url: str, reader_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only role could not even open the database (raw InsufficientPrivilege from CREATE
    TABLE IF NOT EXISTS on every request)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    writer_home, reader_home = tmp_path / "writer", tmp_path / "reader"
    for home in (writer_home, reader_home):
        home.mkdir()
        (home / "memory").symlink_to(shared)  # one shared folder, as docs/team.md asks
    with member(writer_home, pg_url, monkeypatch) as svc:
        svc.remember("the narwhal runbook lives in the wiki", store="global")
    with psycopg.connect(pg_url, autocommit=True) as conn:  # the grants of docs/team.md, 'Roles'
        conn.execute("GRANT USAGE ON SCHEMA public TO coffer_reader")
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO coffer_reader")
    with member(reader_home, reader_url, monkeypatch) as svc:
        assert texts(svc, "narwhal runbook") == ["the narwhal runbook lives in the wiki"]
        before = facts_on_disk(reader_home)
        with pytest.raises(IndexUnavailable, match="may only read"):
            svc.remember("a reader may not write this", store="global")
        assert facts_on_disk(reader_home) == before
        # A file the writers have not pushed yet: the reader's read does not fail trying to.
        (shared / "global" / "knowledge" / "inbox" / "pulled.md").write_text(
            "---\ntitle: pulled\n---\nwalrus\n"
        )
        assert texts(svc, "narwhal runbook") == ["the narwhal runbook lives in the wiki"]


def test_an_older_coffer_refuses_a_database_a_newer_one_migrated(
    pg_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch, cli: CliRunner
) -> None:
    """An older member marked the schema older again and wrote rows the newer ones read otherwise."""
    with member(tmp_home, pg_url, monkeypatch) as svc:
        svc.remember("written by this version", store="global")
    newer = str(SCHEMA_VERSION + 1)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE coffer_meta SET value = %s WHERE key = 'schema_version'", (newer,))
    with (
        member(tmp_home, pg_url, monkeypatch) as svc,
        pytest.raises(IndexUnavailable, match="upgrade coffer-memory"),
    ):
        svc.recall("written", stores=["global"])
    monkeypatch.setenv("COFFER_INDEX_BACKEND", "postgresql")
    run = cli("recall", "written", "--store", "global")
    said = run.stdout + run.stderr
    assert run.returncode != 0 and "INDEX_UNAVAILABLE" in said and "Traceback" not in said
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT value FROM coffer_meta WHERE key = 'schema_version'").fetchone()
    assert row == (newer,)


def test_a_running_process_refuses_to_write_once_a_newer_coffer_migrated_the_database(
    pg_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The version was read at start only: a member running when the owner's upgraded coffer
    migrated the database went on writing rows (and files) the newer version reads otherwise."""
    with member(tmp_home, pg_url, monkeypatch) as svc:
        svc.remember("written before the upgrade", store="global")
        with psycopg.connect(pg_url, autocommit=True) as conn:  # what the newer coffer's migration leaves
            conn.execute(
                "UPDATE coffer_meta SET value = %s WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),)
            )
        before = facts_on_disk(tmp_home)
        with pytest.raises(IndexUnavailable, match="upgrade coffer-memory on this host"):
            svc.remember("written by the stale process", store="global")
        assert facts_on_disk(tmp_home) == before
    with psycopg.connect(pg_url) as conn:
        paths = [str(r[0]) for r in conn.execute("SELECT path FROM coffer_documents").fetchall()]
    assert len(paths) == 1 and "stale" not in paths[0]


def test_words_written_before_schema_5_get_the_parts_of_paths(
    pg_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows a coffer before schema 5 wrote keep ``kv/team/payments`` as one word: the migration
    writes their words again, as a fresh push writes them."""
    with member(tmp_home, pg_url, monkeypatch) as svc:
        svc.remember("Secrets live in Vault under kv/team/payments", store="global")
        svc.remember("The payments service retries webhooks", store="global")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        fresh = conn.execute("SELECT path, position, words::text FROM coffer_chunks ORDER BY 1, 2").fetchall()
        conn.execute("UPDATE coffer_chunks SET words = to_tsvector('english', text)")  # as schema 4 wrote it
        conn.execute("UPDATE coffer_meta SET value = '4' WHERE key = 'schema_version'")
    with member(tmp_home, pg_url, monkeypatch) as svc:
        assert len(texts(svc, "payments")) == 2
    with psycopg.connect(pg_url) as conn:
        assert (
            conn.execute("SELECT path, position, words::text FROM coffer_chunks ORDER BY 1, 2").fetchall()
            == fresh
        )


def test_a_database_at_this_version_is_opened_without_ddl(
    pg_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every start ran CREATE TABLE/INDEX IF NOT EXISTS: the right to create in the schema was
    needed by every member, not only the first."""
    with member(tmp_home, pg_url, monkeypatch) as svc:
        svc.remember("the schema is settled", store="global")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        conn.execute("CREATE ROLE coffer_member LOGIN")
        conn.execute("GRANT USAGE ON SCHEMA public TO coffer_member")
        conn.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO coffer_member")
    base, _, rest = pg_url.partition("://")
    try:
        with member(tmp_home, f"{base}://coffer_member@{rest.partition('@')[2]}", monkeypatch) as svc:
            svc.remember("a member without CREATE writes too", store="global")
            assert texts(svc, "without CREATE") == ["a member without CREATE writes too"]
    finally:
        drop_role(pg_url, "coffer_member")


@pytest.fixture
def own_server() -> Iterator[PgServer]:
    """A server of this test's own, to stop and restart without disturbing the others."""
    pytest.importorskip("psycopg")
    try:
        server = PgServer()
    except PgUnavailable as exc:
        pytest.skip(f"NO POSTGRESQL: {exc}")
    yield server
    server.stop()


def back(svc: MemoryService) -> None:
    """Once the server started again: wait for the index's probe (every second) to find it up;
    until then requests are told at once that the server is down. A bound on a loaded machine,
    not a timing."""
    import time

    outage = svc.index._shared.backend.outage  # type: ignore[union-attr]
    for _ in range(1200):
        if not outage.down:
            return
        time.sleep(0.05)


def _pg_ctl(s: PgServer, *args: str) -> None:
    import subprocess

    options = f"-k {s.root} -h 127.0.0.1 -p {s.port} -c fsync=off -c full_page_writes=off"
    subprocess.run(
        [*s.prefix, s.pg_ctl, "-D", str(s.data), "-l", str(s.root / "log"), "-w", "-o", options, *args],
        check=True,
        capture_output=True,
        timeout=120,
    )


@pytest.mark.timeout(300)
def test_a_server_restarted_or_stopped_is_recovered_from_and_a_stop_writes_nothing(
    own_server: PgServer, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = own_server.url()
    with member(tmp_home, url, monkeypatch) as svc:
        svc.remember("the harbour closes at dusk", store="global")
        _pg_ctl(own_server, "-m", "immediate", "restart")
        assert texts(svc, "harbour") == ["the harbour closes at dusk"]  # was INDEX_UNAVAILABLE
        svc.remember("the harbour opens at dawn", store="global")
        _pg_ctl(own_server, "-m", "fast", "stop")
        before = facts_on_disk(tmp_home)
        with pytest.raises(IndexUnavailable, match="refused") as caught:
            svc.remember("written while the server is down", store="global")
        assert "couldn't get a connection" not in str(caught.value)  # the pool's words said no reason
        assert facts_on_disk(tmp_home) == before
        _pg_ctl(own_server, "start")
        back(svc)
        assert len(texts(svc, "harbour")) == 2
        svc.remember("written once it is back", store="global")


def _docs_sql(block: str) -> list[str]:
    """The statements of docs/team.md's ```sql block whose first line is ``-- <block>``."""
    text = (Path(__file__).parent.parent / "docs" / "team.md").read_text()
    for part in text.split("```sql\n")[1:]:
        body = part.split("```", 1)[0]
        if body.startswith(f"-- {block}\n"):
            code = "\n".join(line for line in body.splitlines() if not line.startswith("--"))
            return [statement.strip() for statement in code.split(";\n") if statement.strip()]
    raise AssertionError(f"docs/team.md has no sql block '-- {block}'")


def test_the_roles_of_docs_team_md_work_as_written(
    pg_admin_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = pg_admin_url.rpartition("/")[0]
    host = base.partition("@")[2]
    url = {
        role: f"postgresql://{role}:change-me@{host}/coffer" for role in ("coffer_owner", "alice", "auditor")
    }
    shared = tmp_path / "shared"
    shared.mkdir()
    homes = {role: tmp_path / role for role in url}
    for home in homes.values():
        home.mkdir()
        (home / "memory").symlink_to(shared)
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        for statement in _docs_sql("server"):
            conn.execute(statement)
    try:
        with psycopg.connect(f"{base}/coffer", autocommit=True) as conn:
            for statement in _docs_sql("database coffer"):
                conn.execute(statement)
        with member(homes["coffer_owner"], url["coffer_owner"], monkeypatch) as svc:
            svc.remember("the owner set the store up", store="global")
        with member(homes["alice"], url["alice"], monkeypatch) as svc:
            fact = svc.remember("alice keeps the release checklist", store="global")
            svc.edit_fact(fact.fact.id, body="alice keeps the release checklist in the wiki", store="global")
            assert len(texts(svc, "owner release")) == 2
        with member(homes["auditor"], url["auditor"], monkeypatch) as svc:
            assert texts(svc, "checklist") == ["alice keeps the release checklist in the wiki"]
            with pytest.raises(IndexUnavailable, match="'auditor' may only read"):
                svc.remember("the auditor writes nothing", store="global")
    finally:
        end_sessions(f"{base}/coffer")
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS coffer")
            for role in url:
                conn.execute(f"DROP ROLE IF EXISTS {role}")


@pytest.mark.timeout(300)
def test_a_read_while_the_server_is_down_never_waits_for_the_pool(
    own_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member whose folder got another member's fact pushes it on its next read. With the
    server down, that push waited for a pooled connection twice (2 x 10 s on REST and MCP), then
    once (10 s) before the read said INDEX_UNAVAILABLE. Now the connection that broke makes the
    read ask the server directly, which refuses: said at once, no request waits for the pool."""
    homes = two_homes(tmp_path)
    url = own_server.url()
    with member(homes[0], url, monkeypatch) as alice, member(homes[1], url, monkeypatch) as bob:
        alice.remember("the ferry leaves at noon", store="global")
        assert texts(bob, "ferry") == ["the ferry leaves at noon"]  # bob compared the store once
        alice.remember("the ferry returns at six", store="global")  # a file bob's index lacks
        _pg_ctl(own_server, "-m", "fast", "stop")
        pool = bob.index._shared.backend.pool  # type: ignore[union-attr]
        before = pool.get_stats().get("requests_errors", 0)
        with pytest.raises(IndexUnavailable, match="refused"):
            texts(bob, "ferry")
        assert pool.get_stats().get("requests_errors", 0) - before == 0  # no wait of the pool's
        _pg_ctl(own_server, "start")
        back(bob)
        assert sorted(texts(bob, "ferry")) == ["the ferry leaves at noon", "the ferry returns at six"]


def test_tables_dropped_while_processes_run_are_made_again_and_filled_from_the_files(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/team.md: the files are the truth, the index is rebuilt from them. Tables dropped
    under running processes made every request of theirs fail with the driver's UndefinedTable
    (REST 500 INTERNAL, MCP 'failed unexpectedly') until each process was restarted."""
    homes = two_homes(tmp_path)
    with member(homes[0], pg_url, monkeypatch) as alice, member(homes[1], pg_url, monkeypatch) as bob:
        alice.remember("the lighthouse is painted every spring", store="global")
        assert texts(bob, "lighthouse") == ["the lighthouse is painted every spring"]
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DROP TABLE coffer_chunks, coffer_documents, coffer_stores, coffer_meta CASCADE")
        texts(bob, "lighthouse")  # the tables are made again; this read may find them still empty
        assert texts(bob, "lighthouse") == ["the lighthouse is painted every spring"]
        alice.remember("the lighthouse keeper retires in June", store="global")
        assert len(texts(bob, "lighthouse")) == 2
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM coffer_documents").fetchone() == (2,)
        assert conn.execute("SELECT count(*) FROM coffer_meta WHERE key = 'folder_id'").fetchone() == (1,)


# -- a writer SIGKILLed while it holds the store's fence ---------------------------------------------
_FENCED_WRITER = r"""
import json, sys
from coffer_memory import MemoryService
from coffer_memory._config import Settings

home, log, hold = sys.argv[1], sys.argv[2], sys.argv[3] == "hold"
with MemoryService(settings=Settings.load(home, index={"backend": "postgresql"})) as svc, open(log, "a") as out:
    for i in range(10_000):
        if hold and i == 3:  # the store's file lock and advisory lock held, the file not yet written
            with svc.writer.transaction("global") as tx:
                print("holding", flush=True)
                sys.stdin.readline()  # until killed
        fid = svc.remember(f"Acknowledged fact {i}: the crane{i}q flies.", title=f"crane {i}", store="global").fact.id
        out.write(json.dumps([i, fid]) + "\n")
        out.flush()
        if i == 3:
            print("writing", flush=True)
"""


@pytest.mark.parametrize("where", ["holding the lock", "in a stream of writes"])
def test_a_writer_killed_holding_the_fence_loses_no_acknowledged_write(
    pg_url: str, tmp_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A writer process (its store's file lock and PostgreSQL advisory lock held: the fence) is
    SIGKILLed, holding the lock with nothing written yet, or somewhere in a stream of writes. The
    server ends its session, so its lock goes with it: the next writer is not kept waiting, every
    write the killed one reported done is on disk and in PostgreSQL, and a fresh start agrees."""
    import json
    import signal
    import subprocess
    import sys

    monkeypatch.setenv("COFFER_PG_URL", pg_url)
    log = tmp_path / "acks.jsonl"
    hold = "hold" if where == "holding the lock" else "stream"
    child = subprocess.Popen(
        [sys.executable, "-c", _FENCED_WRITER, str(tmp_home), str(log), hold],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline() == ("holding\n" if hold == "hold" else "writing\n")
    child.send_signal(signal.SIGKILL)
    child.wait(60)
    acked = [json.loads(line) for line in log.read_text().splitlines(keepends=True) if line.endswith("\n")]
    assert len(acked) >= 3
    with member(tmp_home, pg_url, monkeypatch) as svc:
        # The next writer gets the lock (a lock kept by a dead session would block it for good).
        after = svc.remember(
            "Written after the kill: the stork nests.", title="stork", store="global"
        ).fact.id
        for i, fid in acked:
            assert svc.get_fact(fid, store="global").fact.body.startswith(f"Acknowledged fact {i}:")
            assert f"Acknowledged fact {i}: the crane{i}q flies." in texts(svc, f"crane{i}q")
        assert texts(svc, "stork nests") == ["Written after the kill: the stork nests."]
        assert not svc.store_admin.doctor().index_mismatches
        assert after
    with psycopg.connect(pg_url) as conn:
        paths = {r[0] for r in conn.execute("SELECT path FROM coffer_documents WHERE store = 'global'")}
        locks = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone()
    on_disk = {f"knowledge/inbox/{name}" for name in facts_on_disk(tmp_home)}
    assert on_disk <= paths  # every file, the killed writer's too, is in PostgreSQL
    assert locks == (0,)  # nothing holds a store's lock any more


@pytest.mark.timeout(300)
def test_while_the_server_is_down_requests_fail_at_once_and_recover_on_their_own(
    own_server: PgServer, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the server down, every request (each REST or MCP call) waited the pool's 10 s for a
    connection before INDEX_UNAVAILABLE. Now the first finds the server down, the others are told
    at once (no request to the pool), and once the server is back requests succeed again with
    no restart."""
    import time

    from fastapi.testclient import TestClient

    from coffer_memory_fastapi import create_app

    url = own_server.url()
    with member(tmp_home, url, monkeypatch) as svc, TestClient(create_app(svc)) as client:
        svc.remember("the lighthouse keeper logs the tides", store="global")
        assert texts(svc, "lighthouse") == ["the lighthouse keeper logs the tides"]
        _pg_ctl(own_server, "-m", "fast", "stop")
        pool = svc.index._shared.backend.pool  # type: ignore[union-attr]
        with pytest.raises(IndexUnavailable, match="refused"):
            texts(svc, "lighthouse")  # the request that finds the server down: its connection broke
        asked = pool.get_stats().get("requests_num", 0)
        before = facts_on_disk(tmp_home)
        for _ in range(3):
            with pytest.raises(
                IndexUnavailable, match=r"Connection refused.*\(down since .* UTC; asked again"
            ):
                texts(svc, "lighthouse")
            with pytest.raises(IndexUnavailable, match="down since"):
                svc.remember("written while the server is down", store="global")
            answer = client.get("/api/v1/memory_stores/global/recall", params={"query": "lighthouse"})
            assert answer.status_code == 503 and answer.json()["error"]["code"] == "INDEX_UNAVAILABLE"
            assert "down since" in answer.json()["error"]["message"]
        assert pool.get_stats().get("requests_num", 0) == asked  # none of them asked the pool
        assert facts_on_disk(tmp_home) == before
        _pg_ctl(own_server, "start")
        for _ in range(1200):  # a bound on the probe's next round on a loaded machine, not a timing
            try:
                found = texts(svc, "lighthouse")
                break
            except IndexUnavailable as exc:
                assert "down since" in str(exc)  # told at once until the probe finds the server
                time.sleep(0.05)
        assert found == ["the lighthouse keeper logs the tides"]
        svc.remember("the lighthouse keeper also logs the wind", store="global")
        assert sorted(texts(svc, "lighthouse")) == [
            "the lighthouse keeper also logs the wind",
            "the lighthouse keeper logs the tides",
        ]
