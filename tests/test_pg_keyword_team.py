"""A team on PostgreSQL as docs/team.md sets it up, with keyword recall only (the default): what
each member's ``coffer`` prints, run as a real process on a real server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_pg_vectors import _plain_role_database

pytest.importorskip(
    "psycopg", reason="PostgreSQL tests need psycopg: pip install 'coffer-memory[postgresql]'"
)

COFFER = str(Path(sys.executable).parent / "coffer")


def coffer(home: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COFFER_HOME": str(home), "COFFER_PG_URL": url, "COFFER_INDEX_BACKEND": "postgresql"}
    return subprocess.run([COFFER, *args], capture_output=True, text=True, env=env, timeout=120, check=False)


def test_a_keyword_only_team_without_pgvector_is_not_warned_on_every_command(
    pg_admin_url: str, tmp_path: Path
) -> None:
    """Every command of every member printed "vector is not available (permission denied to
    create extension "vector" HINT: Must be superuser ...): vectors stay in each machine's local
    index" on stderr, although no vector mode was on and nothing would use pgvector."""
    url = _plain_role_database(pg_admin_url, "t_keyword_team")
    home = tmp_path / "home"
    wrote = coffer(home, url, "remember", "--global", "The staging DB is db-stg-2.")
    found = coffer(home, url, "recall", "staging")
    assert (wrote.returncode, wrote.stderr) == (0, "")
    assert (found.returncode, found.stderr) == (0, "")
    assert "The staging DB is db-stg-2." in found.stdout
    (home / "config.toml").write_text('[memory]\nretrieval_modes = ["keyword", "hybrid"]\n')
    wants = coffer(home, url, "recall", "staging")  # a home that wants vectors is still told
    assert wants.returncode == 0 and "vector is not available" in wants.stderr
