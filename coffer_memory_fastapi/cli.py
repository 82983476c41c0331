"""``coffer-api``: serve the REST app with uvicorn (127.0.0.1 by default)."""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and run uvicorn until interrupted."""
    parser = argparse.ArgumentParser(prog="coffer-api", description="Serve coffer-memory over REST.")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    parser.add_argument(
        "--token", default=None, help="require 'Authorization: Bearer <token>' (default: $COFFER_API_TOKEN)"
    )
    parser.add_argument("--home", default=None, help="coffer home (default: $COFFER_HOME, else ~/.coffer)")
    parser.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"]
    )
    args = parser.parse_args(argv)

    import uvicorn

    from coffer_memory import MemoryService

    from .app import create_app

    token = args.token or os.environ.get("COFFER_API_TOKEN") or None
    if args.host not in ("127.0.0.1", "localhost", "::1") and not token:
        print("coffer-api: warning: listening beyond loopback without --token", file=sys.stderr)
    service = MemoryService(args.home)
    app = create_app(service, token=token)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    finally:
        service.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
