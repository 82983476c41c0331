"""``Porting``: export the stores of a home, import memory from coffer and from other tools.

A component of ``MemoryService`` (``svc.porting``). An import reads and checks the whole source
first (bad input is an ``InvalidImport`` before anything is written), then runs its writes as a
dry run (the content checks raise here, so a ``secrets = "reject"`` store is never half-imported),
then, unless ``dry_run``, for real.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import IO

import attrs

from .._agents.homes import AgentHomes
from .._config import Settings
from .._core import Facts
from .._errors import InvalidImport, InvalidInput, StorageFull
from .._jsontext import loads as json_loads
from .._models import Target
from .._scope import find_git, project_id_for
from .._store.files import stream_outside_store
from .._store.paths import GLOBAL_STORE, store_name_for_project
from .._store.scan import odd_kind, open_regular
from .._store.writer import Writer
from .._stores import Stores
from .._targets import PathLike, Targets, store_list
from . import archive, basic_memory, claude_code, export, mcp_memory, rules_files
from .apply import Applier, CheckMemo, Progress
from .archive import Reading
from .common import Plan
from .models import (
    EXPORT_FORMATS,
    IMPORT_KINDS,
    ExportFormat,
    ExportReport,
    ImportEntry,
    ImportKind,
    ImportReport,
)

# How many transcript files of a Claude Code project are read for their ``cwd``, and how much of each.
_TRANSCRIPTS = 5
_TRANSCRIPT_HEAD = 64 * 1024


def _two_passes(progress: Progress | None) -> tuple[Progress | None, Progress | None]:
    """``progress`` split over the check pass and the write pass: steps 1..n, then n+1..2n of 2n."""
    if progress is None:
        return None, None
    report = progress

    def checked(done: int, total: int, entry: ImportEntry) -> None:
        report(done, 2 * total, entry)

    def written(done: int, total: int, entry: ImportEntry) -> None:
        report(total + done, 2 * total, entry)

    return checked, written


class Porting:
    """Export and import for one home."""

    def __init__(
        self, settings: Settings, writer: Writer, targets: Targets, facts: Facts, stores: Stores
    ) -> None:
        self.settings = settings
        self.writer = writer
        self.targets = targets
        self.facts = facts
        self.stores = stores

    @property
    def max_file_bytes(self) -> int:
        """The largest file an import reads or an export carries (``[memory] max_file_bytes``)."""
        return self.settings.memory.max_file_bytes

    # -- export --------------------------------------------------------------------------------
    def export_bytes(
        self, *, stores: Iterable[str] | None = None, format: ExportFormat = "zip"
    ) -> tuple[bytes, ExportReport]:
        """The export of ``stores`` (default: every store) as bytes, and its report."""
        out = io.BytesIO()
        report = self.export_memory(out, stores=stores, format=format)
        return out.getvalue(), report

    def export_memory(
        self,
        dest: PathLike | IO[bytes],
        *,
        stores: Iterable[str] | None = None,
        format: ExportFormat = "zip",
    ) -> ExportReport:
        """Write the export to a file (streamed to a temp file beside it, renamed over it when
        complete, mode 0600) or a binary stream (written once complete). ``InvalidExport`` (and
        nothing written) when this coffer's import would refuse it."""
        if format not in EXPORT_FORMATS:
            raise InvalidInput(f"format must be one of {', '.join(EXPORT_FORMATS)}", field="format")
        if not isinstance(dest, str | os.PathLike):
            with tempfile.TemporaryFile() as spool:  # a refused export writes nothing to ``dest``
                report = self._export(spool, stores, format, None)
                spool.seek(0)
                shutil.copyfileobj(spool, dest, 1 << 20)
            return report
        path = Path(os.path.abspath(dest))
        try:
            folder = path.is_dir()  # a name past NAME_MAX or PATH_MAX is ENAMETOOLONG here, not False
        except OSError as exc:
            raise InvalidInput(f"cannot write the export to {path}: {exc.strerror}", field="dest") from None
        if folder:
            raise InvalidInput(f"{path} is a folder: name the file to write the export to", field="dest")
        if not os.path.lexists(path.parent):  # a typo in the folder would have created it, silently
            raise InvalidInput(f"folder {path.parent} does not exist: create it first", field="dest")
        try:
            with stream_outside_store(path, mode=0o600, temp_prefix=".tmp-coffer-export-") as handle:
                report = self._export(handle, stores, format, path.parent)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                raise StorageFull(str(path), os.strerror(exc.errno or 0)) from None
            raise InvalidInput(f"cannot write the export to {path}: {exc.strerror}", field="dest") from None
        return attrs.evolve(report, path=path)

    def _export(
        self, out: IO[bytes], stores: Iterable[str] | None, format: ExportFormat, spool: Path | None
    ) -> ExportReport:
        """Stream the export to ``out`` (seekable and readable) and read it back for its sha256."""
        names = list(dict.fromkeys(store_list(stores))) if stores is not None else self.stores.names()
        paths = [self.targets.paths(name) for name in names]
        if format == "zip":
            written = export.write_zip(out, paths, self.writer.settled, self.max_file_bytes)
        else:
            written = export.write_jsonl(out, paths, self.writer.settled, self.max_file_bytes, spool)
        out.flush()
        size = out.seek(0, os.SEEK_END)
        out.seek(0)
        digest = hashlib.sha256()
        while chunk := out.read(1 << 20):
            digest.update(chunk)
        return ExportReport(
            format=format, stores=written.stores, files=written.files, size=size, sha256=digest.hexdigest()
        )

    # -- import --------------------------------------------------------------------------------
    def detect(self, source: Path) -> ImportKind:
        """The kind of an import source, told from its name and content (``InvalidImport`` if none fits)."""
        if source.is_file():
            with archive.open_source(source) as handle:
                head = handle.read(4)
            if head.startswith(b"PK"):
                return "coffer"
            if rules_files.is_rules_file(source):
                return "rules"
            first = _first_line(source)
            if first.get("record") == "manifest":
                return "coffer"
            if first.get("type") in ("entity", "relation"):
                return "mcp-memory"
        elif source.is_dir():
            if claude_code.looks_like(source):
                return "claude-code"
            if rules_files.looks_like(source):
                return "rules"
            if basic_memory.looks_like(source):
                return "basic-memory"
        elif not source.exists():
            raise InvalidImport("not_found", f"{source} does not exist", source=str(source))
        raise InvalidImport(
            "unknown_format",
            f"cannot tell what {source} is; name its kind ({', '.join(IMPORT_KINDS)})",
            source=str(source),
        )

    def import_memory(
        self,
        source: PathLike | None = None,
        *,
        kind: ImportKind | None = None,
        store: str | None = None,
        dry_run: bool = False,
        progress: Progress | None = None,
        reading: Reading | None = None,
    ) -> ImportReport:
        """Import ``source`` (its ``kind`` told from it when not given) into the matching stores.

        ``store``: for a coffer export, only that store; for the other kinds, the one store every
        entry goes to. ``source=None`` means Claude Code's folder (``kind="claude-code"``) or the
        current directory (``kind="rules"``). ``progress(done, total, entry)`` is called after each
        step: an import that writes checks every entry first (nothing is written until all pass),
        then writes them, so ``total`` is twice the entries; a dry run only plans them. Before
        that, a coffer export is read and each file checked against its manifest: ``reading(done,
        total)`` is called after each (``total`` None for JSONL, not counted ahead).
        """
        if kind is not None and kind not in IMPORT_KINDS:
            raise InvalidInput(f"kind must be one of {', '.join(IMPORT_KINDS)}", field="kind")
        if store is not None:
            store = self.targets.paths(store).name
        path = self._source_path(source, kind)
        kind = kind or self.detect(path)
        with ExitStack() as stack:  # a coffer export stays open: its files are read as written
            resolver = _Resolver(self.targets, self.stores)
            items, skipped = self._plan(path, kind, store, resolver, stack, reading)
            write_progress = progress
            plan: Applier | None = None  # the check pass: what the writing pass embeds ahead
            memo = CheckMemo()  # each text is scanned once, in the first pass
            if not dry_run:  # the content checks raise in this pass, before any write
                # The secret scan of every text is done here: the progress counts both passes, or a
                # bar would sit at nothing for minutes on a large archive.
                checks, write_progress = _two_passes(progress)
                plan = Applier(self.writer, dry_run=True, progress=checks, source=str(path), memo=memo)
                plan.run(items)
            index = self.facts.index
            entries = Applier(
                self.writer,
                dry_run=dry_run,
                progress=write_progress,
                source=str(path),
                memo=memo,
                ahead=index.embedding_ahead,
            ).run(items, plan=plan)
            if not dry_run:
                changed = {e.store for e in entries if e.action in ("created", "updated") and e.store}
                self._record_checkouts(resolver.checkouts, changed)
                for name in changed:
                    self.facts.events.wrote(name)
            entries += [ImportEntry("skipped", s.source, reason=s.reason) for s in skipped]
            return ImportReport(kind=kind, source=str(path), dry_run=dry_run, entries=tuple(entries))

    def _source_path(self, source: PathLike | None, kind: ImportKind | None) -> Path:
        if source is not None:
            # The source the user names may be a link (dotfiles often are); links inside it are skipped.
            path = Path(os.path.realpath(os.path.expanduser(os.fspath(source))))
            try:
                mode = os.stat(path).st_mode
            except OSError:
                raise InvalidImport("not_found", "does not exist", source=str(path)) from None
            if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):  # a FIFO blocked the read for ever
                raise InvalidImport(
                    "not_regular", f"{path} is {odd_kind(mode)}: import reads files", source=str(path)
                )
            return path
        if kind == "claude-code":
            return AgentHomes.from_env().claude
        if kind == "rules":
            return Path(os.getcwd())
        raise InvalidInput("name the file or folder to import", field="source")

    def _plan(
        self,
        path: Path,
        kind: ImportKind,
        store: str | None,
        resolver: _Resolver,
        stack: ExitStack,
        reading: Reading | None = None,
    ) -> Plan:
        limit = self.max_file_bytes
        if kind == "coffer":
            if path.is_dir():
                raise InvalidImport(
                    "unknown_format", "a coffer export is a .zip or .jsonl file", source=str(path)
                )
            with archive.open_source(path) as handle:
                zipped = handle.read(4).startswith(b"PK")
            _, files = (archive.read_zip if zipped else archive.read_jsonl)(path, limit, stack, reading)
            return [f for f in files if store is None or f.store == store], []
        if kind == "claude-code":
            return claude_code.plan(path, resolver, store, limit)
        if kind == "rules":
            return rules_files.plan(
                path, store or resolver.project_store(path if path.is_dir() else path.parent), limit
            )
        if kind == "mcp-memory":
            return mcp_memory.plan(path, store or GLOBAL_STORE, limit)
        return basic_memory.plan(path, store or GLOBAL_STORE, limit)

    def _record_checkouts(self, checkouts: dict[str, Target], stores: set[str]) -> None:
        """Give a store an import created its checkout (``store.json``), as ``remember`` would."""
        for name in sorted(stores):
            target = checkouts.get(name)
            if target is None or target.project_root is None:
                continue
            self.facts.index.record_project_root(name, target.project_root)
            with self.writer.transaction(name) as tx:
                self.targets.record_checkout(tx, target)


class _Resolver:
    """The stores one import's entries belong to (a ``StoreResolver``), and the checkouts it saw."""

    def __init__(self, targets: Targets, stores: Stores) -> None:
        self.targets = targets
        self.stores = stores
        self.checkouts: dict[str, Target] = {}
        self._roots: list[tuple[str, str]] | None = None

    def project_store(self, path: Path) -> str:
        """The project store of the repository that contains ``path``."""
        target = self.targets.resolve(cwd=path, scope="project")
        self.checkouts.setdefault(target.store, target)
        return target.store

    def claude_project_store(self, encoded: str, transcripts: Path) -> str | None:
        """The store of the project Claude Code files under ``projects/<encoded>/``: a root coffer
        knows, else a ``cwd`` of the transcripts there (or its git root), whose encoding matches."""
        if self._roots is None:  # once per import: listing the stores reads every store.json
            self._roots = [(i.project_root, i.name) for i in self.stores.stores() if i.project_root]
        for root, name in self._roots:
            if claude_code.encode_path(root) == encoded[: claude_code.MAX_ENCODED]:
                return name
        for cwd in _transcript_cwds(transcripts):
            git = find_git(cwd) if os.path.isdir(cwd) else None
            roots = [str(git.toplevel)] if git is not None else []
            for root in [*roots, cwd]:
                if claude_code.encode_path(root) == encoded[: claude_code.MAX_ENCODED]:
                    if git is not None and root == str(git.toplevel):
                        return self.project_store(Path(cwd))
                    return store_name_for_project(project_id_for(root))
        return None


def _first_line(path: Path) -> dict[str, object]:
    try:
        with open_regular(path) as handle:
            line = handle.readline(_TRANSCRIPT_HEAD)
        value = json_loads(line)
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _transcript_cwds(folder: Path) -> list[str]:
    """The ``cwd`` values of the newest few transcripts in a Claude Code project folder."""
    try:
        files = sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)[:_TRANSCRIPTS]
    except OSError:
        return []
    found: list[str] = []
    for path in files:
        try:
            with open_regular(path) as handle:
                head = handle.read(_TRANSCRIPT_HEAD)
        except OSError:
            continue
        for line in head.splitlines():
            try:
                cwd = json_loads(line).get("cwd")
            except (ValueError, AttributeError):
                continue
            if isinstance(cwd, str) and cwd not in found:
                found.append(cwd)
    return found


__all__ = ["Porting"]
