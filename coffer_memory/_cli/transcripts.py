"""``coffer transcripts list|show`` and ``coffer distill``: past agent sessions into the journal."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .._agents.homes import AGENTS
from .._localtime import local_text
from .._render import shorten, table, width
from ._common import add_command, add_cwd, add_group, add_store, emit_json, usage_error
from ._progress import Progress

if TYPE_CHECKING:
    from .._service import MemoryService
    from .._transcripts.models import DistillResult
    from .._transcripts.reading import SessionReader

AGENT_HELP = "only this agent's sessions (default: every agent)"


def _when(value: Any) -> str:
    return local_text(value, "minutes") if value is not None else "-"


def _reader() -> SessionReader:
    """What ``transcripts list|show`` read through: the agents' own files, no coffer home (a new
    user's first ``coffer transcripts list`` said "no memories yet" and listed nothing)."""
    from .._transcripts.reading import SessionReader  # the parser is built on every run: load on use

    return SessionReader()


def cmd_list(args: argparse.Namespace) -> None:
    from .._transcripts.listing import sorted_sessions

    svc = _reader()

    agents = [args.agent] if args.agent else list(AGENTS)
    rows: list[Any] = []
    for agent in agents:
        page = svc.list_transcripts(
            agent,
            search=args.search,
            project=args.project,
            sort=args.sort,
            order=args.order,
            limit=args.limit,
        )
        rows.extend(page.items)
    # One list, not one block per agent: the most recent session first whichever agent had it.
    # Each agent's page is capped at --limit, so the first --limit of the merged list are the
    # right ones; capping only per agent printed up to three times as many.
    rows = sorted_sessions(rows, args.sort, descending=args.order == "desc")[: args.limit]
    if args.json:
        emit_json(rows)
        return
    if not rows:
        print("no sessions found")
        return
    print(_session_table(rows, args.sort))


# The date column is the one the list is sorted by: "--sort started_at" showed the last activity,
# and the list looked out of order. A count sorts by neither date: the last activity is shown.
_DATE_COLUMNS = {
    "started_at": "started",
    "last_activity_at": "last activity",
    "message_count": "last activity",
}
TITLE_COLUMNS = 60


def _session_table(rows: list[Any], sort: str) -> str:
    """The sessions as a table under a header; each one's project on the line below it."""
    header = _DATE_COLUMNS[sort]
    key = "started_at" if header == "started" else "last_activity_at"
    cells = [
        (
            _when(getattr(s, key)),
            s.agent,
            s.message_count,
            s.session_id,
            shorten(s.title or "(untitled)", TITLE_COLUMNS),  # by columns, "…" when cut
        )
        for s in rows
    ]
    lines = table((header, "agent", "messages", "session", "title"), cells).splitlines()
    lines.pop(1)  # the rule under the header: the project lines below break the columns anyway
    indent = " " * (max(width(c) for c in (header, *(c[0] for c in cells))) + 2)  # under "agent"
    out = [lines[0]]
    for s, line in zip(rows, lines[1:], strict=True):
        out.append(line)
        if s.project_path:
            out.append(f"{indent}{s.project_path}")
    return "\n".join(out)


def cmd_show(args: argparse.Namespace) -> None:
    svc = _reader()
    view = svc.show_transcript(args.agent or svc.find_session(args.session_id).agent, args.session_id)
    if args.json:
        emit_json({"session": view.summary, "messages": view.messages, "scrubbed": dict(view.report.counts)})
        return
    s = view.summary
    print(f"# {s.title or '(untitled)'}\n{s.agent} session {s.session_id} in {s.project_path or '?'}\n")
    for m in view.messages:
        print(f"[{m.role}] {m.text}\n")
    removed = ", ".join(f"{k} {v}" for k, v in sorted(view.report.counts.items())) or "nothing"
    print(f"removed before any model sees it: {removed}")


def _print_result(r: DistillResult) -> None:
    line = f"{r.status:<17} {r.agent} {r.session_id}"
    if r.insights:
        line += f": {len(r.insights)} insight(s)"
    if r.detail:
        line += f" ({r.detail})"
    print(line)
    for insight in r.insights if r.status in ("distilled", "dry_run") else ():
        print(f"  - {insight.name}: {insight.description}")


def _failed(svc: MemoryService, r: DistillResult) -> bool:
    """A malformed answer, or a configured model that failed (a refused key, a server down): not
    the no-op of a home without a model, which exits 0."""
    return r.status == "invalid_output" or (r.status == "no_model" and svc.settings.llm.provider != "none")


def cmd_distill(svc: MemoryService, args: argparse.Namespace) -> int:
    if args.sweep and args.session_id:  # the sweep ran and the session named was silently not the one
        usage_error("coffer distill", "give a session id or --sweep, not both", as_json=args.json)
    if args.sweep:
        return _sweep(svc, args)
    if not args.session_id:
        usage_error("coffer distill", "give a session id, or --sweep", as_json=args.json)
    agent = args.agent or svc.find_session(args.session_id).agent
    result = svc.distill_session(agent, args.session_id, cwd=args.cwd, dry_run=args.dry_run)
    if args.json:
        emit_json(result)
    else:
        _print_result(result)
    return 1 if _failed(svc, result) else 0


def _tick(bar: Progress) -> None:
    bar.update(1)


def _sweep(svc: MemoryService, args: argparse.Namespace) -> int:
    if svc.settings.llm.provider == "none" and not args.json:
        # One line, as organize says it: the sweep printed a 'no_model' line per past session.
        print("no LLM is configured ([llm] in config.toml, see docs/llm.md): nothing to distill")
        return 0
    bar = Progress("session", desc="distilling", enabled=not args.json)
    try:
        result = svc.sweep(
            args.agent,
            limit=args.limit,
            min_idle_seconds=args.min_idle,
            dry_run=args.dry_run,
            progress=lambda r: _tick(bar),
        )
    finally:
        bar.close()
    status = 1 if any(_failed(svc, r) for r in result.results) else 0
    if args.json:
        emit_json(result)
        return status
    for r in result.results:
        _print_result(r)
    distilled = sum(r.status == "distilled" for r in result.results)
    failed = sum(_failed(svc, r) for r in result.results)
    print(
        f"{distilled} distilled, {failed} failed, {len(result.results)} tried of {result.considered} sessions; "
        f"{result.skipped_active} still active, {result.remaining} left for the next run"
        + (f", {result.skipped_opted_out} in projects that opted out" if result.skipped_opted_out else "")
    )
    return status


def cmd_forget(svc: MemoryService, args: argparse.Namespace) -> None:
    writes = svc.forget_session(args.session_id, cwd=args.cwd, store=args.store)
    if args.json:
        emit_json(writes)
        return
    for w in writes:
        print(f"removed session {args.session_id} entries from {w.path}")
    if not writes:
        print(f"no journal entries came from session {args.session_id}")
    # Say exactly what stays: a user asked to forget the session, and these are not forgotten.
    kept = svc.session_facts(args.session_id, cwd=args.cwd, store=args.store)
    if kept:
        print(
            f"kept: {len(kept)} fact(s) remembered in this session; `coffer facts rm ID --store STORE` deletes one:"
        )
        for r in kept:
            print(f"  {r.fact.id}  {r.store}  {shorten(r.fact.title, 60)}")
    print("kept: the ledger row (so the session is not distilled again), the audit and consolidation logs")


def register(sub: Any) -> None:
    """Add ``transcripts`` and ``distill``."""
    tsub = add_group(sub, "transcripts", "past sessions of Claude Code, Codex and OpenCode (read-only)")
    p = add_command(tsub, "list", "list past sessions, most recent first")
    p.add_argument("--agent", choices=AGENTS, help=AGENT_HELP)
    p.add_argument("--project", help="exact project path")
    p.add_argument("--search", help="substring of the title or project path")
    p.add_argument(
        "--sort",
        choices=("started_at", "last_activity_at", "message_count"),
        default="last_activity_at",
        help="sort key (default: last_activity_at)",
    )
    p.add_argument("--order", choices=("asc", "desc"), default="desc", help="sort order (default: desc)")
    p.add_argument("--limit", type=int, default=50, help="at most this many sessions in all (default 50)")
    p.set_defaults(run=cmd_list)
    p = add_command(tsub, "show", "a session as the model would see it (scrubbed)")
    p.add_argument("session_id", help="the session id")
    p.add_argument("--agent", choices=AGENTS, help="the session's agent (default: looked up)")
    p.set_defaults(run=cmd_show)

    p = add_command(sub, "distill", "distill a past session (or --sweep all new ones) into the journal")
    p.add_argument("session_id", nargs="?", help="the session id (or --sweep)")
    p.add_argument(
        "--agent", choices=AGENTS, help="the session's agent (default: looked up; with --sweep: all)"
    )
    add_cwd(p, "project directory (default: the session's own)")
    p.add_argument("--sweep", action="store_true", help="every session not distilled yet")
    p.add_argument("--limit", type=int, default=20, help="sessions per sweep (default 20)")
    p.add_argument("--min-idle", type=int, default=600, help="skip sessions active in the last N seconds")
    p.add_argument("--dry-run", action="store_true", help="ask the model, show the insights, write nothing")
    p.set_defaults(func=cmd_distill)

    p = add_command(
        sub, "forget-session", "delete the journal entries a session produced (its remembered facts stay)"
    )
    p.add_argument("session_id", help="the session id")
    add_cwd(p)
    add_store(p, "the project store (name, label, repository folder name or unique prefix)")
    p.set_defaults(func=cmd_forget)
