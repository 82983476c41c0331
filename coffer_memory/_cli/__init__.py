"""The ``coffer`` command: a face over ``MemoryService``.

Start-up is most of a CLI call, so a command imports only what it uses:

- **Commands are registered lazily.** ``COMMANDS`` maps each top-level command to the module of
  this package that defines it; every such module has ``register(sub)``, which adds its commands
  to the subparsers. ``coffer recall ...`` imports ``facts`` alone, and of the parsers it declares
  builds only ``recall``'s (``_Only``); ``coffer``, ``--help``, ``--version``, an unknown command
  and ``coffer completion`` build the whole parser.
  To add a command: write ``register(sub)`` in its module (``add_command``/``add_group`` from
  ``_common``) and add ``"name": "module"`` to ``COMMANDS``; ``tests/test_cli.py`` fails when a
  registered command is missing from the table or the table names one that is not registered.
- **Command modules import lightly at the top.** ``register`` only declares arguments; the
  command function imports what it needs (the agents, organize or transcripts code, tomlkit...)
  inside its body. ``args.func(svc, args)`` runs with a ``MemoryService`` (imported when the
  command runs); ``args.run(args)`` runs without one (config, plugins, completion).
- **The service builds components on first use** (``coffer_memory._service_parts.component``), so a keyword
  recall never imports the organizer, transcripts or agents code.

``tests/test_cli.py::test_keyword_recall_imports_nothing_heavy`` runs ``python -X importtime`` on
a real keyword recall and fails when one of those modules (or pydantic, numpy, httpx...) is
imported; ``bench/cli_startup.py`` measures the call against the python + apsw floor.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import shlex
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .._errors import CofferError, InvalidInput
from .._interrupt import done, ready
from ._common import DIRECTORY, hint, resolve_store_args, usage_error
from ._terminal import inert, inert_stdout

COMMANDS: dict[str, str] = {
    "remember": "facts",
    "recall": "facts",
    "facts": "facts",
    "clear": "facts",
    "stores": "facts",
    "reindex": "facts",
    "doctor": "facts",
    "journal": "lanes",
    "handoff": "lanes",
    "resume": "lanes",
    "memory": "lanes",
    "organize": "lanes",
    "reorg": "lanes",
    "session-context": "lanes",
    "transcripts": "transcripts",
    "distill": "transcripts",
    "forget-session": "transcripts",
    "agents": "agents",
    "audit": "audit",
    "export": "porting",
    "import": "porting",
    "config": "settings",
    "plugins": "meta",
    "completion": "meta",
}
"""Each top-level command and the module of ``coffer_memory._cli`` whose ``register`` adds it."""


def command_in(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs when it is plainly ``[--home HOME] COMMAND ...``; None when the
    whole parser is needed (no command, ``--help``, ``--version``, any other leading option)."""
    tokens = iter(argv)
    for token in tokens:
        if token.startswith("--home="):
            continue
        if token == "--home":
            next(tokens, None)
            continue
        if token.startswith("-"):
            return None
        return token if token in COMMANDS else None
    return None


class _Parser(argparse.ArgumentParser):
    """argparse's parser (and, as their class, its subcommands'), whose usage errors are one line
    naming the command and a pointer to its ``--help`` (``usage_error``)."""

    json_errors = False
    """Set by ``main`` when the command line asks for ``--json``: usage errors are JSON then too."""

    def error(self, message: str) -> NoReturn:
        """Report a usage error of this parser's command (``usage_error``); exit 2."""
        usage_error(self.prog, message, as_json=self.json_errors)


def _asks_json(argv: Sequence[str]) -> bool:
    """``--json`` is among the options (not after ``--``, where every word is text)."""
    words = list(argv)
    return "--json" in (words[: words.index("--")] if "--" in words else words)


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parser.parse_args(argv)``, but an unrecognised argument is blamed on the command that was
    given it (argparse said ``coffer: error: unrecognized arguments`` with the top-level usage),
    and ``--json`` before the command says where it goes."""
    as_json = _Parser.json_errors = _asks_json(argv)
    args, extra = parser.parse_known_args(argv)
    if not extra:
        return args
    prog = " ".join(["coffer", *command_path(args).split()[:2]]) if args.command else "coffer"
    tip = ""
    if "--json" in extra and args.command and not getattr(args, "json", True):
        tip = f"hint: `--json` goes after the command name: `{prog} ... --json`"
    usage_error(prog, f"unrecognized arguments: {' '.join(extra)}", as_json=as_json, tip=tip)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of ``coffer``: every command, or only those of ``command``'s module."""
    from .. import __version__

    parser = _Parser(
        prog="coffer",
        description="Shared local-first memory for coding agents.",
        epilog="`coffer COMMAND --help` describes a command. Exit status: 0 done, 1 a coffer error "
        "(one 'error: CODE: message' line on stderr), 2 a usage error, 130 interrupted.",
    )
    parser.add_argument(
        "--home", help="coffer home (default: $COFFER_HOME or ~/.coffer)"
    ).complete = DIRECTORY  # type: ignore[attr-defined]
    parser.add_argument("--version", action="version", version=f"coffer {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    if command in COMMANDS:
        importlib.import_module(f"{__name__}.{COMMANDS[command]}").register(_Only(sub, command))
    else:
        for name in dict.fromkeys(COMMANDS.values()):
            importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


class _Skipped:
    """What ``add_parser`` gives for a command this call does not run: takes every call, builds nothing."""

    def __getattr__(self, name: str) -> _Skipped:
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> _Skipped:
        return self


class _Only:
    """The subparsers of ``coffer``, building only ``command``'s parser (a parser costs about a
    millisecond to build; a module declares up to a dozen)."""

    def __init__(self, sub: Any, command: str) -> None:
        self._sub = sub
        self._command = command

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        """The real parser for the command that runs; a stand-in for the others."""
        return self._sub.add_parser(name, **kwargs) if name == self._command else _Skipped()


CREATES_HOME = frozenset(
    {
        "remember",
        "journal add",
        "handoff save",
        "memory rules --add",
        "import",
        "distill",
        "agents install",
        "agents native-memory",
        "agents snippet",
        "config set",
    }
)
"""The commands that may create a home named by ``--home`` or ``$COFFER_HOME`` that does not
exist: those that put something in it (and ``agents snippet``, whose MCP server will). Any other command on such a home is refused (a typo'd
path must not become a new, empty home that answers every read with nothing)."""
NO_HOME = frozenset({"plugins", "completion"})  # commands that never read a home


def command_path(args: argparse.Namespace) -> str:
    """The command run, with its subcommand (``"journal add"``, ``"memory rules --add"``)."""
    words = [args.command]
    sub = getattr(args, f"{args.command.replace('-', '_')}_command", None)
    if sub:
        words.append(sub)
    if words == ["memory", "rules"] and getattr(args, "add", None) is not None:
        words.append("--add")
    return " ".join(words)


def check_home(args: argparse.Namespace) -> None:
    """Refuse a read on a home that does not exist (``InvalidInput``, field ``home``): a read
    creates nothing.

    A named home (``--home``, ``$COFFER_HOME``) may be a typo, and the error says how to create
    it; the default home (``~/.coffer``) is just not made yet: no memories yet, and the first
    command that writes makes it (a first ``coffer recall`` made ``~/.coffer`` with an empty index).
    """
    from .._config import DEFAULT_HOME, home_path

    named = args.home if args.home is not None else os.environ.get("COFFER_HOME") or None
    if args.command in NO_HOME or command_path(args) in CREATES_HOME:
        return
    home = home_path(named if named is not None else DEFAULT_HOME)
    if os.path.lexists(home):  # a folder, or what the service refuses as a home (a file...)
        return
    made = shlex.quote(str(home))
    if named is None:
        if hasattr(args, "run"):  # config, agents...: they read no memory, and make no home
            return
        raise InvalidInput(
            f"no memories yet: there is no coffer home at {home} (the default, {DEFAULT_HOME}); "
            "a command that writes creates it (`coffer remember ...`)",
            field="home",
            home=str(home),
        )
    where = "--home" if args.home is not None else "$COFFER_HOME"
    raise InvalidInput(
        f"no coffer home at {home} ({where}); check the path, or create it with "
        f"`mkdir -p {made}` or a command that writes (`coffer --home {made} remember ...`)",
        field="home",
        home=str(home),
    )


def _run(args: argparse.Namespace) -> Any:
    """Run the chosen command: commands about coffer itself open no store, the rest get a service."""
    check_home(args)
    if hasattr(args, "run"):
        return args.run(args)
    from .._config import Settings
    from .._service import MemoryService

    # A command lives too short for an inotify feed to pay off: it reads as a fresh process does.
    with MemoryService(settings=Settings.load(args.home, reconcile_watch=False)) as svc:
        resolve_store_args(svc, args)
        return args.func(svc, args)


TIME_OPTIONS = ("--since", "--until")


def _glued_times(argv: list[str]) -> list[str]:
    """``--since -1d`` as ``--since=-1d``: argparse read a value that starts with ``-`` as an
    option and said ``expected one argument``; a time never starts with ``-`` and a digit
    otherwise. (After ``--`` every word is text, a fact's or a query's.)"""
    out: list[str] = []
    for index, word in enumerate(argv):
        if word == "--":
            return out + argv[index:]
        if out and out[-1] in TIME_OPTIONS and word[:1] == "-" and word[1:2].isdigit():
            out[-1] = f"{out[-1]}={word}"
        else:
            out.append(word)
    return out


def console() -> NoReturn:
    """Console entry point of ``coffer`` (and ``python -m coffer_memory``): ``main`` on the
    process's arguments, then the process ends without the interpreter's teardown (``leave``)."""
    from .._quick_exit import leave

    status = main()
    done()  # a Ctrl-C in the exit handlers ends quietly too
    leave(status)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``coffer``; returns the exit status (1 with the error code on stderr on failure)."""
    argv = _glued_times(sys.argv[1:] if argv is None else list(argv))
    parser = build_parser(command_in(argv))
    args = _parse(parser, argv)
    if args.command is None:
        parser.print_help()
        return 0
    _warnings_on_one_line()
    try:
        ready()  # a console script's quiet Ctrl-C (_coffer_scripts) hands over to the except below
        with inert_stdout():
            status = _run(args)
    except CofferError as exc:
        if getattr(args, "json", False):
            json.dump({"error": exc.to_dict()}, sys.stderr, ensure_ascii=False)
            sys.stderr.write("\n")
        else:
            print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
            tip = hint(exc, args)
            if tip:
                print(tip, file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:  # Ctrl-C: writes are atomic and the index rebuilds, so one line will do
        print("\ninterrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # never a raw traceback: one line here, the traceback in a log file
        where = _log_unexpected(args)
        first = (str(exc).splitlines() or [""])[0]
        print(f"error: unexpected {type(exc).__name__}: {first} ({where})", file=sys.stderr)
        return 1
    return int(status or 0)


class _OneLine(logging.Handler):
    """The library's warnings on stderr as their message alone: Python's last-resort handler
    printed a warning's traceback too (an index write that failed after the fact was durable)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()  # a file name in it may hold a terminal escape
            print(inert(message) if sys.stderr.isatty() else message, file=sys.stderr)  # stderr as it is now
        except Exception:
            self.handleError(record)


def _warnings_on_one_line() -> None:
    logger = logging.getLogger("coffer_memory")
    if not any(isinstance(h, _OneLine) for h in logger.handlers):
        logger.addHandler(_OneLine(logging.WARNING))


def _log_unexpected(args: argparse.Namespace) -> str:
    """Append the current traceback to ``<home>/logs/errors.log`` (the command's name only: its
    arguments may hold what a user asked to remember); says where it went, or that it went
    nowhere (a log that is a link or another user's file gets nothing: ``append_log``)."""
    import traceback
    from datetime import UTC, datetime

    from .._config import Settings
    from .._home import append_log, errors_log_for, temp_errors_log

    entry = f"{datetime.now(UTC).isoformat()} coffer {args.command}\n{traceback.format_exc()}\n"
    try:  # a home this process may only read: outside it (``errors_log_for``)
        log_file = errors_log_for(Settings.load(args.home).home)
    except Exception:
        log_file = temp_errors_log()
    why = ""
    for path in dict.fromkeys((log_file, temp_errors_log())):
        try:
            append_log(path, entry)
        except OSError as exc:
            why = exc.strerror or str(exc)
            continue
        return f"details: see {path}"
    return f"no log kept: {why}"
    return path
