"""``coffer-mcp``'s command line, in a module that imports neither the MCP SDK nor the core, so the
stdio entry (``_stdio``) can read its arguments before either is loaded."""

from __future__ import annotations

import argparse
import os

from coffer_memory import __version__
from coffer_memory._http_conns import DEFAULT_MAX_CONNECTIONS, is_count, max_connections

__all__ = [
    "CONNECTIONS_ENV",
    "FORWARDED_ENV",
    "HOSTS_ENV",
    "MAX_SESSIONS",
    "ORIGINS_ENV",
    "SESSIONS_ENV",
    "TOKEN_ENV",
    "build_parser",
    "sessions_option",
]

TOKEN_ENV = "COFFER_MCP_TOKEN"
HOSTS_ENV = "COFFER_MCP_ALLOWED_HOSTS"
ORIGINS_ENV = "COFFER_MCP_ALLOWED_ORIGINS"
CONNECTIONS_ENV = "COFFER_MCP_MAX_CONNECTIONS"
FORWARDED_ENV = "COFFER_MCP_FORWARDED_ALLOW_IPS"
SESSIONS_ENV = "COFFER_MCP_MAX_SESSIONS"
MAX_SESSIONS = 1000
"""MCP sessions the HTTP server keeps at once, by default (``--max-sessions``). A session outlives
its connections (about 40 KB each, measured; any client opened 365 a second), so
``--max-connections`` does not bound them: mcp 2.0 and 2.1 kept every one for ever. An agent holds
one; 1,000 is 40 MB at most, where the SDK's own 10,000 is 400 MB. Past them a new session takes
the place of an idle one: one never used past its opening, else the one idle longest (``_sessions``)."""


def _sessions(value: str) -> int:
    if not is_count(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of sessions (1 or more)")
    return int(value)


def sessions_option(parser: argparse.ArgumentParser, given: int | None, env: str) -> int:
    """``--max-sessions`` when given, else the environment variable ``env``, else ``MAX_SESSIONS``;
    a bad value of the variable is ``parser``'s one-line error, as a bad option is."""
    value = os.environ.get(env, "").strip()
    if given is not None:
        return given
    if not value:
        return MAX_SESSIONS
    try:
        return _sessions(value)
    except argparse.ArgumentTypeError as exc:
        parser.error(f"${env}: {exc}")


def _port(value: str) -> int:
    if not value.isdigit() or int(value) > 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number (0-65535)")
    return int(value)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``coffer-mcp``."""
    parser = argparse.ArgumentParser(prog="coffer-mcp", description="coffer-memory's MCP server.")
    parser.add_argument(
        "--transport",
        choices=("stdio", "streamable-http"),
        default="stdio",
        help="stdio: speak MCP on stdin/stdout, as an agent starts it (default); "
        "streamable-http: serve it at http://HOST:PORT/mcp",
    )
    parser.add_argument("--home", help="coffer home (default: $COFFER_HOME or ~/.coffer)")
    parser.add_argument("--host", default="127.0.0.1", help="streamable-http: address to bind (127.0.0.1)")
    parser.add_argument("--port", type=_port, default=8765, help="streamable-http: port (8765)")
    parser.add_argument(
        "--token",
        default=None,
        help=f"streamable-http: require this bearer token (default: ${TOKEN_ENV}; none when unset)",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="streamable-http: serve requests whose Host is this name too (repeatable; also "
        f"${HOSTS_ENV}, comma-separated); loopback names and the bound address are always served. "
        "Bound beyond loopback, Host and Origin are checked only when one is given",
    )
    parser.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="streamable-http: serve requests from web pages of this origin too (e.g. "
        f"http://localhost:3000; repeatable; also ${ORIGINS_ENV}); by default only the server's own",
    )
    parser.add_argument(
        "--max-connections",
        type=max_connections,
        default=None,
        metavar="N",
        help="streamable-http: hold at most N connections; a connection past them is answered 503 "
        f"(default {DEFAULT_MAX_CONNECTIONS}, or ${CONNECTIONS_ENV})",
    )
    parser.add_argument(
        "--max-sessions",
        type=_sessions,
        default=None,
        metavar="N",
        help="streamable-http: keep at most N MCP sessions; past them a new one takes the place of one "
        f"never used, else of the one idle longest (default {MAX_SESSIONS}, or ${SESSIONS_ENV})",
    )
    parser.add_argument(
        "--forwarded-allow-ips",
        action="append",
        default=[],
        metavar="ADDR[,ADDR]",
        help="streamable-http: believe X-Forwarded-For and X-Forwarded-Proto from these addresses "
        f"or networks (a proxy in front; repeatable; also ${FORWARDED_ENV}); by default from none",
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="the least severe log line written to stderr (default WARNING)",
    )
    parser.add_argument("--version", action="version", version=f"coffer-mcp {__version__}")
    return parser
