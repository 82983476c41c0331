"""``coffer-api``: serve the REST app with uvicorn (127.0.0.1 by default)."""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import time
import webbrowser
from urllib.parse import quote

from .guard import LOOPBACK_HOSTS

HOSTS_ENV = "COFFER_API_ALLOWED_HOSTS"
CORS_ENV = "COFFER_API_CORS_ORIGINS"
_WILDCARDS = ("0.0.0.0", "::", "")


def _listed(value: str | None) -> list[str]:
    """A comma-separated environment value as a list (empty items dropped)."""
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``coffer-api``."""
    parser = argparse.ArgumentParser(prog="coffer-api", description="Serve coffer-memory over REST.")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    parser.add_argument(
        "--token", default=None, help="require 'Authorization: Bearer <token>' (default: $COFFER_API_TOKEN)"
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="serve requests whose Host is this name too (repeatable; also $COFFER_API_ALLOWED_HOSTS, "
        "comma-separated); loopback names and the bound address are always served",
    )
    parser.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let web pages of this origin (e.g. https://app.example) call the API with CORS "
        "(repeatable; also $COFFER_API_CORS_ORIGINS); CORS is off by default",
    )
    parser.add_argument("--home", default=None, help="coffer home (default: $COFFER_HOME, else ~/.coffer)")
    parser.add_argument(
        "--open",
        action="store_true",
        help="open the read-only web view (/ui) in the browser once the server answers",
    )
    parser.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"]
    )
    parser.add_argument(
        "--access-log",
        action="store_true",
        help="log one line per request (off by default: agents call often, and each line costs time)",
    )
    return parser


def ui_url(host: str, port: int, token: str | None) -> str:
    """The address of the web view for a server bound to ``host:port`` (token passed once)."""
    name = "127.0.0.1" if host in _WILDCARDS else host
    authority = f"[{name}]:{port}" if ":" in name else f"{name}:{port}"
    return f"http://{authority}/ui" + (f"?token={quote(token, safe='')}" if token else "")


def _open_when_up(host: str, port: int, url: str, deadline_s: float = 30.0) -> None:
    """Open ``url`` in the browser as soon as the port accepts connections (gives up quietly)."""
    target = "127.0.0.1" if host in _WILDCARDS else host
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((target, port), timeout=0.5):
                webbrowser.open(url)
                return
        except OSError:
            time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and run uvicorn until interrupted."""
    parser = build_parser()
    args = parser.parse_args(argv)

    import uvicorn

    from coffer_memory import MemoryService

    from .app import create_app
    from .guard import HostRule

    token = args.token or os.environ.get("COFFER_API_TOKEN") or None
    hosts = [*args.allowed_host, *_listed(os.environ.get(HOSTS_ENV))]
    if args.host not in _WILDCARDS:
        hosts.append(args.host)  # the bound address, by the name it was given
    try:
        HostRule(hosts)
    except ValueError as exc:
        parser.error(str(exc))
    cors = [*args.cors_origin, *_listed(os.environ.get(CORS_ENV))]
    if args.host not in LOOPBACK_HOSTS and not token:
        print("coffer-api: warning: listening beyond loopback without --token", file=sys.stderr)
    service = MemoryService(args.home)
    app = create_app(service, token=token, allowed_hosts=hosts, cors_origins=cors)
    if args.open:
        url = ui_url(args.host, args.port, token)
        print(f"coffer-api: web view at {url.partition('?')[0]}", file=sys.stderr)
        threading.Thread(target=_open_when_up, args=(args.host, args.port, url), daemon=True).start()
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=args.access_log)
    finally:
        service.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
