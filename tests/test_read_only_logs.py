"""A home this process may read, not write, gets nothing written even where its ``logs/`` was left
writable: the ``coffer`` CLI's log of an unexpected error, and psycopg_pool's lines about a
PostgreSQL server it cannot reach, went on being appended to the home's ``logs/errors.log`` (made
there when it was not). They go to ``coffer-errors-<uid>.log`` in the temporary folder now, as the
private index does. Real homes made by another user than root (root writes any file), every step
in a subprocess as that user; a real plugin (a shared index backend whose search has a bug) and
a real PostgreSQL server, stopped."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import failing_backend
import psycopg
import pytest
from pg_server import PgServer
from test_fault_sweep import _SEED_CHILD, ROOT, _as_another_user
from test_pg_faults import _pg_ctl, own_server  # noqa: F401 (the fixture)
from test_read_only_home import _entries

RECALL = [sys.executable, "-m", "coffer_memory", "recall", "kiln", "--mode", "keyword"]


@contextmanager
def _read_only_home(
    tmp_path: Path, config: str, extra: dict[str, str] | None = None, site: str = ""
) -> Iterator[tuple[Path, Path, Callable[..., Any], list[str]]]:
    """A home with one fact, made by another user than root with ``config`` as its config.toml,
    then made read-only but for its ``logs/`` (made writable); the folder for anything else, the
    call that runs a child as that user (in the environment ``extra`` adds to), and its prefix.
    ``site``: the failing plugin is installed in the folder's ``site`` first."""
    base, who = _as_another_user(tmp_path)
    try:
        home = base / "home"
        if site:
            extra = {"PYTHONPATH": failing_backend.install(base / site, base / "unused")["PYTHONPATH"]}
        home.mkdir()
        (home / "config.toml").write_text(config)
        if who:
            os.chown(home, 65534, 65534)
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "HOME": str(base),
            "TMPDIR": str(base),
            "COFFER_HOME": str(home),
            **(extra or {}),
        }
        run = functools.partial(subprocess.run, capture_output=True, text=True, env=env, timeout=180)
        made = run([*who, sys.executable, "-c", _SEED_CHILD, str(home)])
        assert made.returncode == 0, made.stderr[-2000:]
        (home / "logs").mkdir(exist_ok=True)
        if who:
            os.chown(home / "logs", 65534, 65534)
        for folder, _, _ in os.walk(home):
            os.chmod(folder, 0o755 if Path(folder).name == "logs" else 0o555)
        yield home, base, run, who
    finally:
        for folder, _, _ in os.walk(base):
            os.chmod(folder, 0o755)
        if who:
            shutil.rmtree(base)


def _says_read_only_and_writes_nothing(home: Path, before: list[tuple[str, int, int]], stderr: str) -> None:
    assert "not writable by this process" in stderr, stderr
    assert "Traceback" not in stderr, stderr
    after = _entries(home)
    assert after == before, (sorted(set(after) - set(before)), sorted(set(before) - set(after)))


def test_an_unexpected_cli_error_in_a_read_only_home_is_logged_outside_it(tmp_path: Path) -> None:
    config = '[index]\nbackend = "failing-index"\n'
    with _read_only_home(tmp_path, config, site="site") as (home, folder, run, who):
        before = _entries(home)
        proc = run([*who, *RECALL])
        assert proc.returncode == 1 and "unexpected RuntimeError" in proc.stderr, proc.stdout + proc.stderr
        _says_read_only_and_writes_nothing(home, before, proc.stderr)
        log_path = Path(proc.stderr.strip().splitlines()[-1].rsplit("see ", 1)[1].rstrip(")"))
        assert log_path.parent == folder and "RuntimeError" in log_path.read_text()


def _trying_the_lock(url: str) -> bool:
    """Whether another session's last statement is coffer's try for a store's advisory lock."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
            "AND query LIKE 'SELECT pg_try_advisory_lock%'"
        ).fetchone()
    return bool(row and row[0])


@pytest.mark.timeout(300)
def test_pool_lines_about_a_server_stopped_under_a_call_in_a_read_only_home_are_logged_outside_it(
    own_server: PgServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A recall whose reconcile waits for the store's write lock (a fact added by the home's
    owner, the lock held by another member) while the server stops: the pool's lines about the
    connections it lost went to the read-only home's writable ``logs/``."""
    url = own_server.url()
    config = '[index]\nbackend = "postgresql"\n'
    with _read_only_home(tmp_path, config, {"COFFER_PG_URL": url}) as (home, folder, run, who):
        inbox = home / "memory" / "global" / "knowledge" / "inbox"
        os.chmod(inbox, 0o755)
        (inbox / "weir.md").write_text("---\ntitle: weir\n---\nThe weir floods in spring.\n")
        os.chmod(inbox, 0o555)
        before = _entries(home)
        holder = psycopg.connect(url, autocommit=True)
        holder.execute("SELECT pg_advisory_lock(hashtextextended('coffer-store:' || 'global', 0))")
        cli = subprocess.Popen(
            [*who, *RECALL],
            env=run.keywords["env"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            for _ in range(2400):  # a bound on a loaded machine, not a timing
                if cli.poll() is not None or _trying_the_lock(url):
                    break
                time.sleep(0.05)
            assert cli.poll() is None, cli.communicate()
            _pg_ctl(own_server, "-m", "fast", "stop")
        finally:
            holder.close()
        out, err = cli.communicate(timeout=120)
        assert "INDEX_UNAVAILABLE" in err, out + err
        _says_read_only_and_writes_nothing(home, before, err)
        assert "psycopg" not in err and "discarding" not in err, err
        kept = folder / f"coffer-errors-{65534 if who else os.getuid()}.log"
        assert "psycopg.pool" in kept.read_text()


@pytest.mark.parametrize("planted", ["link", "foreign file"])
def test_the_temporary_errors_log_is_never_a_link_nor_another_users_file(
    tmp_path: Path, planted: str
) -> None:
    """``coffer-errors-<uid>.log`` is in a folder every user may write: a link planted there
    (or, for a child that is not root, a file another user made first) received the traceback,
    which names what was asked. Nothing is appended then, and the CLI's line says so."""
    config = '[index]\nbackend = "failing-index"\n'
    with _read_only_home(tmp_path, config, site="site") as (_home, folder, run, who):
        if planted == "foreign file" and not who:
            pytest.skip("a file of another user's needs root to make")
        kept = folder / f"coffer-errors-{65534 if who else os.getuid()}.log"
        target = folder / "planted.txt"
        target.write_text("mine\n")
        target.chmod(0o666)
        if planted == "link":
            kept.symlink_to(target)
        else:
            kept.write_text("mine\n")
            kept.chmod(0o666)  # root's file, open to the child: only its owner stops the append
        proc = run([*who, *RECALL])
        assert proc.returncode == 1 and "unexpected RuntimeError" in proc.stderr, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        assert target.read_text() == "mine\n"
        assert kept.is_symlink() or kept.read_text() == "mine\n"
        assert "(no log kept: " in proc.stderr.strip().splitlines()[-1], proc.stderr
