"""The audit log is a file under the home: append-only JSON Lines, read newest first, filtered and paged."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from coffer_memory import InvalidCursor, InvalidInput, MemoryService, MemoryStoreNotFound
from coffer_memory._home import HomeLayout
from coffer_memory._store.audit import AuditLog
from coffer_memory._store.when import parse_when

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def _lines(home: Path) -> list[str]:
    out: list[str] = []
    for segment in AuditLog(home).segments():
        out += segment.read_text(encoding="utf-8").splitlines()
    return out


def test_an_event_is_one_json_line_in_a_0600_file(tmp_home: Path) -> None:
    log = AuditLog(tmp_home)
    log.append("memory_added", "global", "01ABC", {"path": "/x.md", "actor": "agent"}, at=T0)
    [segment] = log.segments()
    assert segment.parent == HomeLayout(tmp_home).audit
    assert stat.S_IMODE(segment.stat().st_mode) == 0o600
    assert stat.S_IMODE(segment.parent.stat().st_mode) == 0o700
    [line] = segment.read_text().splitlines()
    assert json.loads(line) == {
        "at": "2026-06-01T12:00:00.000000+00:00",
        "event": "memory_added",
        "store": "global",
        "document_id": "01ABC",
        "details": {"path": "/x.md", "actor": "agent"},
    }
    [event] = log.read()[0]
    assert event.actor == "agent" and event.at == T0


def test_filters_by_store_event_and_half_open_time(tmp_home: Path) -> None:
    log = AuditLog(tmp_home)
    for i, (event, store) in enumerate(
        [
            ("memory_added", "global"),
            ("memory_updated", "global"),
            ("memory_added", "project-x"),
            ("memory_deleted", "global"),
        ]
    ):
        log.append(event, store, None, {"n": i}, at=T0 + timedelta(minutes=i))
    assert [e.details["n"] for e in log.read()[0]] == [3, 2, 1, 0]
    assert [e.details["n"] for e in log.read(store="global")[0]] == [3, 1, 0]
    assert [e.details["n"] for e in log.read(event="memory_added")[0]] == [2, 0]
    window = log.read(since=T0 + timedelta(minutes=1), until=T0 + timedelta(minutes=3))[0]
    assert [e.details["n"] for e in window] == [2, 1]  # since inclusive, until exclusive


def test_time_bounds_accept_iso_dates_and_durations() -> None:
    now = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    assert parse_when("2h", field="since", now=now) == now - timedelta(hours=2)
    assert parse_when("7d", field="since", now=now) == now - timedelta(days=7)
    assert parse_when("2026-05-01", field="since") == datetime(2026, 5, 1, tzinfo=UTC)
    assert parse_when("2026-05-01T10:00:00+02:00", field="since") == datetime(2026, 5, 1, 8, tzinfo=UTC)
    with pytest.raises(InvalidInput) as err:
        parse_when("yesterday", field="until")
    assert err.value.code == "INVALID_INPUT" and "until" in err.value.message


def test_a_torn_last_line_is_skipped_and_the_next_event_starts_clean(tmp_home: Path) -> None:
    log = AuditLog(tmp_home)
    log.append("memory_added", "global", None, {"n": 1}, at=T0)
    [segment] = log.segments()
    with open(segment, "ab") as fh:  # a writer killed mid-line
        fh.write(b'{"at": "2026-06-01T12:00:01+00:00", "event": "memory_ad')
    assert [e.details["n"] for e in log.read()[0]] == [1]
    log.append("memory_deleted", "global", None, {"n": 2}, at=T0 + timedelta(seconds=2))
    assert [e.details["n"] for e in log.read()[0]] == [2, 1]
    assert segment.read_bytes().endswith(b'"memory_ad\n' + segment.read_bytes().splitlines()[-1] + b"\n")


def test_segments_start_when_the_newest_is_full_and_read_as_one_log(tmp_home: Path) -> None:
    log = AuditLog(tmp_home, max_bytes=600)
    for i in range(30):
        log.append("memory_added", "global", None, {"n": i}, at=T0 + timedelta(seconds=i))
    segments = log.segments()
    assert len(segments) > 3 and all(s.stat().st_size <= 600 for s in segments)
    assert [e.details["n"] for e in log.read(limit=100)[0]] == list(range(29, -1, -1))
    # Paging crosses segments and loses nothing.
    seen, before = [], None
    while True:
        events, before = log.read(limit=7, before=before)
        seen += [e.details["n"] for e in events]
        if before is None:
            break
    assert seen == list(range(29, -1, -1))
    # Time bounds skip whole segments and still answer exactly.
    window = log.read(since=T0 + timedelta(seconds=10), until=T0 + timedelta(seconds=20))[0]
    assert [e.details["n"] for e in window] == list(range(19, 9, -1))


APPENDER = """
import sys
from pathlib import Path
from coffer_memory._store.audit import AuditLog
log = AuditLog(Path(sys.argv[1]), max_bytes=int(sys.argv[4]))
for i in range(int(sys.argv[3])):
    # every other event is longer than PIPE_BUF (4096): atomic only because of the lock
    log.append("memory_added", "global", None, {"w": sys.argv[2], "i": i, "pad": "x" * (5000 * (i % 2))})
"""


@pytest.mark.parametrize("max_bytes", [8 * 1024 * 1024, 40_000])
def test_concurrent_processes_never_interleave_lines(tmp_home: Path, max_bytes: int) -> None:
    workers, each = 4, 25
    procs = [
        subprocess.Popen([sys.executable, "-c", APPENDER, str(tmp_home), str(w), str(each), str(max_bytes)])
        for w in range(workers)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * workers
    lines = _lines(tmp_home)
    assert len(lines) == workers * each
    records = [json.loads(line) for line in lines]  # every line whole
    assert [r["at"] for r in records] == sorted(r["at"] for r in records)  # the file is in time order
    for w in range(workers):
        mine = [r["details"]["i"] for r in records if r["details"]["w"] == str(w)]
        assert mine == list(range(each))  # each writer's events in its order
    assert len(AuditLog(tmp_home).read(limit=1000)[0]) == workers * each


def test_every_write_lands_in_the_file_and_survives_losing_index_db(tmp_home: Path) -> None:
    with MemoryService(tmp_home) as svc:
        r = svc.remember("the deploy runs from CI", scope="global")
        svc.edit_fact(r.fact.id, body="the deploy runs from CI, twice", store="global")
        svc.delete_fact(r.fact.id, store="global")
        svc.remember("the release is tagged by make release", scope="global")
        before = svc.audit_events("global")
    assert [e["event"] for e in before] == [
        "memory_added",
        "memory_deleted",
        "memory_updated",
        "memory_added",
    ]
    assert len(_lines(tmp_home)) == 4
    for suffix in ("", "-wal", "-shm"):
        Path(f"{HomeLayout(tmp_home).index_db}{suffix}").unlink(missing_ok=True)
    with MemoryService(tmp_home) as svc:
        assert svc.audit_events("global") == before
        svc.recall("deploy", stores=["global"])  # the rebuilt index adds nothing of its own
        assert svc.audit_events("global") == before


def test_the_service_filters_and_pages_with_signed_cursors(svc: MemoryService) -> None:
    for i in range(5):
        svc.remember(f"fact number {i}", title=f"fact {i}", scope="global")
    first = svc.audit(store="global", event="memory_added", limit=2)
    assert len(first.items) == 2 and first.next_cursor
    second = svc.audit(store="global", event="memory_added", limit=2, cursor=first.next_cursor)
    third = svc.audit(store="global", event="memory_added", limit=2, cursor=second.next_cursor)
    titles = [e.details["path"] for page in (first, second, third) for e in page.items]
    assert len(titles) == len(set(titles)) == 5 and third.next_cursor is None
    # Appending more does not invalidate a position in an append-only log.
    svc.remember("a later fact", scope="global")
    again = svc.audit(store="global", event="memory_added", limit=2, cursor=first.next_cursor)
    assert again.items == second.items
    with pytest.raises(InvalidCursor):
        svc.audit(store="global", event="memory_deleted", limit=2, cursor=first.next_cursor)
    with pytest.raises(InvalidCursor):
        svc.audit(limit=2, cursor=first.next_cursor[:-3] + "AAA")
    with pytest.raises(InvalidInput):
        svc.audit(limit=0)
    with pytest.raises(MemoryStoreNotFound):
        svc.audit(store="globl")
    assert svc.audit(since="1h").items and not svc.audit(until="1h").items
    # A relative bound is resolved on the first page and kept by the cursor.
    recent = svc.audit(since="1h", limit=2)
    assert recent.next_cursor
    assert svc.audit(since="1h", limit=10, cursor=recent.next_cursor).items
    with pytest.raises(InvalidCursor):
        svc.audit(since="2h", limit=10, cursor=recent.next_cursor)


def test_index_db_audit_rows_of_an_older_coffer_move_into_the_log(tmp_home: Path) -> None:
    with MemoryService(tmp_home) as svc:
        svc.remember("new fact", scope="global")
        svc.db.conn.execute(
            "INSERT INTO audit_events (at, event, store, document_id, details) VALUES (?, ?, ?, ?, ?)",
            ("2025-01-02T03:04:05+00:00", "memory_added", "global", "OLD", json.dumps({"path": "/old.md"})),
        )
    with MemoryService(tmp_home) as svc:
        svc.recall("fact", stores=["global"])  # opens the index: the rows move
        events = svc.audit_events("global")
        assert [e["document_id"] for e in events][-1] == "OLD"
        assert events[-1]["at"].startswith("2025-01-02T03:04:05")
        assert svc.db.scalar("SELECT count(*) FROM audit_events") == 0
    with MemoryService(tmp_home) as svc:
        svc.recall("fact", stores=["global"])
        assert [e["document_id"] for e in svc.audit_events("global")].count("OLD") == 1


@pytest.mark.parametrize(
    ("since", "until", "field"),
    [
        ("9999-12-31T23:00:00-14:00", None, "since"),  # an ISO time after the year 9999 in UTC
        ("0001-01-01T00:00:00+01:00", None, "since"),
        ("800000d", None, "since"),  # further back than the calendar goes
        (None, "99999999999d", "until"),
        ("2026-02-01", "2026-01-01", "until"),  # empty window: said, as recall and list_facts say it
        ("1h", "2h", "until"),
    ],
)
def test_time_bounds_out_of_range_or_reversed_are_invalid_input_on_every_face(
    client,
    cli,
    service: MemoryService,
    since: str | None,
    until: str | None,
    field: str,  # type: ignore[no-untyped-def]
) -> None:
    service.remember("one fact", scope="global")
    given = {k: v for k, v in (("since", since), ("until", until)) if v is not None}
    with pytest.raises(InvalidInput) as err:
        service.audit(**given)
    assert err.value.field == field
    answer = client.get("/api/v1/audit", params=given)
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "INVALID_INPUT"
    ran = cli("audit", *[a for k, v in given.items() for a in (f"--{k}", v)])
    assert ran.returncode != 0 and "INVALID_INPUT" in ran.stderr and "unexpected" not in ran.stderr


def test_rest_reads_the_log_with_the_same_filters(client, service: MemoryService) -> None:  # type: ignore[no-untyped-def]
    for i in range(3):
        service.remember(f"fact number {i}", title=f"fact {i}", scope="global")
    service.delete_fact(service.list_facts(store="global", limit=1).items[0].fact.id, store="global")
    body = client.get("/api/v1/audit", params={"store": "global", "event": "memory_added", "limit": 2}).json()
    assert [e["event"] for e in body["items"]] == ["memory_added"] * 2 and body["next_cursor"]
    assert body["items"][0]["actor"] == "agent" and body["items"][0]["store"] == "global"
    rest = client.get(
        "/api/v1/audit",
        params={"store": "global", "event": "memory_added", "limit": 2, "cursor": body["next_cursor"]},
    ).json()
    assert len(rest["items"]) == 1 and rest["next_cursor"] is None
    newest = client.get("/api/v1/audit", params={"since": "1h"}).json()["items"][0]
    assert newest["event"] == "memory_deleted"
    assert client.get("/api/v1/audit", params={"until": "2000-01-01"}).json()["items"] == []
    bad = client.get("/api/v1/audit", params={"since": "last tuesday"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "INVALID_INPUT"
    assert (
        client.get("/api/v1/audit", params={"store": "nope"}).json()["error"]["code"]
        == "MEMORY_STORE_NOT_FOUND"
    )
    other = client.get("/api/v1/audit", params={"limit": 2, "cursor": body["next_cursor"]})
    assert other.json()["error"]["code"] == "INVALID_CURSOR"


def test_an_unknown_event_name_is_refused_with_the_valid_ones(svc: MemoryService, tmp_path: Path) -> None:
    """``coffer audit --event memory_add`` printed "(no events)", as if nothing had been added
    (new-user pass, session 11). An older coffer's name the log holds is still read."""
    from coffer_memory._store.audit import EVENTS

    svc.remember("a fact", scope="global")
    with pytest.raises(InvalidInput) as err:
        svc.audit(event="memory_add")
    assert err.value.field == "event" and err.value.details["events"] == list(EVENTS)
    assert "unknown event 'memory_add'; the events are: memory_added, memory_updated" in err.value.message
    assert svc.audit(event="memory_added").items
    assert svc.audit(event="store_merged").items == ()  # a real name with no events yet is no error
    AuditLog(svc.settings.home).append("memory_legacy_event", "global", None, {}, at=T0)
    assert [e.event for e in svc.audit(event="memory_legacy_event").items] == ["memory_legacy_event"]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "coffer_memory",
            "--home",
            str(svc.settings.home),
            "audit",
            "--event",
            "memory_add",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("error: INVALID_INPUT: unknown event 'memory_add'; the events are: ")
    assert proc.stderr.count("\n") == 1


def test_every_event_the_code_records_is_in_the_list() -> None:
    """The list the refusal names is the code's: every literal event name passed to an audit call."""
    import re

    from coffer_memory._store.audit import EVENTS

    root = Path(__file__).parent.parent / "coffer_memory"
    source = "\n".join(p.read_text() for p in root.rglob("*.py"))
    named = set(re.findall(r"\"((?:memory|store|agent)_[a-z_]+)\"", source))
    written = {n for n in named if re.search(rf"(audit|_retire|external)[^\n]*\n?[^\n]*\"{n}\"", source)}
    written |= {
        f"agent_native_memory_{x}" for x in ("disabled", "restored")
    }  # f"agent_native_memory_{event}"
    assert written <= set(EVENTS), written - set(EVENTS)
    assert {"memory_added", "store_deleted", "agent_hook_installed", "store_merged"} <= written
    docs = (root.parent / "docs" / "concepts.md").read_text()
    assert all(f"`{e}`" in docs for e in EVENTS), [e for e in EVENTS if f"`{e}`" not in docs]


def test_the_audit_of_every_store_reads_beside_a_busy_writer_connection(tmp_home: Path) -> None:
    """``audit()`` without a store lists the stores the index knows. It asked the writer
    connection without the lock: while a write on another thread was inside a statement there it
    raised apsw's ThreadingViolationError, a REST 500 that the schemathesis run met. Here a
    thread holds the lock, as a write does, and stays inside a statement on the writer
    connection for two seconds: the audit answers once the write is done."""
    import threading

    with MemoryService(tmp_home) as svc:
        svc.remember("the deploy window is Tuesday", scope="global")
        conn = svc.index.db.conn
        inside = threading.Event()

        def hold() -> int:
            inside.set()
            threading.Event().wait(2)
            return 1

        def write() -> None:
            with svc.index.lock:
                conn.execute("SELECT hold_writer()").fetchall()

        conn.create_scalar_function("hold_writer", hold, 0)
        busy = threading.Thread(target=write)
        busy.start()
        try:
            assert inside.wait(10)
            page = svc.audit()
        finally:
            busy.join(30)
        assert [e.event for e in page.items][-1] == "memory_added"
