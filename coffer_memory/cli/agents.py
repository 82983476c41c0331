"""``coffer agents``: install coffer's session hooks and MCP entry into Claude Code, Codex, OpenCode."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..agents.homes import AGENTS
from ..render import table
from ._common import add_command, emit_json

if TYPE_CHECKING:
    from ..agents.install import AgentChange, AgentStatus
    from ..service import MemoryService

AGENT_HELP = "the agent: " + ", ".join(AGENTS)


def _yes(flag: bool, supported: bool = True) -> str:
    return "n/a" if not supported else "yes" if flag else "no"


def _print_status(status: AgentStatus) -> None:
    state = "installed" if status.installed else "not installed"
    if status.installed and not status.up_to_date:
        state += " (out of date: run `coffer agents install` again)"
    print(f"{status.label} ({status.name}): {state}")
    print(f"  session hooks:   {_yes(status.hooks_installed, status.hooks_supported)}")
    print(f"  MCP server:      {_yes(status.mcp_registered)}")
    native = "switched off by coffer" if status.disable_native_memory else "left alone"
    print(f"  native memory:   {native if status.native_memory_supported else 'n/a'}")
    if status.hook_command:
        print(f"  hook command:    {status.hook_command}")
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
    else:
        print(f"{change.status.label}: nothing to change")
    for note in change.status.notes:
        print(f"note: {note}")


def cmd_list(svc: MemoryService, args: argparse.Namespace) -> None:
    statuses = svc.agents()
    if args.json:
        emit_json(statuses)
        return
    rows = [
        (
            s.name,
            _yes(s.installed) + ("" if s.up_to_date or not s.installed else " (out of date)"),
            _yes(s.hooks_installed, s.hooks_supported),
            _yes(s.mcp_registered),
            _yes(s.disable_native_memory, s.native_memory_supported),
        )
        for s in statuses
    ]
    print(table(("agent", "installed", "hooks", "mcp", "native memory off"), rows))


def cmd_status(svc: MemoryService, args: argparse.Namespace) -> None:
    status = svc.agent_status(args.agent)
    emit_json(status) if args.json else _print_status(status)


def cmd_install(svc: MemoryService, args: argparse.Namespace) -> None:
    change = svc.install_agent(args.agent, disable_native_memory=True if args.disable_native_memory else None)
    emit_json(change) if args.json else _print_change(change, "installed")


def cmd_uninstall(svc: MemoryService, args: argparse.Namespace) -> None:
    change = svc.uninstall_agent(args.agent)
    emit_json(change) if args.json else _print_change(change, "uninstalled")


def cmd_native_memory(svc: MemoryService, args: argparse.Namespace) -> None:
    change = svc.set_native_memory(args.agent, args.disable)
    done = "native memory switched off" if args.disable else "native memory settings restored"
    emit_json(change) if args.json else _print_change(change, done)


def register(sub: Any) -> None:
    """Add ``coffer agents list|status|install|uninstall|native-memory``."""
    agents = add_command(sub, "agents", "connect coffer to Claude Code, Codex and OpenCode")
    agents.set_defaults(func=cmd_list)
    asub = agents.add_subparsers(dest="agents_command", metavar="COMMAND")

    p = add_command(asub, "list", "every known agent: installed or not, native memory state")
    p.set_defaults(func=cmd_list)

    p = add_command(asub, "status", "what coffer installed for one agent, and in which files")
    p.add_argument("agent", choices=AGENTS, help=AGENT_HELP)
    p.set_defaults(func=cmd_status)

    p = add_command(asub, "install", "add coffer's session hooks and MCP server to an agent's config")
    p.add_argument("agent", choices=AGENTS, help=AGENT_HELP)
    p.add_argument(
        "--disable-native-memory",
        action="store_true",
        help="also switch the agent's own memory off (restored by uninstall)",
    )
    p.set_defaults(func=cmd_install)

    p = add_command(asub, "uninstall", "remove coffer's entries, leaving the files as they were")
    p.add_argument("agent", choices=AGENTS, help=AGENT_HELP)
    p.set_defaults(func=cmd_uninstall)

    p = add_command(asub, "native-memory", "switch an agent's own memory off, or restore its settings")
    p.add_argument("agent", choices=AGENTS, help=AGENT_HELP)
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--disable", dest="disable", action="store_true", help="switch it off")
    group.add_argument("--restore", dest="disable", action="store_false", help="put back the user's settings")
    p.set_defaults(func=cmd_native_memory)
