"""The detached process ``coffer-hook`` starts at SessionEnd: distill the session that just ended.

``python -m coffer_memory.agents.session_end --home H --agent A --session-id S --cwd C``.
It runs after the agent has moved on, so it may take as long as the model needs; what it
did (or why it failed) goes to ``<home>/logs/hook.log``, never to a terminal.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from .hook import HookError, log_failure

# The agent may still be flushing the transcript's last lines when the hook fires.
SETTLE_SECONDS = 1.0


def main(argv: Sequence[str] | None = None) -> int:
    """Distill one session; always exits 0 (failures are logged)."""
    parser = argparse.ArgumentParser(prog="python -m coffer_memory.agents.session_end")
    parser.add_argument("--home", required=True)
    parser.add_argument("--agent", required=True)
    parser.add_argument("--session-id", required=True)
    parser.add_argument("--cwd", required=True)
    parser.add_argument("--transcript-path", default=None)
    parser.add_argument("--settle", type=float, default=SETTLE_SECONDS)
    args = parser.parse_args(argv)
    home = Path(args.home)
    try:
        time.sleep(max(args.settle, 0.0))
        from ..service import MemoryService

        with MemoryService(home) as svc:
            result = svc.end_session(args.agent, args.session_id, cwd=args.cwd)
        if result.status not in ("distilled", "already_distilled", "no_model", "not_git", "empty"):
            raise HookError(f"session {args.session_id}: {result.status}: {result.detail or ''}")
    except BaseException as exc:
        log_failure(home, args.agent, "SessionEnd", exc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
