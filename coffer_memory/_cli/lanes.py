"""``coffer`` subcommands for the lanes: journal, handoff, resume, rules, log, session context."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import TYPE_CHECKING, Any

import attrs

from .._errors import PATH_ECHO_LIMIT, InvalidInput, safe_echo
from .._localtime import local_text
from .._render import table
from .._store.identity import offer_run_from
from ._common import (
    add_command,
    add_cwd,
    add_group,
    add_store,
    add_target,
    emit_json,
    print_written,
    read_text,
    target,
)

if TYPE_CHECKING:
    from .._organize.models import OrganizeReport, ReorgReport
    from .._service import MemoryService

DRY_RUN_HELP = "show the planned changes as diffs; write nothing"


def cmd_journal_show(svc: MemoryService, args: argparse.Namespace) -> None:
    days = svc.journal(cwd=args.cwd, store=args.store, limit=args.limit)
    if args.json:
        emit_json(days)
        return
    if not days:
        print("(no journal entries yet)")
    for day in days:
        print(f"=== {day.period}  ({day.path})\n{day.text.strip()}\n")


def cmd_journal_add(svc: MemoryService, args: argparse.Namespace) -> None:
    result = svc.journal_append(read_text(args.text) or "", cwd=args.cwd, store=args.store, actor=args.actor)
    emit_json(result) if args.json else print_written(f"journal entry added to {result.path}", result.receipt)


def cmd_journal_rm(svc: MemoryService, args: argparse.Namespace) -> None:
    result = svc.delete_journal(args.period, cwd=args.cwd, store=args.store)
    emit_json(result) if args.json else print(f"deleted {result.path}")


def cmd_handoff_save(svc: MemoryService, args: argparse.Namespace) -> None:
    result = svc.save_handoff(read_text(args.text) or "", cwd=args.cwd)
    emit_json(result) if args.json else print_written(f"handoff saved to {result.path}", result.receipt)


def cmd_handoff_show(svc: MemoryService, args: argparse.Namespace) -> None:
    scenes = svc.handoffs(**target(args))
    if args.json:
        emit_json(scenes)
        return
    if not scenes:
        print("(no handoffs)")
        return
    # A branch renamed since its scene was saved (`git branch -m`): listed under its name now, as
    # `resume` finds it; once the branch saved a scene of its own, the old one is only named.
    for scene in scenes:
        if scene.renamed_to is not None:
            continue
        label = scene.branch
        if scene.saved_as is not None:
            label = f"{scene.branch}  (saved as {scene.saved_as!r}, renamed since)"
        head = scene.head[:12] if scene.head else "no commit"
        print(f"=== {label}  saved {local_text(scene.updated_at)} at {head}\n{scene.text}\n")
    for scene in scenes:
        if scene.renamed_to is not None:
            print(
                f"not shown: the handoff saved as {scene.branch!r} before the branch was renamed to "
                f"{scene.renamed_to!r}, which has its own now; `coffer handoff rm "
                f"{shlex.quote(scene.branch)}` deletes it"
            )


def cmd_handoff_rm(svc: MemoryService, args: argparse.Namespace) -> None:
    result = svc.delete_handoff(args.branch, cwd=args.cwd, store=args.store)
    emit_json(result) if args.json else print(f"deleted {result.path}")


def cmd_resume(svc: MemoryService, args: argparse.Namespace) -> None:
    result = svc.resume(cwd=args.cwd)
    # An offered merge is printed as this call would run it (its --home, its --cwd), as recall does.
    notes = tuple(offer_run_from(note, getattr(args, "home", None), args.cwd) for note in result.notes)
    result = attrs.evolve(result, notes=notes)
    emit_json(result) if args.json else print(result.summary)


def cmd_rules(svc: MemoryService, args: argparse.Namespace) -> None:
    if args.add is not None:
        result = svc.append_rule(read_text(args.add) or "", **target(args))
        emit_json(result) if args.json else print_written(f"rule added to {result.path}", result.receipt)
        return
    if args.delete:
        if not args.yes:
            raise InvalidInput(
                "--delete removes every rules file of the store; pass --yes to confirm", field="yes"
            )
        deleted = svc.delete_rules(**target(args))
        emit_json(deleted) if args.json else print(f"deleted {len(deleted)} rules file(s)")
        return
    view = svc.rules(**target(args))
    emit_json(view) if args.json else print(view.text or "(no rules)")


def cmd_log(svc: MemoryService, args: argparse.Namespace) -> None:
    if args.delete:
        if not args.yes:
            raise InvalidInput("--delete removes the consolidation log; pass --yes to confirm", field="yes")
        result = svc.delete_consolidation_log(**target(args))
        emit_json(result) if args.json else print(f"deleted {result.path}")
        return
    log = svc.consolidation_log(**target(args))
    emit_json(log) if args.json else print(log.text or "(no consolidation log yet)")


def cmd_session_context(svc: MemoryService, args: argparse.Namespace) -> None:
    # A mistyped --cwd would print the bundle without the project's rules, as recall would search
    # the global store alone: refused the same way (the hook, run by an agent, stays lenient).
    if args.cwd is not None and not os.path.isdir(args.cwd):
        raise InvalidInput(
            f"cwd is not a directory: {safe_echo(os.fspath(args.cwd), PATH_ECHO_LIMIT)!r}", field="cwd"
        )
    bundle = svc.assemble_session_context(args.cwd)
    emit_json({"additional_context": bundle}) if args.json else print(bundle)
    optout = None if bundle else svc.project_optout(args.cwd)
    if optout is not None:  # an empty answer needs its reason
        print(f"note: this project {optout.describe()}; agents get no bundle here", file=sys.stderr)


def cmd_index(svc: MemoryService, args: argparse.Namespace) -> None:
    name = svc.resolve_store(**target(args))
    path = svc.regenerate_index(name)
    emit_json({"path": path}) if args.json else print(path or f"{name} has no knowledge folder yet")


def _print_run(svc: MemoryService, report: OrganizeReport | ReorgReport, show_diffs: bool) -> None:
    if report.status != "ok":
        # A provider that is set but cannot run is an error before any report (Organizer.model):
        # no_model here is the home without a model.
        reason = {
            "no_model": "no LLM is configured ([llm] in config.toml): nothing to do",
            "empty": "nothing to organize",
        }[report.status]
        print(f"{report.store}: {reason}")
        return
    rows = [
        (c.action, c.source.name if c.source else "", c.target.name if c.target else "", c.error or "")
        for c in report.changes
    ]
    print(table(("action", "from", "to", "note"), rows) if rows else "(no changes)")
    print(
        f"tokens: {report.usage.prompt_tokens} prompt + {report.usage.completion_tokens} completion"
        + ("   (dry run: nothing was written)" if report.dry_run else "")
    )
    if show_diffs:
        for change in report.changes:
            if change.diff:
                print("\n" + change.diff.rstrip())


def cmd_organize(svc: MemoryService, args: argparse.Namespace) -> None:
    report = svc.organize(svc.resolve_store(**target(args)), dry_run=args.dry_run)
    emit_json(report) if args.json else _print_run(svc, report, args.dry_run)


def cmd_reorg(svc: MemoryService, args: argparse.Namespace) -> None:
    report = svc.reorganize(svc.resolve_store(**target(args)), dry_run=args.dry_run)
    if args.json:
        emit_json(report)
        return
    _print_run(svc, report, args.dry_run)
    if report.summary:
        print(f"summary: {report.summary} ({report.steps} steps)")


def _journal_target(p: Any) -> None:
    add_cwd(p)
    add_store(p, "the project store (name, label, repository folder name or unique prefix)")


def register(sub: Any) -> None:
    """Add the lane subcommands."""
    journal = add_command(sub, "journal", "show the project's journal, newest day first")
    _journal_target(journal)
    journal.add_argument("--limit", type=int, default=7, help="at most this many days (default 7)")
    journal.set_defaults(func=cmd_journal_show)
    jsub = journal.add_subparsers(dest="journal_command", metavar="COMMAND")
    p = add_command(jsub, "add", "append an entry to today's journal ('-' reads stdin)")
    p.add_argument("text", help="the entry ('-' reads it from stdin)")
    p.add_argument("--actor", choices=("agent", "user"), default="user", help="who writes it (default: user)")
    _journal_target(p)
    p.set_defaults(func=cmd_journal_add)
    p = add_command(jsub, "rm", "delete one day of the journal")
    p.add_argument("period", help="the day, YYYY-MM-DD")
    _journal_target(p)
    p.set_defaults(func=cmd_journal_rm)

    hsub = add_group(sub, "handoff", "save or show per-branch handoff notes")
    p = add_command(hsub, "save", "save where work stands on this branch ('-' reads stdin)")
    p.add_argument("text", help="the handoff note ('-' reads it from stdin)")
    add_cwd(p, "directory whose repository and branch the handoff is for (default: .)")
    p.set_defaults(func=cmd_handoff_save)
    p = add_command(hsub, "show", "every branch's handoff in the store")
    add_target(p)
    p.set_defaults(func=cmd_handoff_show)
    p = add_command(hsub, "rm", "delete one branch's handoff")
    p.add_argument("branch", help="the branch whose handoff to delete")
    _journal_target(p)
    p.set_defaults(func=cmd_handoff_rm)

    p = add_command(sub, "resume", "the handoff for this project and branch, and what changed since")
    add_cwd(p, "directory whose repository and branch to resume (default: .)")
    p.set_defaults(func=cmd_resume)

    msub = add_group(sub, "memory", "rules, the consolidation log and INDEX.md of a store")
    p = add_command(msub, "rules", "show the store's rules (all rules/*.md), or add one")
    change = p.add_mutually_exclusive_group()  # both at once added the rule and ignored --delete
    change.add_argument("--add", metavar="TEXT", help="append a rule to rules/rules.md ('-' reads stdin)")
    change.add_argument("--delete", action="store_true", help="delete every rules file")
    p.add_argument("--yes", action="store_true", help="confirm --delete")
    add_target(p)
    p.set_defaults(func=cmd_rules)
    p = add_command(msub, "log", "show (or delete) the organizer's consolidation log")
    p.add_argument("--delete", action="store_true", help="delete the log")
    p.add_argument("--yes", action="store_true", help="confirm --delete")
    add_target(p)
    p.set_defaults(func=cmd_log)
    p = add_command(msub, "index", "regenerate knowledge/INDEX.md from the topic documents")
    add_target(p)
    p.set_defaults(func=cmd_index)

    p = add_command(sub, "organize", "file the inbox into topic documents and rules (needs an LLM)")
    p.add_argument("--dry-run", action="store_true", help=DRY_RUN_HELP)
    add_target(p)
    p.set_defaults(func=cmd_organize)
    p = add_command(sub, "reorg", "merge duplicate and split long topic documents (needs an LLM)")
    p.add_argument("--dry-run", action="store_true", help=DRY_RUN_HELP)
    add_target(p)
    p.set_defaults(func=cmd_reorg)

    p = add_command(sub, "session-context", "the bundle an agent receives at session start")
    add_cwd(p, "directory whose project rules to include (default: .)")
    p.set_defaults(func=cmd_session_context)


__all__ = ["register"]
