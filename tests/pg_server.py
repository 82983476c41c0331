"""A real, throwaway PostgreSQL server for the tests (Debian's ``postgresql`` package, or any
``initdb``/``pg_ctl`` on PATH), or the one ``COFFER_TEST_PG_URL`` names.

PostgreSQL refuses to run as root, so as root the server runs as the ``postgres`` user (the
package creates it) through ``runuser``. Data goes to a temp folder, fsync is off, and it
listens on 127.0.0.1 only, on a free port.
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


def _bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """A server started with initdb + pg_ctl; ``url(db)`` connects as the superuser ``coffer``."""

    def __init__(self) -> None:
        initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
        if initdb is None or pg_ctl is None:
            raise PgUnavailable("initdb/pg_ctl not found (apt-get install postgresql)")
        self.pg_ctl = pg_ctl
        self.root = Path(tempfile.mkdtemp(prefix="coffer-pg-"))
        self.prefix: list[str] = []
        if os.geteuid() == 0:
            if shutil.which("runuser") is None:
                raise PgUnavailable("running as root and runuser is missing")
            try:
                shutil.chown(self.root, user="postgres")
            except (LookupError, OSError) as exc:
                raise PgUnavailable(f"running as root and there is no postgres user: {exc}") from exc
            self.prefix = ["runuser", "-u", "postgres", "--"]
        self.data = self.root / "data"
        self.port = _free_port()
        self._run(
            initdb,
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "coffer",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "-N",
        )
        options = f"-k {self.root} -h 127.0.0.1 -p {self.port} -c fsync=off -c full_page_writes=off -c max_connections=200"
        self._run(
            pg_ctl,
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
        return f"postgresql://coffer@127.0.0.1:{self.port}/{database}"

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
