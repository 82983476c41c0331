"""The tests' servers take ports no other process can take from them in between (``served.py``,
``pg_server.py``): a port found free and let go was bound by another suite's server first."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import httpx
import pytest
from served import Served, closed_port


def test_coffer_mcp_and_coffer_api_on_port_0_say_the_port_they_serve(tmp_home: Path) -> None:
    env = {**os.environ, "COFFER_HOME": str(tmp_home)}
    bindir = Path(sys.executable).parent
    with Served([str(bindir / "coffer-api"), "--log-level", "warning"], env) as api:
        assert api.port != 0
        assert httpx.get(f"{api.base}/api/v1/memory_stores", timeout=60).status_code == 200
        assert f"coffer-api: listening on http://127.0.0.1:{api.port}\n" in api.stderr()
    args = [sys.executable, "-m", "coffer_memory_mcp.cli", "--transport", "streamable-http"]
    with Served(args, env) as mcp:
        assert f"coffer-mcp: listening on http://127.0.0.1:{mcp.port}/mcp\n" in mcp.stderr()


def test_a_closed_port_refuses_and_no_server_can_bind_it() -> None:
    port = closed_port()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=10).close()
    with socket.socket() as other, pytest.raises(OSError):
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn and PostgreSQL do
        other.bind(("127.0.0.1", port))
    assert closed_port() == port


def test_a_postgresql_whose_port_was_taken_starts_on_another(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, ``PgServer`` failed when another process bound its port between ``_free_port`` and
    the server's start ("could not bind IPv4 address")."""
    import pg_server

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = [taken.getsockname()[1]]
        real = pg_server._free_port
        monkeypatch.setattr(pg_server, "_free_port", lambda: ports.pop() if ports else real())
        try:
            server = pg_server.PgServer()
        except pg_server.PgUnavailable as exc:
            if "could not bind" in str(exc):
                raise
            pytest.skip(f"NO POSTGRESQL: {exc}")
        try:
            assert server.port != taken.getsockname()[1]
            import psycopg

            with psycopg.connect(server.url(), connect_timeout=60) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
        finally:
            server.stop()
