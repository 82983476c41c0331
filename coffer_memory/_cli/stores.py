"""``coffer stores merge`` and ``coffer stores config``: store lifecycle commands beside list/label/delete."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import TYPE_CHECKING, Any

import attrs

from .._errors import InvalidInput
from ._common import add_command, add_cwd, emit_json, jsonable, resolve_store_name

if TYPE_CHECKING:  # the parser is built on every run: the service loads only when a command runs
    from .._service import MemoryService
    from .._store_config import StoreConfig
    from .._store_merge import StoreMerge

__all__ = ["register"]

STORE_ARG_HELP = "the store: name, label, repository folder name or unique prefix"


def merge_lines(m: StoreMerge) -> list[str]:
    """A merge report as lines of text (what moved, what was kept beside, what was skipped)."""
    if m.already_merged:
        return [f"{m.source} was merged into {m.into} already: nothing to do"]
    # What a dry run would do, in the future; what a merge did, in the past.
    move, keep, add, skip, record, retire = (
        ("would move", "would keep", "would add", "would skip", "would record", "retire")
        if m.dry_run
        else ("moved", "kept", "added", "skipped", "recorded", "retired")
    )
    lines = [f"{'dry run: ' if m.dry_run else ''}merging {m.source} into {m.into}"]
    lines += [f"  {move} {rel}" for rel in m.moved]
    lines += [f"  {keep} {rel} beside the other as {kept}" for rel, kept in m.siblings]
    if m.journal_entries:
        entries = "entry" if m.journal_entries == 1 else "entries"
        lines.append(f"  {add} {m.journal_entries} journal {entries} to days both stores have")
    if m.unchanged:
        lines.append(f"  {len(m.unchanged)} files already in place")
    lines += [f"  {skip} {reason}" for reason in m.skipped]
    lines.append(f"  {record} {m.source} in {m.into}'s merged_identities and {retire} {m.source}")
    return lines


def cmd_stores_merge(svc: MemoryService, args: argparse.Namespace) -> None:
    source, into = resolve_store_name(svc, args.source), resolve_store_name(svc, args.into)
    dry = args.dry_run or not args.yes
    report = svc.merge_stores(source, into, dry_run=dry, cwd=args.cwd)
    emit_json(report) if args.json else print("\n".join(merge_lines(report)))
    if dry and not args.dry_run and not report.already_merged:
        raise InvalidInput("nothing was merged: pass --yes to merge (or --dry-run to only look)", field="yes")


def _config_json(view: StoreConfig) -> dict[str, Any]:
    out: dict[str, Any] = jsonable(
        {k: v for k, v in attrs.asdict(view, recurse=False).items() if k != "config"}
    )
    out["config"] = dataclasses.asdict(view.config)
    return out


def _value(key: str, raw: str) -> Any:
    """A value typed on the command line: JSON when it parses, a comma list for list keys, else text."""
    try:
        return json.loads(raw)
    except ValueError:
        if key == "retrieval_modes":
            return [v.strip() for v in raw.split(",") if v.strip()]
        return raw


def cmd_stores_config(svc: MemoryService, args: argparse.Namespace) -> None:
    if args.unset and args.value is not None:
        raise InvalidInput("give a VALUE or --unset, not both", field="value")
    if args.key is not None and (args.value is not None or args.unset):
        value = None if args.unset else _value(args.key, args.value)
        view = svc.set_store_config(args.store_name, {args.key: value})
        for key in view.ignored:
            print(
                f"warning: {key} is a legacy per-store embedding field: accepted and ignored "
                "(embeddings come from the home's [embedding] settings)",
                file=sys.stderr,
            )
    else:
        view = svc.store_config(args.store_name)
    if args.json:
        emit_json(_config_json(view))
        return
    values = dataclasses.asdict(view.config)
    if args.key is not None and args.key not in values:
        raise InvalidInput(f"unknown store setting {args.key!r}", field="key")
    if args.key is not None and args.value is None and not args.unset:
        print(json.dumps(values[args.key]))
        return
    for key in [args.key] if args.key is not None else list(values):
        print(f"{key} = {json.dumps(values[key])}  ({_source(view, key)})")


def _source(view: StoreConfig, key: str) -> str:
    """Where a setting's value comes from, in words."""
    from .._store_config import HOME_ONLY_KEYS, LEGACY_KEYS, MANAGED_KEY

    if key in LEGACY_KEYS:
        return "legacy: ignored, see [embedding]"
    if key in HOME_ONLY_KEYS:
        return "home only"
    if key == MANAGED_KEY:
        return "managed by coffer stores merge"
    return "store" if key in view.overrides else "home"


def register(stores: Any) -> None:
    """Add ``merge`` and ``config`` to the ``stores`` group."""
    p = add_command(stores, "merge", "merge one project store into another and retire it (asks for --yes)")
    p.add_argument("source", help=f"the store merged and retired; {STORE_ARG_HELP}")
    p.add_argument("into", help=f"the store that receives it; {STORE_ARG_HELP}")
    p.add_argument("--dry-run", action="store_true", help="show what would move; write nothing")
    p.add_argument("--yes", action="store_true", help="confirm (without it: the dry run, and exit 1)")
    add_cwd(p, "the checkout whose store INTO is, when INTO holds no memory yet (default: .)")
    p.set_defaults(func=cmd_stores_merge)
    p = add_command(stores, "config", "show or change a store's own settings (store.json)")
    p.add_argument("store_name", help=STORE_ARG_HELP)
    p.add_argument("key", nargs="?", help="one setting (e.g. max_fact_chars, default_mode, retrieval_modes)")
    p.add_argument("value", nargs="?", help="its new value for this store (JSON, or a comma list)")
    p.add_argument(
        "--unset", action="store_true", help="remove KEY from the store (the home's value applies)"
    )
    p.set_defaults(func=cmd_stores_config)
