"""The detached process ``coffer-hook`` starts: distill the session that just ended (SessionEnd),
sweep an agent's past sessions (SessionStart of an agent without SessionEnd, e.g. Codex), or
distil the sessions earlier ends left ``in_progress`` (SessionStart, when there are some).

``python -m coffer_memory._session_end --home H --agent A --session-id S --cwd C``,
``... --home H --agent A --sweep [--limit N]``, or ``... --home H --agent A --left [--session-id S]``
(S: the session starting, not picked up).
It runs after the agent has moved on, so it may take as long as the model needs; why it failed,
and what it found damaged and repaired (the ledger's warnings), go to ``<home>/logs/hook.log``,
never to a terminal.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Sequence
from pathlib import Path

from ._agents.hook import HookError, log_failure, log_line


class _ToHookLog(logging.Handler):
    """The distillation's warnings (a damaged ledger repaired), one line each in hook.log."""

    def __init__(self, home: Path, agent: str, event: str) -> None:
        super().__init__(logging.WARNING)
        self.where = (home, agent, event)

    def emit(self, record: logging.LogRecord) -> None:
        log_line(*self.where, f"{record.levelname.lower()}: {record.getMessage()}")


# The agent may still be flushing the transcript's last lines when the hook fires.
SETTLE_SECONDS = 1.0


def main(argv: Sequence[str] | None = None) -> int:
    """Distill one session; always exits 0 (failures are logged)."""
    parser = argparse.ArgumentParser(prog="python -m coffer_memory._session_end")
    parser.add_argument("--home", required=True)
    parser.add_argument("--agent", required=True)
    parser.add_argument("--session-id")
    parser.add_argument("--cwd")
    parser.add_argument("--sweep", action="store_true", help="sweep the agent's past sessions instead")
    parser.add_argument("--left", action="store_true", help="distil the sessions earlier ends left instead")
    parser.add_argument("--limit", type=int, default=5)
    parser.add_argument("--transcript-path", default=None)
    parser.add_argument("--settle", type=float, default=SETTLE_SECONDS)
    args = parser.parse_args(argv)
    home = Path(args.home)
    event = "SessionStart" if args.sweep or args.left else "SessionEnd"
    warnings = _ToHookLog(home, args.agent, event)
    logging.getLogger("coffer_memory._transcripts").addHandler(warnings)
    try:
        time.sleep(max(args.settle, 0.0))
        from ._service import MemoryService

        with MemoryService(home) as svc:
            if args.left:
                if svc.llm is not None:  # as for a sweep: without a model nothing is distilled
                    svc.transcripts.pick_up_left(args.agent, args.session_id)
                return 0
            if args.sweep:
                # Without a model every distillation is a no-op: skip reading the transcripts.
                if svc.llm is not None:
                    svc.sweep(args.agent, limit=args.limit)
                return 0
            if not args.session_id or not args.cwd:
                raise HookError("--session-id and --cwd are required without --sweep")
            result = svc.end_session(args.agent, args.session_id, cwd=args.cwd)
        if result.status not in (
            "distilled",
            "already_distilled",
            "no_model",
            "not_git",
            "empty",
            "opted_out",
        ):
            raise HookError(f"session {args.session_id}: {result.status}: {result.detail or ''}")
    except BaseException as exc:
        log_failure(home, args.agent, event, exc)
    finally:
        logging.getLogger("coffer_memory._transcripts").removeHandler(warnings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
