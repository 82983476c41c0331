"""``coffer plugins list`` and ``coffer completion SHELL``: commands about coffer itself (no store opened)."""

from __future__ import annotations

import argparse
from typing import Any

from .._render import table
from ._common import add_command, add_group, emit_json

SHELLS = ("bash", "zsh", "tcsh")


def cmd_plugins_list(args: argparse.Namespace) -> None:
    from ..plugins.manager import plugin_infos

    infos = plugin_infos()
    if args.json:
        emit_json(infos)
        return
    rows = [
        (
            p.name,
            p.source,
            ", ".join(h.removeprefix("register_") for h in p.hooks) or "-",
            p.version or "-",
            (
                "ok"
                if not p.error
                else f"failed to load, skipped: {p.error}"
                if not p.hooks
                else f"some hooks skipped: {p.error}"
            ),
        )
        for p in infos
    ]
    print(table(("plugin", "source", "hooks", "version", "status"), rows))


def cmd_completion(args: argparse.Namespace) -> None:
    import shtab

    from . import build_parser

    print(shtab.complete(build_parser(), shell=args.shell), end="")


def register(sub: Any) -> None:
    """Add ``coffer plugins list`` and ``coffer completion``."""
    psub = add_group(sub, "plugins", "plugins: built-ins and installed ones, with their hooks")
    p = add_command(psub, "list", "every plugin: source, hooks, version, and why it failed to load")
    p.set_defaults(run=cmd_plugins_list)

    p = sub.add_parser(
        "completion",
        help="print a shell completion script",
        description="Print a completion script for SHELL. For example, in ~/.bashrc: "
        'eval "$(coffer completion bash)"; for zsh: coffer completion zsh > "${fpath[1]}/_coffer".',
    )
    p.add_argument("shell", choices=SHELLS, help="the shell: " + ", ".join(SHELLS))
    p.set_defaults(run=cmd_completion)
