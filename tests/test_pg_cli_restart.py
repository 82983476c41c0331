"""The PostgreSQL server restarted under a running ``coffer`` call: the CLI printed psycopg_pool's
own log lines ("discarding closed connection: ...", the connection's repr) on stderr beside
coffer's typed message, since nothing in the CLI handled the driver's logger and Python's
last-resort handler printed its warnings. Only coffer's lines reach stderr now; the pool's go to
the home's ``logs/errors.log``. A real server (its own, restarted, or stopped: the pool's
"error connecting in 'pool-1': ..." too), ``coffer`` in a subprocess held at the audit lock, with a
connection of the pool in use, while the server goes (``/proc/locks`` says when it waits)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pg_server import PgServer
from test_pg_faults import _pg_ctl, member, own_server  # noqa: F401 (the fixture)


def _waits_on_a_lock(pid: int) -> bool:
    return any(" -> " in line and f" {pid} " in line for line in Path("/proc/locks").read_text().splitlines())


@pytest.mark.timeout(300)
@pytest.mark.parametrize("how", ["restart", "stop"])
def test_a_restart_under_a_running_cli_call_prints_only_coffers_lines(
    own_server: PgServer,  # noqa: F811
    tmp_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    url = own_server.url()
    with member(tmp_home, url, monkeypatch) as svc:
        svc.remember("the weir floods in spring", store="global")
    env = {**os.environ, "COFFER_HOME": str(tmp_home), "COFFER_PG_URL": url}
    (tmp_home / "config.toml").write_text('[index]\nbackend = "postgresql"\n')
    lock = os.open(tmp_home / "locks" / "audit.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        cli = subprocess.Popen(
            [sys.executable, "-m", "coffer_memory", "remember", "the weir was dredged", "--store", "global"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2400):  # a bound on a loaded machine, not a timing
            if _waits_on_a_lock(cli.pid) or cli.poll() is not None:
                break
            time.sleep(0.05)
        assert cli.poll() is None, cli.communicate()
        _pg_ctl(own_server, "-m", "fast", how)
    finally:
        os.close(lock)
    out, err = cli.communicate(timeout=120)
    # The write is durable and said so (its index push is retried or left pending, as the
    # server's answer allows); stderr holds at most coffer's one line of its own.
    assert cli.returncode == 0 and "remembered" in out, out + err
    assert "discarding" not in err and "error connecting" not in err and "psycopg" not in err, err
    assert len(err.strip().splitlines()) <= 1, err
    assert "discarding closed connection" in (tmp_home / "logs" / "errors.log").read_text()
