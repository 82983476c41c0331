"""Writing a coffer export (zip or JSONL, the layout in ``archive``), streamed, within import's limits.

The files go out one at a time, each store's under its write lock, so an export never holds the
stores in memory. Whatever the import of this coffer would refuse is refused here first, with
an ``InvalidExport`` that names the file and the limit: a file over ``[memory] max_file_bytes``,
a file holding a NUL byte, a file it cannot read (a backup one file short), a name import refuses, two names that are one file on macOS or
Windows, more members or bytes than import reads, a manifest over its cap, a ratio import takes
for a zip bomb. Bytes that are not UTF-8 are carried as they are (import restores them).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, NamedTuple

from .._errors import InvalidExport
from .._store.files import FactParseError, format_time, parse_fact, read_bytes, sha256_bytes
from .._store.paths import StorePaths, is_recall_rel
from .._store.scan import utf8_name
from .._version import __version__
from . import archive
from .archive import FORMAT, FORMAT_VERSION, MANIFEST, STORES_DIR

Locked = Callable[[str], AbstractContextManager[None]]


class Written(NamedTuple):
    """What an export holds: its stores, in order, and how many files."""

    stores: tuple[str, ...]
    files: int


def truth_files(sp: StorePaths, max_bytes: int) -> Iterator[tuple[str, bytes]]:
    """Every regular, visible file of a store as ``(path in store, bytes)``, sorted; symbolic links
    and hidden entries (temp files of a writer among them) are left out. A file import would refuse
    (over ``max_bytes``, a NUL byte, a name it refuses), or one that cannot be read, is
    ``InvalidExport``; one deleted since the walk is left out."""
    if not sp.root.is_dir() or sp.root.is_symlink():
        return
    found: list[str] = []
    # Plain strings, not ``Path`` objects: two of them a file were a tenth of a 10k export's time.
    root = os.path.abspath(sp.root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        folder = os.path.relpath(dirpath, root).replace(os.sep, "/")
        for name in filenames:
            if name.startswith(".") or not _regular(os.path.join(dirpath, name)):
                continue
            found.append(name if folder == "." else f"{folder}/{name}")
    for rel in sorted(found):
        member = f"{STORES_DIR}/{sp.name}/{rel}"
        if not utf8_name(rel) or archive.unsafe_name(rel):
            shown = os.fsencode(rel).decode("utf-8", "backslashreplace")
            raise InvalidExport(
                "unsafe_path",
                f"{STORES_DIR}/{sp.name}/{shown}: a file name import refuses (not UTF-8, a control "
                f"character, or a name over {archive.MAX_NAME_BYTES} bytes); rename the file",
                member=member,
            )
        try:
            data, _ = read_bytes(sp.root / rel, max_bytes=max_bytes)
        except FactParseError:  # over the cap: FileTooLarge
            raise InvalidExport(
                "too_large",
                f"{member} is over [memory] max_file_bytes ({max_bytes} bytes), which import reads",
                member=member,
                limit=max_bytes,
            ) from None
        except (FileNotFoundError, NotADirectoryError):  # gone since the walk
            continue
        except OSError as e:  # not readable: a backup one fact short must not say it is whole
            raise InvalidExport(
                "unreadable",
                f"{member} cannot be read ({e.strerror or type(e).__name__}); fix its permissions "
                "or move it out of the store",
                member=member,
            ) from None
        nul = data.find(b"\x00")
        if nul >= 0:
            raise InvalidExport(
                "not_text",
                f"{member} holds a NUL byte at offset {nul}: binary, which no store holds and import "
                "refuses; move it out of the store",
                member=member,
            )
        yield rel, data


def _regular(path: str) -> bool:
    """``path`` is a regular file (not a link, FIFO, socket or device); False once it is gone."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):  # deleted or renamed since the folder was listed
        return False


def lane_of(relpath: str) -> str:
    """The lane a store-relative path belongs to (``store`` for ``store.json``)."""
    head = relpath.split("/", 1)[0]
    if head in ("knowledge", "journal", "rules", "handoff", "superseded"):
        return head
    if relpath == "consolidation-log.md":
        return "consolidation-log"
    return "store" if relpath == "store.json" else "other"


def _manifest(stores: list[dict[str, Any]], files: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "coffer_version": __version__,
        "created_at": format_time(datetime.now(UTC)),
        "stores": stores,
        "files": files,
    }


class _Guard:
    """Import's limits, counted while an export is written."""

    def __init__(self, *, zipped: bool) -> None:
        self.zipped = zipped  # import counts a zip's members; a JSONL export only by its size
        self.files = 0
        self.total = 0
        self._names: dict[tuple[str, str], str] = {}

    def add(self, store: str, rel: str, size: int) -> None:
        member = f"{STORES_DIR}/{store}/{rel}"
        other = self._names.setdefault((store, archive.fold(rel)), member)
        if other != member:
            raise InvalidExport(
                "collision",
                f"{other} and {member} differ only by case or Unicode normalisation: one file on "
                "macOS and Windows, which import refuses; rename one of them",
                member=member,
            )
        self.files += 1
        if self.zipped and self.files + 1 > archive.MAX_MEMBERS:  # + manifest.json
            raise InvalidExport(
                "too_large",
                f"more than {archive.MAX_MEMBERS} members (the files and manifest.json), which import "
                "refuses; export fewer stores at a time (--store)",
                limit=archive.MAX_MEMBERS,
            )
        self.grow(size)

    def grow(self, size: int) -> None:
        self.total += size
        if self.total > archive.MAX_TOTAL_BYTES:
            raise InvalidExport(
                "too_large",
                f"more than {archive.MAX_TOTAL_BYTES} bytes, which import refuses; export fewer "
                "stores at a time (--store)",
                limit=archive.MAX_TOTAL_BYTES,
            )

    def ratio(self, bombed: int) -> None:
        """``bombed``: ``archive.bombed_bytes`` of the members written."""
        if bombed > archive.BOMB_FLOOR_BYTES:
            raise InvalidExport(
                "too_large",
                f"{bombed} bytes of files that pack over {archive.MAX_UNPACK_RATIO} times, which "
                "import takes for a zip bomb; export as JSONL (--format jsonl)",
                limit=archive.MAX_UNPACK_RATIO,
            )


class _Appending:
    """``out`` as a stream zipfile cannot seek: it writes each member once, in order."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._offset = 0

    def write(self, data: bytes, /) -> int:
        self._out.write(data)
        self._offset += len(data)
        return len(data)

    def tell(self) -> int:
        return self._offset

    def flush(self) -> None:
        self._out.flush()

    def close(self) -> None:
        """Left to the caller, who opened ``out``."""


def write_zip(out: IO[bytes], stores: list[StorePaths], locked: Locked, max_bytes: int) -> Written:
    """Stream the zip export of ``stores`` to ``out`` (seekable)."""
    guard = _Guard(zipped=True)
    listed: list[dict[str, Any]] = []
    files: list[dict[str, Any]] = []
    stamp = datetime.now(UTC).timetuple()[:6]
    # Appended, never sought back: on a file zipfile rewrote each member's header after its data
    # (a seek, a write and a seek back, each flushing the buffer: 4 system calls a member, the
    # 10k export's regression in session 14); now each member's sizes follow it (a data descriptor).
    with zipfile.ZipFile(_Appending(out), "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for sp in stores:
            count = 0
            with locked(sp.name):  # one store's files as of one moment
                for rel, data in truth_files(sp, max_bytes):
                    guard.add(sp.name, rel, len(data))
                    member = f"{STORES_DIR}/{sp.name}/{rel}"
                    info = zipfile.ZipInfo(member, date_time=stamp)
                    info.compress_type = zipfile.ZIP_DEFLATED
                    info.external_attr = (stat.S_IFREG | 0o600) << 16
                    zf.writestr(info, data)
                    files.append(
                        {"path": member, "store": sp.name, "size": len(data), "sha256": sha256_bytes(data)}
                    )
                    count += 1
            listed.append({"name": sp.name, "files": count})
        manifest = json.dumps(_manifest(listed, files), indent=2, ensure_ascii=False).encode()
        if len(manifest) > archive.MAX_MANIFEST_BYTES:
            raise InvalidExport(
                "too_large",
                f"manifest.json would be {len(manifest)} bytes, over the {archive.MAX_MANIFEST_BYTES} "
                "import reads; export fewer stores at a time (--store)",
                limit=archive.MAX_MANIFEST_BYTES,
            )
        guard.grow(len(manifest))
        zf.writestr(MANIFEST, manifest)
        guard.ratio(archive.bombed_bytes(zf.infolist()))
    return Written(tuple(s["name"] for s in listed), guard.files)


def _fact_fields(store: str, rel: str, data: bytes) -> dict[str, Any] | None:
    if not (rel.startswith("knowledge/") and is_recall_rel(rel)):
        return None
    try:
        parsed = parse_fact(data, store=store, relpath=rel, mtime=0)
    except FactParseError:
        return None
    record = parsed.fact.to_record()
    record["extra"] = {k: v for k, v in parsed.extra.items() if isinstance(k, str)}
    plain: dict[str, Any] = json.loads(json.dumps(record, default=str))  # dates as ISO text
    return plain


def write_jsonl(
    out: IO[bytes], stores: list[StorePaths], locked: Locked, max_bytes: int, spool: Path | None = None
) -> Written:
    """Stream the JSONL export of ``stores`` to ``out``.

    The manifest line comes first and counts each store's files, so the file lines go to a temp
    file in ``spool`` (an unnamed one, gone with the process) and follow it.
    """
    guard = _Guard(zipped=False)  # import reads a JSONL export of at most MAX_TOTAL_BYTES, whole
    listed: list[dict[str, Any]] = []
    with tempfile.TemporaryFile(dir=spool) as lines:
        for sp in stores:
            count = 0
            with locked(sp.name):
                for rel, data in truth_files(sp, max_bytes):
                    record: dict[str, Any] = {
                        "record": "file",
                        "store": sp.name,
                        "path": rel,
                        "lane": lane_of(rel),
                        "size": len(data),
                        "sha256": sha256_bytes(data),
                    }
                    try:
                        record["content"] = data.decode("utf-8")
                    except UnicodeDecodeError:
                        record["content_base64"] = base64.b64encode(data).decode()
                    fact = _fact_fields(sp.name, rel, data)
                    if fact is not None:
                        record["fact"] = fact
                    line = json.dumps(record, ensure_ascii=False).encode() + b"\n"
                    guard.add(sp.name, rel, len(line))
                    lines.write(line)
                    count += 1
            listed.append({"name": sp.name, "files": count})
        head = {"record": "manifest", **_manifest(listed, [])}
        del head["files"]
        first = json.dumps(head, ensure_ascii=False).encode() + b"\n"
        guard.grow(len(first))
        out.write(first)
        lines.seek(0)
        shutil.copyfileobj(lines, out, 1 << 20)
    return Written(tuple(s["name"] for s in listed), guard.files)


__all__ = ["Written", "lane_of", "truth_files", "write_jsonl", "write_zip"]
