"""``coffer`` subcommands for facts, stores and maintenance."""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._errors import PATH_ECHO_LIMIT, IndexUnavailable, InvalidInput, StoreNotDeletable, safe_echo
from .._localtime import local_text
from .._models import RETRIEVAL_MODES, MutationResult, RecallResult, StoreInfo
from .._render import hits_table, shorten, table
from .._store.identity import offer_run_from
from .._store.paths import GLOBAL_STORE
from .._store.when import FORMS
from ..vocabulary import MCP_PROBE_TIMEOUT_SECONDS
from . import stores as stores_cli
from ._common import (
    FILE,
    add_command,
    add_cwd,
    add_group,
    add_target,
    emit_json,
    jsonable,
    locate_fact,
    print_written,
    progress_bars,
    read_file,
    read_text,
    target,
)

if TYPE_CHECKING:
    from .._service import MemoryService


def _print_mutation(verb: str, result: MutationResult) -> None:
    print(f"{verb} {result.fact.id} in {result.store}")
    print(f"  file: {result.path}")
    if result.before_sha256:
        print(f"  before sha256: {result.before_sha256}")
    if result.after_sha256:
        print_written(f"  after sha256:  {result.after_sha256}", result.receipt)


def cmd_remember(svc: MemoryService, args: argparse.Namespace) -> None:
    text = read_text(args.text) or ""
    result = svc.remember(
        text,
        title=args.title,
        description=args.description,
        actor=args.actor,
        tags=args.tags or (),
        origin_session_id=args.session_id,
        **target(args),
    )
    emit_json(result) if args.json else _print_mutation("remembered", result)


def cmd_recall(svc: MemoryService, args: argparse.Namespace) -> None:
    result = svc.recall(
        args.query,
        cwd=args.cwd,
        stores=args.stores or None,
        mode=args.mode,
        limit=args.limit,
        **_filters(args),
    )
    offers = _merge_offers(svc, args, result)
    if args.json:  # the offers too: JSON without them never said where the memory was
        emit_json({**jsonable(result), "merge_offers": offers})
        return
    note = " (fell back to keyword)" if result.fallback else ""
    print(f"mode: {result.mode}{note}   stores: {', '.join(result.stores)}")
    print(hits_table(result.hits))
    for offer in offers:
        print(f"note: {offer}")


def _merge_offers(svc: MemoryService, args: argparse.Namespace, result: RecallResult) -> list[str]:
    """The other stores of this repository, offered for merging, when the recall found nothing
    of this checkout's store: the memory may be in a second clone's (a copy of the checkout,
    another `git clone`), which recall never searches by itself. Asked only then: it reads every
    store's identity and may run git."""
    project = [s for s in result.stores if s != GLOBAL_STORE]
    if project and not args.stores and not any(h.store in project for h in result.hits):
        return [_as_run_here(offer, args) for offer in svc.repository_offers(cwd=args.cwd)]
    return []


def _as_run_here(offer: str, args: argparse.Namespace) -> str:
    """The offer with its command as this call would run it: the same ``--home``, and ``--cwd``
    when the recall was given one, quoted for the shell. Without them the printed command merged
    in the default home, or (for a checkout whose store is not written yet) failed from here."""
    return offer_run_from(offer, getattr(args, "home", None), args.cwd)


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    return {"tags": args.tags, "since": args.since, "until": args.until}


def add_filters(p: argparse.ArgumentParser) -> None:
    """``--tag`` (repeatable, all must match), ``--since`` and ``--until`` (on updated_at)."""
    p.add_argument(
        "--tag", dest="tags", action="append", help="only facts with this tag (repeatable: all must match)"
    )
    p.add_argument("--since", help=f"only facts updated at or after this time: {FORMS}")
    p.add_argument("--until", help=f"only facts updated before this time: {FORMS}")


def _unreached_index(svc: MemoryService, store: str) -> IndexUnavailable | None:
    """Why the shared index ([index] backend, a team's PostgreSQL) of ``store`` cannot be reached,
    or None (reached, or there is none). A listing reads the local index of the files and needs no
    server: an empty one, with the server down, read as "the team store is empty"."""
    if svc.settings.index.backend == "sqlite":
        return None
    try:
        backend = svc.index.backend
        if backend is not None:
            backend.version(store)
    except IndexUnavailable as exc:
        return exc
    return None


def cmd_facts_list(svc: MemoryService, args: argparse.Namespace) -> None:
    page = svc.list_facts(limit=args.limit, cursor=args.cursor, **_filters(args), **target(args))
    # Only for an empty first page: a listing with facts says what the files hold either way,
    # and asking the server on every listing would cost each one a round trip.
    down = None
    if not page.items and args.cursor is None and page.target is not None:
        down = _unreached_index(svc, page.target.store)
    if down is not None:
        print(
            f"note: the shared index was not reached ({down.code}: {down.message}); this listing is "
            f"the local index's, of the files in {page.target.store_dir if page.target else '?'}, "
            "which hold no facts",
            file=sys.stderr,
        )
    if args.json:
        emit_json(page)
        return
    rows = [
        (
            r.fact.id,
            local_text(r.fact.updated_at, "minutes"),
            shorten(r.fact.title, 40),
            shorten(r.fact.body, 50),
        )
        for r in page.items
    ]
    print(table(("id", "updated", "title", "text"), rows) if rows else "(no facts)")
    if page.next_cursor:
        print(f"\nmore: --cursor {page.next_cursor}")


def cmd_facts_show(svc: MemoryService, args: argparse.Namespace) -> None:
    fact_id, where = locate_fact(svc, args.id, args)
    record = svc.get_fact(fact_id, **where)
    if args.json:
        emit_json(record)
        return
    print(f"# {record.fact.title}\n")
    print(record.fact.body)
    print(
        f"\n-- {record.path}\n   sha256 {record.sha256}   actor {record.fact.actor}   "
        f"updated {local_text(record.fact.updated_at)}"
    )
    if record.fact.tags:
        print(f"   tags {', '.join(record.fact.tags)}")


def cmd_facts_edit(svc: MemoryService, args: argparse.Namespace) -> None:
    body = read_text(args.text)
    if args.body_file:
        body = read_file(args.body_file, "body_file")
    fact_id, where = locate_fact(svc, args.id, args)
    tags = [] if args.clear_tags else args.tags
    if body is None and args.title is None and args.description is None and tags is None:
        from ._editor import edit_in_editor

        edited = edit_in_editor(svc, fact_id, args, where)
        if args.json:
            emit_json(edited)  # null: nothing changed, nothing written
        elif edited is None:
            print(f"no changes to {fact_id}; nothing written")
        else:
            _print_mutation("edited", edited)
        return
    result = svc.edit_fact(
        fact_id,
        body=body,
        title=args.title,
        description=args.description,
        expected_sha256=args.expect_sha256,
        tags=tags,
        **where,
    )
    if args.json:
        emit_json(result)
    elif result.before_sha256 == result.after_sha256:
        print(f"no changes to {fact_id}; nothing written")
    else:
        _print_mutation("edited", result)


def cmd_facts_rm(svc: MemoryService, args: argparse.Namespace) -> None:
    fact_id, where = locate_fact(svc, args.id, args)
    result = svc.delete_fact(fact_id, expected_sha256=args.expect_sha256, **where)
    emit_json(result) if args.json else _print_mutation("deleted", result)


def cmd_clear(svc: MemoryService, args: argparse.Namespace) -> None:
    name = svc.resolve_store(**target(args))
    if not args.yes:
        raise InvalidInput(f"clear deletes every fact of {name}; pass --yes to confirm", field="yes")
    result = svc.clear(store=name)
    n = result.deleted
    emit_json(result) if args.json else print(f"cleared {n} fact{'' if n == 1 else 's'} from {name}")


def _root(root: str | None) -> str:
    """A store's repository folder as listed; one that is gone is marked: the store is not lost, the
    next command run in a moved or fresh checkout of it folds it in (see docs/projects.md)."""
    if root is None:
        return "-"
    shown = safe_echo(root, PATH_ECHO_LIMIT)  # from store.json: a newline there opened a row of its own
    return shown if os.path.isdir(root) else f"{shown} (missing)"


def stores_table(stores: Sequence[StoreInfo]) -> str:
    """Stores as a table: name, label, repository root, fact count, folder."""
    if not stores:
        return "(no stores yet)"
    rows = [
        (
            s.name,
            safe_echo(s.label, PATH_ECHO_LIMIT) if s.label else "-",
            _root(s.project_root),
            s.fact_count,
            s.store_dir,
        )
        for s in stores
    ]
    return table(("store", "label", "repository", "facts", "folder"), rows)


def cmd_stores_list(svc: MemoryService, args: argparse.Namespace) -> None:
    stores = svc.stores()
    emit_json(stores) if args.json else print(stores_table(stores))


def cmd_stores_label(svc: MemoryService, args: argparse.Namespace) -> None:
    if args.clear:
        info = svc.clear_label(args.store_name)
    elif args.label is None:
        raise InvalidInput("give a LABEL or --clear", field="label")
    else:
        info = svc.set_label(args.store_name, args.label)
    emit_json(info) if args.json else print(f"{info.name}: {info.display_name}")


def cmd_stores_delete(svc: MemoryService, args: argparse.Namespace) -> None:
    if not args.yes:
        info = svc.store_info(args.store_name)
        if info.name == GLOBAL_STORE:  # refused with --yes too: asking for it would mislead
            raise StoreNotDeletable(info.name)
        raise InvalidInput(
            f"delete removes {info.name} ({info.display_name}, {info.fact_count} facts, every lane) "
            f"and its folder {info.store_dir}; pass --yes to confirm",
            field="yes",
        )
    info = svc.delete_store(args.store_name)
    emit_json(info) if args.json else print(f"deleted {info.name} ({info.display_name})")


def cmd_reindex(svc: MemoryService, args: argparse.Namespace) -> None:
    with progress_bars(args.json) as progress:
        reports = svc.reindex(args.store, rebuild=args.rebuild, progress=progress)
    if args.json:
        emit_json(reports)
        return
    rows = [(r.store, r.scanned, r.added, r.updated, r.removed, r.unchanged, len(r.skipped)) for r in reports]
    print(
        table(("store", "files", "added", "updated", "removed", "unchanged", "broken"), rows)
        if rows
        else "(no stores yet)"
    )


def positive_seconds(text: str) -> float:
    """``--timeout``'s value: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def sha256_digest(text: str) -> str:
    """``--expect-sha256``'s value: 64 hexadecimal digits, in either case (a file's sha256 is
    lowercase). Anything else can never match, and said MEMORY_CONFLICT, 'changed since it was
    read', of a fact that had not changed."""
    if len(text) != 64 or not all(c in "0123456789abcdefABCDEF" for c in text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a sha256 (64 hexadecimal digits, as `coffer facts show --json` prints)"
        )
    return text.lower()


def cmd_doctor(svc: MemoryService, args: argparse.Namespace) -> int:
    from .._indexing import VECTOR_PROBLEM
    from ..plugins.manager import plugin_infos

    def unsaid(record: logging.LogRecord) -> bool:
        return not getattr(record, VECTOR_PROBLEM, False)  # the report's vector line says it

    logger = logging.getLogger("coffer_memory")
    logger.addFilter(unsaid)
    try:
        with progress_bars(args.json) as progress:  # what an interrupted run left is indexed now
            report = svc.doctor(progress=progress, mcp_timeout=args.timeout)
    finally:
        logger.removeFilter(unsaid)
    broken_plugins = [p for p in plugin_infos() if p.error]
    ok = report.ok and not broken_plugins
    from .settings import home_reason

    why = home_reason(args)
    if args.json:
        emit_json({**jsonable(report), "broken_plugins": broken_plugins, "home_chosen_by": why})
        return 0 if ok else 1
    print(f"home:         {report.home} ({why})")
    print(f"sqlite:       {report.sqlite_version}")
    where = f" ({report.ripgrep_path})" if report.grep_backend == "ripgrep" else ""
    hint = "" if report.ripgrep_path else " (ripgrep not found: pip install ripgrep==14.1.0 for faster grep)"
    print(f"grep backend: {report.grep_backend}{where}{hint}")
    if report.shared_index:
        print(f"shared index: {report.shared_index}")
    if report.embedder:
        print(f"embedder:     {report.embedder}")
    print(stores_table(report.stores))
    for b in report.broken:
        print(f"broken: {b.path}: {b.error}")
    for m in report.index_mismatches:
        print(f"index: {m}")
    for p in broken_plugins:
        print(f"plugin: {p.name} ({p.distribution or 'unknown distribution'}) failed to load: {p.error}")
    for line in report.agent_problems or report.agents:
        print(f"agent: {line}")
    for r in report.index_repairs:
        print(f"repaired: {r}")
    for link in report.links:
        print(f"symlink: {link} (never followed)")
    for line in report.hard_links:
        print(f"hard link: {line}")
    for offer in report.same_repository:
        print(f"same repository: {offer}")
    for line in report.opted_out:
        print(f"opted out: {line}")
    if report.vector_problem:
        print(f"vector: {report.vector_problem}")
    for line in report.vectors_waiting:
        print(f"vectors: {line}")
    if ok:
        print("ok")
    else:
        advice = []
        if report.broken:
            advice.append("fix, shrink, rename or delete the files listed as broken (they are not indexed)")
        if report.index_mismatches:
            advice.append("run `coffer reindex` to bring the index in line with the files")
        if broken_plugins:
            advice.append("fix or uninstall the broken plugins (they are skipped until then)")
        if report.agent_problems:
            advice.append("see the agent lines above (`coffer agents status <agent>` for details)")
        if report.links:
            advice.append("replace the symbolic links inside the store with the files themselves")
        if report.vector_problem:
            advice.append(
                "install what the vector line names, or leave vector and hybrid out of retrieval_modes"
            )
        print("problems found: " + "; ".join(advice))
    return 0 if ok else 1


def register(sub: Any) -> None:
    """Add the fact, store and maintenance subcommands."""
    p = add_command(sub, "remember", "remember a fact ('-' reads the text from stdin)")
    p.add_argument("text", help="the fact ('-' reads it from stdin)")
    p.add_argument("--title", help="a short title (default: from the text)")
    p.add_argument("--description", help="a one-line description (default: from the text)")
    p.add_argument("--actor", choices=("agent", "user"), default="user", help="who says so (default: user)")
    p.add_argument("--tag", dest="tags", action="append", help="a tag for the fact (repeatable)")
    p.add_argument(
        "--session-id",
        help="the agent session or chat the fact comes from; facts of one session are recalled with their neighbours",
    )
    add_target(p)
    p.set_defaults(func=cmd_remember)

    p = add_command(sub, "recall", "search the project and global stores")
    p.add_argument("query", help="what to look for, in plain words")
    p.add_argument(
        "--mode", choices=RETRIEVAL_MODES, help="retrieval mode (default: the configured default_mode)"
    )
    p.add_argument("--limit", type=int, default=10, help="at most this many hits (default 10)")
    p.add_argument(
        "--store",
        dest="stores",
        action="append",
        help="search this store only (repeatable; name, label or prefix)",
    )
    add_filters(p)
    add_cwd(p, "directory whose git repository picks the project store searched (default: .)")
    p.set_defaults(func=cmd_recall)

    facts = add_group(sub, "facts", "list, show, edit or delete facts")
    p = add_command(facts, "list", "facts of a store, newest first")
    p.add_argument("--limit", type=int, default=50, help="facts per page (default 50)")
    p.add_argument("--cursor", help="the token printed after 'more:' for the next page")
    add_filters(p)
    add_target(p)
    p.set_defaults(func=cmd_facts_list)
    for name, func, help_text in (
        ("show", cmd_facts_show, "show one fact"),
        ("edit", cmd_facts_edit, "change a fact's text, title or description (no options: open $EDITOR)"),
        ("rm", cmd_facts_rm, "delete a fact"),
    ):
        p = add_command(facts, name, help_text)
        p.add_argument("id", help="the fact id, or a unique prefix of it")
        add_target(p)
        if name != "show":
            p.add_argument(
                "--expect-sha256", type=sha256_digest, help="refuse if the file changed since you read it"
            )
        if name == "edit":
            body = p.add_mutually_exclusive_group()
            body.add_argument("--text", help="new body ('-' reads stdin)")
            body.add_argument("--body-file", help="read the new body from a file").complete = FILE  # type: ignore[attr-defined]
            p.add_argument("--title", help="new title")
            p.add_argument("--description", help="new one-line description")
            tagging = p.add_mutually_exclusive_group()
            tagging.add_argument(
                "--tag", dest="tags", action="append", help="replace the fact's tags with these (repeatable)"
            )
            tagging.add_argument("--clear-tags", action="store_true", help="remove every tag of the fact")
        p.set_defaults(func=func)

    p = add_command(sub, "clear", "delete every fact of a store's knowledge lane")
    p.add_argument("--yes", action="store_true", help="confirm")
    add_target(p)
    p.set_defaults(func=cmd_clear)

    stores = add_group(sub, "stores", "list, label, delete, merge or configure stores")
    p = add_command(stores, "list", "every store on disk, with its label and repository")
    p.set_defaults(func=cmd_stores_list)
    p = add_command(stores, "label", "set or clear a store's display label")
    p.add_argument("store_name", help="the store: name, label, repository folder name or unique prefix")
    p.add_argument("label", nargs="?", help="the new label (1 to 200 characters)")
    p.add_argument("--clear", action="store_true", help="remove the label")
    p.set_defaults(func=cmd_stores_label)
    p = add_command(stores, "delete", "delete a project store: its folder, index rows, label and root")
    p.add_argument("store_name", help="the store: name, label, repository folder name or unique prefix")
    p.add_argument("--yes", action="store_true", help="confirm")
    p.set_defaults(func=cmd_stores_delete)
    stores_cli.register(stores)

    p = add_command(sub, "reindex", "reconcile the index with the files (progress bar)")
    p.add_argument("--store", help="only this store (default: every store)")
    p.add_argument("--rebuild", action="store_true", help="drop the index rows first")
    p.set_defaults(func=cmd_reindex)

    p = add_command(sub, "doctor", "check the index against the files and report broken files and plugins")
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=MCP_PROBE_TIMEOUT_SECONDS,
        help="seconds each agent's MCP server gets to answer (default "
        f"{MCP_PROBE_TIMEOUT_SECONDS:g}); one that hangs costs this long",
    )
    p.set_defaults(func=cmd_doctor)


__all__ = ["register", "stores_table"]
