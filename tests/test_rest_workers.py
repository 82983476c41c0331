"""``coffer-api --workers N``: several server processes over one home, and the operation state
they share (a poll may reach another worker than the one that started the operation)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from served import Served

from coffer_memory import MemoryService
from coffer_memory_fastapi import operations
from coffer_memory_fastapi.balance import WAIT_ENV
from coffer_memory_fastapi.cli import listening_socket, main
from coffer_memory_fastapi.operations import OperationNotFound, Operations
from coffer_memory_fastapi.schemas import OperationOut

STUCK = 60.0  # a bound on a loaded machine, not an assertion about speed
TOKEN = "worker-test-token"


def finished(ops: Operations, op_id: str) -> OperationOut:
    """Poll ``ops`` until the operation has finished."""
    deadline = time.monotonic() + STUCK
    while time.monotonic() < deadline:
        op = ops.get(op_id)
        if op.status in ("succeeded", "failed"):
            return op
        time.sleep(0.01)
    raise AssertionError(f"operation {op_id} did not finish")


def test_an_operation_started_by_one_worker_is_answered_by_another(tmp_path: Path) -> None:
    first, second = Operations(tmp_path), Operations(tmp_path)
    try:
        op = first.start("reindex", "global", lambda: [])
        assert finished(first, op.id).status == "succeeded"
        seen = second.get(op.id)
        assert seen.status == "succeeded" and seen.reindex == [] and seen.kind == "reindex"
        mine = second.start("reindex", "global", lambda: [])
        finished(second, mine.id)
        assert [o.id for o in first.list()] == [mine.id, op.id]  # both workers', newest first
    finally:
        first.close()
        second.close()


def test_without_a_shared_folder_state_stays_in_the_process(tmp_path: Path) -> None:
    ops = Operations()
    try:
        op = ops.start("reindex", "global", lambda: [])
        finished(ops, op.id)
        assert list(tmp_path.iterdir()) == []
        with pytest.raises(OperationNotFound):
            Operations(tmp_path).get(op.id)
    finally:
        ops.close()


def test_an_operation_id_never_names_a_file_outside_the_folder(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (tmp_path / "secret.json").write_text("{}")
    (shared / "not-an-id.json").write_text("{}")
    ops = Operations(shared)
    try:
        for bad in ("../secret", "not-an-id", "01J9Z8K3M4N5P6Q7R8S9T0V1W2/../../secret"):
            with pytest.raises(OperationNotFound):
                ops.get(bad)
        assert ops.list() == []
    finally:
        ops.close()


def test_forgotten_operations_leave_the_shared_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operations, "KEEP", 2)
    ops = Operations(tmp_path)
    try:
        ids = [ops.start("reindex", "global", lambda: []).id for _ in range(4)]
        for op_id in ids[2:]:
            finished(ops, op_id)
        assert sorted(p.stem for p in tmp_path.glob("*.json")) == sorted(ids[2:])
    finally:
        ops.close()


WORKER = """
import sys, time
from pathlib import Path
from coffer_memory_fastapi.operations import Operations
ops = Operations(Path(sys.argv[1]))
op = ops.start("reindex", "global", lambda: time.sleep(600) or [])
while ops.get(op.id).status != "running":
    time.sleep(0.01)
print(op.id, flush=True)
time.sleep(600)
"""


def test_an_operation_of_a_killed_worker_is_reported_failed_by_the_others(tmp_path: Path) -> None:
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    ops = Operations(tmp_path)
    try:
        assert worker.stdout is not None
        op_id = worker.stdout.readline().strip()
        assert ops.get(op_id).status == "running"  # its worker is alive: still running
        worker.kill()
        worker.wait(timeout=STUCK)
        seen = ops.get(op_id)
        assert seen.status == "failed" and seen.finished_at is not None and seen.error is not None
        assert (seen.error.code, seen.error.details) == ("INTERNAL", {"reason": "worker_stopped"})
        assert ops.get(op_id) == seen  # the same answer on every poll
        assert [(o.id, o.status) for o in ops.list()] == [(op_id, "failed")]
    finally:
        worker.kill()
        worker.wait(timeout=STUCK)
        ops.close()


def test_workers_must_be_at_least_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--workers", "0"])
    assert exited.value.code == 2
    assert "--workers must be at least 1" in capsys.readouterr().err


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="accepted sockets inherit TCP_NODELAY on Linux"
)
def test_worker_connections_are_sent_without_nagle_delay() -> None:
    """Connections accepted from the workers' shared socket carry TCP_NODELAY (asyncio skipped
    them: uvicorn's socket has protocol 0), so a two-part response does not wait ~40 ms for an ACK."""
    import uvicorn

    config = uvicorn.Config("coffer_memory_fastapi.cli:worker_app", factory=True, port=0, workers=2)
    with listening_socket(config) as sock:
        sock.listen()
        with socket.create_connection(sock.getsockname()[:2]):
            accepted, _ = sock.accept()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


@pytest.fixture
def two_workers(tmp_home: Path) -> Iterator[tuple[str, int]]:
    """``coffer-api --workers 2 --token ...`` in a subprocess over a home with one fact."""
    with serving_workers(tmp_home) as served:
        yield served


@contextlib.contextmanager
def serving_workers(tmp_home: Path, *more: str, workers: int = 2) -> Iterator[tuple[str, int]]:
    """``coffer-api --workers N --token ... *more`` over a home with one fact: its URL and pid."""
    with MemoryService(tmp_home) as svc:
        svc.remember("the deploy runs from the release branch", store="global")
    exe = Path(sys.executable).parent / "coffer-api"
    args = [str(exe), "--workers", str(workers), "--token", TOKEN, "--log-level", "warning", *more]
    temp = tmp_home.parent / "tmp"  # where the run's operations folder goes
    temp.mkdir()
    env = {**os.environ, "COFFER_HOME": str(tmp_home), "TMPDIR": str(temp)}
    with Served(args, env) as server:
        # Listening already; the request waits in the backlog until a worker serves.
        httpx.get(f"{server.base}/api/v1/memory_stores", timeout=STUCK)
        yield server.base, server.proc.pid


def test_two_workers_serve_one_home_and_share_operations(two_workers: tuple[str, int]) -> None:
    base, pid = two_workers
    auth = {"Authorization": f"Bearer {TOKEN}"}
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():  # Linux: two worker processes (beside multiprocessing's resource tracker)
        cmdlines = [Path(f"/proc/{child}/cmdline").read_bytes() for child in children.read_text().split()]
        assert sum(b"spawn_main" in c for c in cmdlines) == 2
    assert httpx.get(f"{base}/api/v1/memory_stores").status_code == 401  # every worker got the token
    for _ in range(6):  # and the Host and Origin rules (a new connection each: either worker answers)
        foreign = httpx.get(f"{base}/api/v1/memory_stores", headers={**auth, "Host": "evil.example"})
        assert foreign.status_code == 421
        cross = httpx.post(
            f"{base}/api/v1/memory_stores/global/facts",
            headers={**auth, "Origin": "http://evil.example"},
            json={"text": "planted"},
        )
        assert cross.status_code == 403
    # A new connection per request: the kernel hands each to either worker.
    for _ in range(10):
        r = httpx.get(
            f"{base}/api/v1/memory_stores/recall", params={"query": "deploy", "store": "global"}, headers=auth
        )
        assert r.status_code == 200 and r.json()["hits"][0]["text"].startswith("the deploy")
    started = httpx.post(
        f"{base}/api/v1/memory_stores/global/reindex", headers={**auth, "Content-Type": "application/json"}
    )
    assert started.status_code == 202
    op_id = started.json()["id"]
    statuses = set()
    for _ in range(20):
        r = httpx.get(f"{base}/api/v1/operations/{op_id}", headers=auth)
        assert r.status_code == 200, r.text
        statuses.add(r.json()["status"])
        assert op_id in [
            o["id"] for o in httpx.get(f"{base}/api/v1/operations", headers=auth).json()["items"]
        ]
    assert statuses <= {"queued", "running", "succeeded"}


def test_connections_made_together_are_shared_out_between_the_workers(
    tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # asyncio's loop accepted every queued connection in one turn: four clients connecting at once
    # mostly all went to one worker (4:0 or 3:1 in 18 of 20 tries, docs/benchmarks.md).
    # A worker leaves a connection to a sibling for 0.2 s, then takes it: on a machine at load 15
    # the sibling was not always scheduled within it (3:1). Here it waits for as long as it takes.
    monkeypatch.setenv(WAIT_ENV, str(STUCK))
    with serving_workers(tmp_home) as (base, _):
        host, port = base.removeprefix("http://").split(":")
        request = (
            f"GET /api/v1/memory_stores HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {TOKEN}\r\n\r\n"
        ).encode()
        # Each worker's open connections, as it publishes them for the others. The server answers
        # once one worker does: wait until the second one serves too (a loaded machine is slow).
        deadline = time.monotonic() + STUCK
        while (
            len(published := list((tmp_home.parent / "tmp").glob("coffer-api-operations-*/connections/*")))
            < 2
        ):
            assert time.monotonic() < deadline, "the second worker did not start"
            time.sleep(0.05)
        clients = [socket.create_connection((host, int(port)), timeout=STUCK) for _ in range(4)]
        try:
            for client in clients:
                client.sendall(request)
            for client in clients:
                assert client.recv(65536).startswith(b"HTTP/1.1 200")
            counts = sorted(int(p.read_bytes()) for p in published)
            assert counts == [2, 2]
        finally:
            for client in clients:
                client.close()


def _running(pid: str) -> bool:
    """True while process ``pid`` runs (an exited orphan may stay a zombie where init never reaps)."""
    with contextlib.suppress(FileNotFoundError):
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="the workers are found through /proc")
def test_workers_stop_and_leave_nothing_when_their_supervisor_is_killed(
    two_workers: tuple[str, int], tmp_home: Path
) -> None:
    base, pid = two_workers
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    workers = [c for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]
    assert len(workers) == 2 and len(list((tmp_home.parent / "tmp").iterdir())) == 1
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + STUCK
    while time.monotonic() < deadline and any(_running(w) for w in workers):
        time.sleep(0.1)
    assert not any(_running(w) for w in workers), "orphaned workers still serve the port"
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{base}/api/v1/memory_stores", timeout=2)
    assert list((tmp_home.parent / "tmp").iterdir()) == []  # the operations folder went with them


# -- --pin-workers -------------------------------------------------------------------------------
def _cpus_of(pid: str) -> set[str]:
    """The CPU lists every thread of a process may run on (``/proc``)."""
    return {
        line.split(":", 1)[1].strip()
        for status in Path(f"/proc/{pid}/task").glob("*/status")
        for line in status.read_text().splitlines()
        if line.startswith("Cpus_allowed_list:")
    }


def test_pin_workers_needs_several_workers(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--pin-workers"])
    assert exited.value.code == 2
    assert "--pin-workers needs --workers 2 or more" in capsys.readouterr().err


LINUX_CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or LINUX_CPUS < 2, reason="pinning takes Linux and 2 CPUs"
)
def test_pinned_workers_each_keep_every_thread_on_a_cpu_of_its_own(tmp_home: Path) -> None:
    with serving_workers(tmp_home, "--pin-workers") as (base, pid):
        auth = {"Authorization": f"Bearer {TOKEN}"}
        for _ in range(6):  # both workers answer, their thread pools started
            r = httpx.get(
                f"{base}/api/v1/memory_stores/recall",
                params={"query": "deploy", "store": "global"},
                headers=auth,
            )
            assert r.status_code == 200 and r.json()["hits"]
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        workers = [c for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]
        # A worker pins itself when it loads the app; the kernel may have given all six requests
        # to the other one while it was still importing, so wait for both to have loaded it.
        deadline = time.monotonic() + 60
        while True:
            pinned = [_cpus_of(w) for w in workers]
            if all(len(cpus) == 1 and "-" not in next(iter(cpus)) for cpus in pinned):
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert len(workers) == 2
    assert all(len(cpus) == 1 and "-" not in next(iter(cpus)) for cpus in pinned), pinned
    assert pinned[0] != pinned[1]


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or LINUX_CPUS < 2, reason="pinning takes Linux and 2 CPUs"
)
def test_a_cpu_is_claimed_once_and_freed_with_its_process() -> None:
    script = (
        "import os, sys\n"
        "from coffer_memory_fastapi.cpus import pin_to_one_cpu\n"
        f"cpu = pin_to_one_cpu('test-{os.getpid()}')\n"
        "print(cpu, sorted(os.sched_getaffinity(0)), flush=True)\n"
        "sys.stdin.read()\n"  # holds its claim until told to go
    )

    def claimant() -> tuple[subprocess.Popen[str], str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        return proc, proc.stdout.readline().strip()

    cpus = sorted(os.sched_getaffinity(0))
    first, said = claimant()
    assert said == f"{cpus[0]} [{cpus[0]}]"
    second, said = claimant()
    assert said == f"{cpus[1]} [{cpus[1]}]"  # the first one's CPU is taken
    first.communicate("")
    third, said = claimant()
    assert said == f"{cpus[0]} [{cpus[0]}]"  # freed when its process ended
    for proc in (second, third):
        proc.communicate("")


def _workers_of(pid: int) -> list[str]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [c for c in children if _running(c) and b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="the workers are found through /proc")
def test_a_worker_killed_mid_request_loses_no_acknowledged_write_and_is_replaced(
    two_workers: tuple[str, int], tmp_home: Path
) -> None:
    """Four clients write facts (a new connection each) while one worker is SIGKILLed: the
    requests it had in hand fail on the client's side (never reported done), the other worker
    keeps answering, the supervisor starts a new worker, and every fact a 201 acknowledged is
    there, by id and in recall, with the index agreeing with the files."""
    import threading

    base, pid = two_workers
    auth = {"Authorization": f"Bearer {TOKEN}"}
    acked: list[tuple[str, str]] = []
    failed: list[str] = []
    stop = threading.Event()
    guard = threading.Lock()

    def client(n: int) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            token = f"heron{n}x{i}q"
            try:
                r = httpx.post(
                    f"{base}/api/v1/memory_stores/global/facts",
                    headers=auth,
                    json={"text": f"The {token} wades at dawn.", "title": token},
                    timeout=STUCK,
                )
            except httpx.TransportError as exc:  # its worker was killed under it: not acknowledged
                with guard:
                    failed.append(type(exc).__name__)
                continue
            with guard:
                if r.status_code == 201:
                    acked.append((r.json()["fact"]["id"], token))
                else:
                    failed.append(f"{r.status_code} {r.text[:200]}")

    first = _workers_of(pid)
    assert len(first) == 2
    threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + STUCK
    while len(acked) < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(int(first[0]), signal.SIGKILL)
    before_kill = len(acked)
    while len(acked) < before_kill + 20 and time.monotonic() < deadline:  # the survivor answers
        time.sleep(0.01)
    stop.set()
    for t in threads:
        t.join(STUCK)
    assert len(acked) >= before_kill + 20
    assert all(not f[:3].isdigit() for f in failed), failed  # no 5xx: only connections cut
    while time.monotonic() < deadline and len(_workers_of(pid)) < 2:  # the supervisor replaces it
        time.sleep(0.1)
    now = _workers_of(pid)
    assert len(now) == 2 and first[0] not in now
    for fid, token in acked:
        r = httpx.get(f"{base}/api/v1/memory_stores/global/facts/{fid}", headers=auth, timeout=STUCK)
        assert r.status_code == 200 and token in r.json()["text"], (fid, r.text[:200])
    with MemoryService(tmp_home) as svc:
        for fid, token in acked[:: max(1, len(acked) // 15)]:
            assert [h.id for h in svc.recall(token, stores=["global"], mode="keyword").hits] == [fid]
        report = svc.doctor()
        assert not report.index_mismatches and not report.broken


def test_unpinned_workers_each_run_their_share_of_the_cpus_keyword_recalls(
    tmp_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--workers N`` without ``--pin-workers``: each worker runs at most its share of the CPUs'
    keyword recalls at once (``cpus // N``, at least 1). Each bounded them by every CPU, so two
    workers on two CPUs ran up to four recalls at once, two to a GIL, their threads spread over
    both CPUs (docs/benchmarks.md, "rest25"). A pinned worker's facade counts its one CPU itself."""
    from coffer_memory._aio import usable_cpus
    from coffer_memory_fastapi import balance, cli

    MemoryService(tmp_home).close()
    monkeypatch.setenv("COFFER_HOME", str(tmp_home))
    monkeypatch.setattr(balance, "current", None)  # what install() sets, put back after the test

    def facade_bound(pin: bool) -> int | None:
        ops = tmp_path / f"ops-{pin}"
        ops.mkdir()
        spec = cli.worker_spec(2, None, [], [[], []], str(ops), pin=pin)
        spec["pin"] = False  # this test process stays unpinned; the bound is what is looked at
        monkeypatch.setenv(cli.WORKER_ENV, json.dumps({**spec, "supervisor": os.getppid()}))

        async def main() -> int | None:
            app = cli.worker_app()
            try:
                bound: int | None = app.state.async_service.max_recalls
                return bound
            finally:
                app.state.service.close()
                assert balance.current is not None
                balance.current.close()

        return asyncio.run(main())

    assert facade_bound(pin=False) == max(1, usable_cpus() // 2)
    assert facade_bound(pin=True) is None  # one CPU: the facade's own default


def _loaded_workers(pid: int, temp: Path, count: int) -> list[str]:
    """The worker processes of the server ``pid`` once ``count`` of them have built their app (a
    worker pins itself, if it does, before that; then it publishes its connection tally in the
    run's operations folder under ``temp``)."""
    deadline = time.monotonic() + STUCK
    while True:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        workers = [c for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]
        tallies = {p.name for p in temp.glob("coffer-api-operations-*/connections/*")}
        if len(workers) == count and set(workers) <= tallies:
            return workers
        assert time.monotonic() < deadline, (workers, tallies)
        time.sleep(0.1)


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or not 2 <= LINUX_CPUS <= 8, reason="pinning takes Linux and 2 CPUs"
)
def test_as_many_workers_as_cpus_are_pinned_unless_told_not_to(tmp_home: Path) -> None:
    """``--workers N`` with N the CPUs the server may use pins each worker on a CPU of its own, as
    ``--pin-workers`` does: two unpinned workers on two CPUs spread each one's threads over both and
    met issue #15's REST target in fewer rounds (docs/benchmarks.md, "rest25"). ``--no-pin-workers``
    leaves them to the scheduler; fewer workers than CPUs are not pinned (the CPUs left over are
    where the scheduler moves other work)."""
    temp = tmp_home.parent / "tmp"
    with serving_workers(tmp_home, workers=LINUX_CPUS) as (_, pid):
        pinned = [_cpus_of(w) for w in _loaded_workers(pid, temp, LINUX_CPUS)]
    assert all(
        len(cpus) == 1 and "-" not in next(iter(cpus)) and "," not in next(iter(cpus)) for cpus in pinned
    )
    assert len({next(iter(cpus)) for cpus in pinned}) == LINUX_CPUS, pinned

    everything = _cpus_of(str(os.getpid()))
    shutil.rmtree(temp)
    with serving_workers(tmp_home, "--no-pin-workers", workers=LINUX_CPUS) as (_, pid):
        free = [_cpus_of(w) for w in _loaded_workers(pid, temp, LINUX_CPUS)]
    assert free == [everything] * LINUX_CPUS


def test_no_pin_workers_is_fine_with_one_worker() -> None:
    from coffer_memory_fastapi.cli import build_parser, pins_by_default

    assert build_parser().parse_args(["--no-pin-workers"]).pin_workers is False
    assert build_parser().parse_args([]).pin_workers is None
    assert pins_by_default(2, cpus=2) == sys.platform.startswith("linux")
    assert (
        not pins_by_default(2, cpus=4) and not pins_by_default(3, cpus=2) and not pins_by_default(1, cpus=1)
    )
