"""``coffer agents``: install coffer's session hooks and MCP entry into Claude Code, Codex, OpenCode."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

import attrs

from .._agents.health import build_status
from .._agents.homes import AGENTS, AgentHomes
from .._agents.install import AgentChange
from .._agents.probe import DEFAULT_TIMEOUT_SECONDS, MCP_EXTRA_COMMAND, mcp_sdk_problem
from .._agents.shadows import mcp_shadows
from .._agents.snippets import SNIPPET_CLIENTS, mcp_snippet
from .._render import table
from ._common import add_command, add_cwd, emit_json

if TYPE_CHECKING:
    from .._agents.install import AgentStatus
    from .._config import Settings
    from .._service import MemoryService

AGENT_HELP = "the agent: " + ", ".join(AGENTS)


def _yes(flag: bool, supported: bool = True) -> str:
    return "n/a" if not supported else "yes" if flag else "no"


def _state(status: AgentStatus, shadowed: bool) -> str:
    if not status.installed:
        return "not installed"
    if not status.up_to_date:
        return "installed, out of date: run `coffer agents install` again"
    if not status.working or shadowed:
        return "installed, but not working yet (see below)"
    return "installed"


def _hooks_line(status: AgentStatus) -> str:
    line = _yes(status.hooks_installed, status.hooks_supported)
    pending = [t for t in status.hook_review if t.state != "trusted"]
    if status.hooks_installed and status.hook_review:
        line += ", trusted in Codex" if not pending else f", but {pending[0].describe()}"
    return line


def _mcp_line(status: AgentStatus) -> str:
    line = "registered" if status.mcp_registered else "no (session hooks only)" if status.hooks_only else "no"
    check = status.mcp_check
    if check is not None:
        line += f"; {check.summary()}"
    return line


def _print_status(status: AgentStatus, shadowed: bool = False) -> None:
    print(f"{status.label} ({status.name}): {_state(status, shadowed)}")
    print(f"  session hooks:   {_hooks_line(status)}")
    print(f"  MCP server:      {_mcp_line(status)}")
    native = "switched off by coffer" if status.disable_native_memory else "left alone"
    print(f"  native memory:   {native if status.native_memory_supported else 'n/a'}")
    if status.hook_command:  # what is installed: no line for a part that is not
        print(f"  hook command:    {status.hook_command}")
    if status.mcp_command:
        print(f"  MCP command:     {status.mcp_command}")
    for path in status.files:
        print(f"  file:            {path}")
    for note in status.notes:
        print(f"  note: {note}")


def _print_change(change: AgentChange, done: str) -> None:
    if change.changed:
        print(f"{change.status.label}: {done}; changed:")
        for path in change.changed:
            print(f"  {path}" + ("" if path.exists() else "  (removed: coffer had created it)"))
        for folder in change.removed_folders:
            print(f"  {folder}{os.sep}  (removed: coffer had created it, and it is empty)")
    else:
        print(f"{change.status.label}: nothing to change")
    for note in (*change.notes, *change.status.notes):
        print(f"note: {note}")
    if change.status.mcp_check is not None:
        print(f"MCP server: {_mcp_line(change.status)}")
    for trust in change.status.hook_review:
        if trust.state != "trusted":
            print(f"hook: {trust.describe()}")


def _settings(args: argparse.Namespace) -> Settings:
    from .._config import Settings

    return Settings.load(args.home, reconcile_watch=False)


def cmd_list(args: argparse.Namespace) -> None:
    # Read from the agents' files alone: no store is opened, and no home is made for a look.
    homes, home = AgentHomes.from_env(), _settings(args).home
    statuses = [build_status(name, homes, home) for name in AGENTS]
    if args.json:
        emit_json(statuses)
        return
    rows = [
        (
            s.name,
            _yes(s.installed) + ("" if s.up_to_date or not s.installed else " (out of date)"),
            _yes(s.hooks_installed, s.hooks_supported)
            + ("" if all(t.state == "trusted" for t in s.hook_review) else " (not trusted in the agent)"),
            _yes(s.mcp_registered),
            _yes(s.disable_native_memory, s.native_memory_supported),
        )
        for s in statuses
    ]
    print(table(("agent", "installed", "hooks", "mcp", "native memory off"), rows))


def _shadow_notes(homes: AgentHomes | None, status: AgentStatus, cwd: str | None) -> tuple[str, ...]:
    """A note for each project-level entry that replaces coffer's MCP entry for a session in ``cwd``."""
    homes = homes or AgentHomes.from_env()
    return tuple(s.describe(status.label) for s in mcp_shadows(status.name, homes, cwd or "."))


def cmd_status(args: argparse.Namespace) -> int:
    from .._optout import optout_for

    settings = _settings(args)  # as `agents list`: the files alone, no store opened, no home made
    homes = AgentHomes.from_env()
    status = build_status(args.agent, homes, settings.home, check_mcp=args.check, timeout=args.timeout)
    optout = optout_for(args.cwd if args.cwd is not None else os.getcwd(), settings.projects.exclude)
    if optout is not None:  # in the notes, so --json carries it too
        note = f"this project {optout.describe()}: no session-start bundle, no distillation"
        status = attrs.evolve(status, notes=(*status.notes, note))
    # The agent runs another server in this project: coffer's entry, checked above, is not used.
    shadows = _shadow_notes(homes, status, args.cwd)
    status = attrs.evolve(status, notes=(*status.notes, *shadows))
    emit_json(status) if args.json else _print_status(status, shadowed=bool(shadows))
    return 0 if (status.working and not shadows) or not status.installed else 1


def _with_service(args: argparse.Namespace) -> Any:
    """Run a command that writes (``args.func``) on a service; the parent ``agents`` command, which
    lists, opens none, so every subcommand names how it runs (``run``)."""
    from .._service import MemoryService

    settings = _settings(args)
    if args.agents_command == "uninstall" and not settings.home.exists():
        # ~/.coffer not made yet (or deleted): open no service, which would make it. Entries left in
        # an agent's config are removed without it (no registry: nothing to record or audit).
        from .._agents.service import Agents

        change = Agents(settings, None).uninstall_agent(args.agent)
        emit_json(change) if args.json else _print_change(change, "uninstalled")
        return None
    with MemoryService(settings=settings) as svc:
        return args.func(svc, args)


def cmd_install(svc: MemoryService, args: argparse.Namespace) -> int:
    change = svc.install_agent(
        args.agent,
        disable_native_memory=True if args.disable_native_memory else None,
        hooks_only=args.hooks_only,
        force=args.force,
    )
    if args.check and not args.hooks_only:  # what the agent will get: start the server it now runs
        change = attrs.evolve(
            change, status=svc.agent_status(args.agent, check_mcp=True, timeout=args.timeout)
        )
    # Run in a project that has its own `coffer` entry, the agent will not use the one just installed.
    notes = (*change.status.notes, *_shadow_notes(svc.agent_homes, change.status, None))
    change = attrs.evolve(change, status=attrs.evolve(change.status, notes=notes))
    emit_json(change) if args.json else _print_change(change, "installed")
    check = change.status.mcp_check
    return 1 if check is not None and not check.ok else 0


def cmd_uninstall(svc: MemoryService, args: argparse.Namespace) -> None:
    change = svc.uninstall_agent(args.agent)
    emit_json(change) if args.json else _print_change(change, "uninstalled")


def cmd_native_memory(svc: MemoryService, args: argparse.Namespace) -> None:
    change = svc.set_native_memory(args.agent, args.disable)
    done = "native memory switched off" if args.disable else "native memory settings restored"
    emit_json(change) if args.json else _print_change(change, done)


def cmd_snippet(svc: MemoryService, args: argparse.Namespace) -> None:
    snippet = mcp_snippet(args.client, svc.home)
    if args.json:
        emit_json(snippet)
        return
    # The explanation goes to stderr, so `coffer agents snippet cursor > mcp.json` is pure JSON.
    print(f"# {snippet.label}: merge this into the top-level object of", file=sys.stderr)
    for path in snippet.files:
        print(f"#   {path}", file=sys.stderr)
    print(f"# format: {snippet.source}", file=sys.stderr)
    if (problem := mcp_sdk_problem()) is not None:  # the entry would start a server that cannot run
        print(f"# warning: {problem}, so this coffer-mcp cannot start: {MCP_EXTRA_COMMAND}", file=sys.stderr)
    print(json.dumps(snippet.config, indent=2))


def _add_check(p: argparse.ArgumentParser, help_text: str) -> None:
    p.add_argument("--check", action=argparse.BooleanOptionalAction, default=True, help=help_text)
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_SECONDS,
        help=f"seconds the MCP server gets to answer (default {DEFAULT_TIMEOUT_SECONDS:g})",
    )


def register(sub: Any) -> None:
    """Add ``coffer agents list|status|install|uninstall|native-memory``."""
    agents = add_command(sub, "agents", "connect coffer to Claude Code, Codex and OpenCode")
    agents.set_defaults(run=cmd_list)
    asub = agents.add_subparsers(dest="agents_command", metavar="COMMAND")

    p = add_command(asub, "list", "every known agent: installed or not, native memory state")
    p.set_defaults(run=cmd_list)

    p = add_command(asub, "status", "what coffer installed for one agent, and whether it works")
    p.add_argument("agent", choices=AGENTS, help=AGENT_HELP)
    _add_check(p, "start the registered MCP server and ask it for its tools (default)")
    add_cwd(p, "directory whose repository's opt-out and project MCP entries to show (default: .)")
    p.set_defaults(run=cmd_status)

    p = add_command(asub, "install", "add coffer's session hooks and MCP server to an agent's config")
    p.add_argument("agent", choices=AGENTS, help=AGENT_HELP)
    p.add_argument(
        "--disable-native-memory",
        action="store_true",
        help="also switch the agent's own memory off (restored by uninstall)",
    )
    p.add_argument(
        "--hooks-only",
        action="store_true",
        help="register the session hooks alone, without the MCP server (which needs the [mcp] extra: "
        "pip install 'coffer-memory[mcp]'); install again without it to add the server",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace a 'coffer' MCP entry of your own (one that does not run coffer-mcp), which "
        "install otherwise refuses to touch; uninstall puts it back",
    )
    _add_check(p, "then start the MCP server as the agent will and report whether it answers (default)")
    p.set_defaults(run=_with_service, func=cmd_install)

    p = add_command(asub, "uninstall", "remove coffer's entries, leaving the files as they were")
    p.add_argument("agent", choices=AGENTS, help=AGENT_HELP)
    p.set_defaults(run=_with_service, func=cmd_uninstall)

    p = add_command(asub, "snippet", "print coffer's MCP entry for Claude Desktop, Cursor or VS Code")
    p.add_argument("client", choices=SNIPPET_CLIENTS, help="the MCP client whose config format to use")
    p.set_defaults(run=_with_service, func=cmd_snippet)

    p = add_command(asub, "native-memory", "switch an agent's own memory off, or restore its settings")
    p.add_argument("agent", choices=AGENTS, help=AGENT_HELP)
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--disable", dest="disable", action="store_true", help="switch it off")
    group.add_argument("--restore", dest="disable", action="store_false", help="put back the user's settings")
    p.set_defaults(run=_with_service, func=cmd_native_memory)
