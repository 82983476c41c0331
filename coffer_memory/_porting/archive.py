"""The coffer export format: a zip of the truth files with a manifest, or JSONL; read here (and
written by ``export``, within the limits set here).

Zip layout::

    manifest.json                      format, versions, created time, stores, per-file size + sha256
    stores/<store>/<path in store>     each truth file, byte for byte

JSONL: a ``manifest`` record first, then one ``file`` record per truth file with its store, path,
lane, size, sha256 and content (text, or base64 when it is not UTF-8); a fact file also carries
its parsed fields (``fact``). Reading refuses, before anything is written, a corrupt archive,
member names that climb out of their folder (zip-slip), symbolic links, oversize members, files
that do not match the manifest, broken JSON lines, a source that is not a regular file (a FIFO
would block the read for ever) and two names that are one file on macOS or Windows (they differ
only by case or Unicode normalisation): each is an ``InvalidImport``.
"""

from __future__ import annotations

import base64
import binascii
import importlib.util
import os
import re
import stat
import unicodedata
import zipfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, BinaryIO

from .._errors import InvalidImport, MemoryStoreNotFound
from .._jsontext import loads as json_loads
from .._store.files import sha256_bytes
from .._store.paths import validate_store_name
from .._store.scan import odd_kind, open_regular
from .models import FileItem

FORMAT = "coffer-export"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
STORES_DIR = "stores"
# Caps on what an import reads: far above any real store, low enough that a zip bomb stops early.
MAX_MEMBERS = 100_000
MAX_TOTAL_BYTES = 1 << 30
# The manifest grows with the number of files (about 200 bytes each), so it has its own cap, far
# above the manifest of MAX_MEMBERS files: under ``max_file_bytes`` an export of some 20,000 files
# could not be imported again.
MAX_MANIFEST_BYTES = 64 << 20
# Text compresses 3-10x; members that each unpack to more than this many times their compressed
# size, and together past BOMB_FLOOR_BYTES, are a zip bomb: refused from the headers, before a
# byte is unpacked (the members of a 1 MB archive could otherwise claim the whole MAX_TOTAL_BYTES of
# memory). Judged per member, not against the archive's size: a member stored uncompressed (or
# bytes zipfile skips) would raise that at will and carry the bomb past the check.
MAX_UNPACK_RATIO = 100
BOMB_FLOOR_BYTES = 64 << 20


def bombed_bytes(infos: Iterable[zipfile.ZipInfo]) -> int:
    """Unpacked bytes of the members that unpack to over ``MAX_UNPACK_RATIO`` times their
    compressed size (past ``BOMB_FLOOR_BYTES`` in all, a zip bomb: import and export ask alike)."""
    return sum(i.file_size for i in infos if i.file_size > MAX_UNPACK_RATIO * max(i.compress_size, 1))


_DRIVE = re.compile(r"^[A-Za-z]:")
# Control characters (a line break in a file name splits every line-based listing of it) and the
# bidirectional controls that make a name read as another (``a\u202egnp.md`` shows as ``adm.png``).
_ODD_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# A file system's name and path limits (NAME_MAX; far below PATH_MAX with the home in front):
# past them the write failed with a raw ``OSError`` once the import had begun.
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 1024


# -- import -----------------------------------------------------------------------------------
def fold(rel: str) -> str:
    """A path as a case- and normalisation-insensitive file system sees it (APFS, NTFS): two paths
    with one ``fold`` are one file there.

    Those systems fold case one character to one character (Unicode's simple folding), so
    ``straße`` and ``strasse`` stay two files; ``str.casefold`` is the full folding, which
    expands ``ß`` to ``ss``: where it changes a path's length, the path is folded per character.
    """
    name = unicodedata.normalize("NFC", rel)
    folded = name.casefold()
    if len(folded) == len(name):  # every character folded to one: simple and full folding agree
        return folded
    return "".join(_fold_char(ch) for ch in name)


def _fold_char(ch: str) -> str:
    """One character's simple case folding (its full folding where that is one character, else its
    lower case where that is, else itself)."""
    full = ch.casefold()
    if len(full) == 1:
        return full
    lower = ch.lower()
    return lower if len(lower) == 1 else ch


def unsafe_name(name: str) -> bool:
    """Whether an archive member name could land outside its folder (zip-slip) or is not portable."""
    if not name or "\\" in name or name.startswith("/") or _DRIVE.match(name) or _ODD_CHARS.search(name):
        return True
    if len(name.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        return True
    parts = name.rstrip("/").split("/")
    return any(
        p in ("", ".", "..") or len(p.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES for p in parts
    )


def _store_path(source: str, member: str, store: str, rel: str) -> tuple[str, str]:
    try:
        name = validate_store_name(store)
    except MemoryStoreNotFound:
        raise InvalidImport(
            "corrupt", f"{member}: {store!r} is not a store name", source=source, member=member
        ) from None
    if unsafe_name(rel) or any(p.startswith(".") for p in rel.split("/")):
        raise InvalidImport("unsafe_path", f"{member}: unsafe path {rel!r}", source=source, member=member)
    return name, rel


def _check_manifest(source: str, manifest: object) -> dict[str, Any]:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InvalidImport("unknown_format", "not a coffer export (no coffer manifest)", source=source)
    version = manifest.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= FORMAT_VERSION:
        raise InvalidImport(
            "unknown_format",
            f"coffer export format {version!r} is not one this coffer reads (1 to {FORMAT_VERSION})",
            source=source,
        )
    return manifest


def open_source(path: Path) -> BinaryIO:
    """The import source opened for reading: ``not_regular`` for a FIFO, a socket or a device (a
    FIFO blocked the import for ever, a device was read without end), ``not_found`` when it cannot
    be read."""
    try:
        return open_regular(path)
    except OSError as exc:
        raise unreadable(path, exc) from None


def unreadable(path: Path, exc: OSError) -> InvalidImport:
    """Why an import source could not be read: ``not_regular`` or ``not_found``."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = stat.S_IFREG
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        return InvalidImport(
            "not_regular", f"{path} is {odd_kind(mode)}: import reads files", source=str(path)
        )
    return InvalidImport("not_found", f"cannot read {path}: {exc.strerror or exc}", source=str(path))


def check_tree(source: str, items: list[FileItem]) -> list[FileItem]:
    """``items``, refused when two name one file (``corrupt``; ``collision`` when they differ only
    by case or Unicode normalisation, one file on macOS or Windows), or one's path is another's
    folder (``corrupt``): restoring either would fail half-way, or merge two files into one."""
    named: dict[tuple[str, str], str] = {}
    exact: set[str] = set()
    for item in items:
        member = f"{STORES_DIR}/{item.store}/{item.relpath}"
        if member in exact:
            raise InvalidImport("corrupt", f"{member} appears twice", source=source, member=member)
        exact.add(member)
        other = named.setdefault((item.store, fold(item.relpath)), member)
        if other != member:
            # Refused, not merged: keeping either file would drop the other's content unseen.
            raise InvalidImport(
                "collision",
                f"{other} and {member} differ only by case or Unicode normalisation: they would "
                "be one file on macOS or Windows",
                source=source,
                member=member,
                other=other,
            )
    for store, key in sorted(named):
        parts = key.split("/")
        for n in range(1, len(parts)):
            folder = named.get((store, "/".join(parts[:n])))
            if folder is not None:
                raise InvalidImport(
                    "corrupt", f"{folder} is both a file and a folder", source=source, member=folder
                )
    return items


Reading = Callable[[int, int | None], None]
"""``reading(done, total)``: called as each file of an export is read and checked (``total`` None
while a JSONL export is still being read: its lines are not counted ahead)."""


def read_zip(
    path: Path, max_file_bytes: int, stack: ExitStack | None = None, reading: Reading | None = None
) -> tuple[dict[str, Any], list[FileItem]]:
    """The manifest and files of a zip export, every member checked before any is returned.

    Each member is read, checked against the manifest and let go: with ``stack``, the archive
    stays open on it and each file's bytes are read again when its item is written (an import
    holds a few files, not the archive); without, the items hold their bytes.
    """
    source = str(path)
    handle = open_source(path)
    try:
        zf = zipfile.ZipFile(handle)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as exc:
        handle.close()
        raise InvalidImport("corrupt", f"not a readable zip archive: {exc}", source=source) from None
    with ExitStack() as opened:
        opened.enter_context(handle)
        opened.enter_context(zf)
        manifest, items = _zip_items(zf, source, max_file_bytes, keep=stack is None, reading=reading)
        if stack is not None:
            stack.push(opened.pop_all())
    return manifest, items


def _zip_items(
    zf: zipfile.ZipFile, source: str, max_file_bytes: int, *, keep: bool, reading: Reading | None = None
) -> tuple[dict[str, Any], list[FileItem]]:
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        raise InvalidImport("too_large", f"more than {MAX_MEMBERS} members", source=source)
    seen: dict[str, zipfile.ZipInfo] = {}
    total = 0
    for info in infos:
        name = info.filename
        if unsafe_name(name):
            raise InvalidImport("unsafe_path", f"unsafe member name {name!r}", source=source, member=name)
        if stat.S_ISLNK(info.external_attr >> 16):
            raise InvalidImport("symlink", f"{name} is a symbolic link", source=source, member=name)
        if name in seen:
            raise InvalidImport("corrupt", f"{name} appears twice", source=source, member=name)
        cap = MAX_MANIFEST_BYTES if name == MANIFEST else max_file_bytes
        if info.file_size > cap:
            raise InvalidImport(
                "too_large",
                f"{name}: {info.file_size} bytes is over {cap}",
                source=source,
                member=name,
            )
        total += info.file_size
        seen[name] = info
    if total > MAX_TOTAL_BYTES:
        raise InvalidImport("too_large", f"{total} bytes unpacked is over {MAX_TOTAL_BYTES}", source=source)
    bombed = bombed_bytes(infos)
    if bombed > BOMB_FLOOR_BYTES:
        raise InvalidImport(
            "too_large",
            f"{bombed} bytes unpacked from members compressed over {MAX_UNPACK_RATIO} times "
            "(a zip bomb, not an export of text)",
            source=source,
        )
    if MANIFEST not in seen:
        raise InvalidImport("unknown_format", "not a coffer export (no manifest.json)", source=source)
    try:
        manifest = _check_manifest(
            source, json_loads(_member(zf, seen[MANIFEST], source, MAX_MANIFEST_BYTES))
        )
    except ValueError:
        raise InvalidImport("corrupt", "manifest.json is not JSON", source=source, member=MANIFEST) from None
    listed = manifest.get("files")
    if not isinstance(listed, list):
        raise InvalidImport("corrupt", "manifest.json lists no files", source=source, member=MANIFEST)
    items: list[FileItem] = []
    for entry in listed:
        member = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(member, str) or member not in seen:
            raise InvalidImport("corrupt", f"manifest names a missing member {member!r}", source=source)
        parts = member.split("/", 2)
        if len(parts) != 3 or parts[0] != STORES_DIR:
            raise InvalidImport("unsafe_path", f"{member} is outside stores/", source=source, member=member)
        store, rel = _store_path(source, member, parts[1], parts[2])
        digest = str(entry.get("sha256"))
        load = _zip_loader(zf, seen[member], source, max_file_bytes, digest)
        data = load()  # checked now, whole; read again when written
        items.append(FileItem(store, rel, _held(data) if keep else load, digest, len(data)))
        if reading is not None:
            reading(len(items), len(listed))
    extra = set(seen) - {MANIFEST} - {e["path"] for e in listed} - {n for n in seen if n.endswith("/")}
    if extra:
        first = sorted(extra)[0]
        raise InvalidImport("corrupt", f"{first} is not in the manifest", source=source, member=first)
    return manifest, check_tree(source, items)


def _held(data: bytes) -> Callable[[], bytes]:
    """A loader of bytes already in memory."""
    return lambda: data


def _zip_loader(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, source: str, limit: int, digest: str
) -> Callable[[], bytes]:
    """A member's bytes, read from the archive and checked against the manifest at each call (the
    archive changed since the check pass is ``checksum`` too)."""

    def load() -> bytes:
        data = _member(zf, info, source, limit)
        if sha256_bytes(data) != digest:
            raise InvalidImport(
                "checksum",
                f"{info.filename} does not match the manifest",
                source=source,
                member=info.filename,
            )
        return data

    return load


def _readable_methods() -> frozenset[int]:
    """The compression methods this Python's zipfile reads (bz2 and lzma are optional modules)."""
    methods = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED}
    for module, method in (("bz2", zipfile.ZIP_BZIP2), ("lzma", zipfile.ZIP_LZMA)):
        if importlib.util.find_spec(module) is not None:
            methods.add(method)
    return frozenset(methods)


_READABLE = _readable_methods()


def _member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, source: str, limit: int) -> bytes:
    # Checked before opening: zipfile says only "That compression method is not supported".
    if info.compress_type not in _READABLE:
        raise InvalidImport(
            "corrupt",
            f"{info.filename} uses compression method {info.compress_type}, which this Python cannot read",
            source=source,
            member=info.filename,
        )
    try:
        with zf.open(info) as handle:
            data = handle.read(limit + 1)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, RuntimeError) as exc:
        raise InvalidImport(
            "corrupt", f"{info.filename}: {exc}", source=source, member=info.filename
        ) from None
    if len(data) > limit:  # a header that lied about the size
        raise InvalidImport(
            "too_large", f"{info.filename} is over {limit} bytes", source=source, member=info.filename
        )
    return data


def read_jsonl(
    path: Path, max_file_bytes: int, stack: ExitStack | None = None, reading: Reading | None = None
) -> tuple[dict[str, Any], list[FileItem]]:
    """The manifest and files of a JSONL export, every line checked before any is returned.

    As ``read_zip``: with ``stack`` the file stays open on it and each file's line is read again
    when its item is written; without, the items hold their bytes.
    """
    source = str(path)
    manifest: dict[str, Any] | None = None
    items: list[FileItem] = []
    with ExitStack() as opened:
        handle = opened.enter_context(_open_jsonl(path, MAX_TOTAL_BYTES))
        for number, offset, record in _records(handle, source, _line_cap(max_file_bytes)):
            if manifest is None:
                if record.get("record") != "manifest":
                    raise InvalidImport(
                        "unknown_format", "not a coffer export (no manifest line)", source=source
                    )
                manifest = _check_manifest(source, record)
                continue
            if record.get("record") != "file":
                continue
            where = f"line {number}"
            store, rel = record.get("store"), record.get("path")
            if not isinstance(store, str) or not isinstance(rel, str):
                raise InvalidImport(
                    "corrupt", f"{where}: a file record needs store and path", source=source, line=number
                )
            store, rel = _store_path(source, where, store, rel)
            data = _record_bytes(record, source, number, max_file_bytes)
            if stack is None:
                items.append(FileItem(store, rel, _held(data), sha256_bytes(data), len(data)))
            else:
                load = _jsonl_loader(handle, source, number, offset, max_file_bytes)
                items.append(FileItem(store, rel, load, sha256_bytes(data), len(data)))
            if reading is not None:
                reading(len(items), None)
        if manifest is None:
            raise InvalidImport("unknown_format", "empty file", source=source)
        checked = check_tree(source, items)
        if stack is not None:
            stack.push(opened.pop_all())
    return manifest, checked


def _record_bytes(record: dict[str, Any], source: str, number: int, max_file_bytes: int) -> bytes:
    """The content of a JSONL file record, checked against its size cap and its sha256."""
    where = f"line {number}"
    try:
        if "content_base64" in record:
            data = base64.b64decode(str(record["content_base64"]), validate=True)
        else:
            data = str(record["content"]).encode("utf-8", "surrogatepass")
    except (KeyError, binascii.Error, UnicodeEncodeError):
        raise InvalidImport("corrupt", f"{where}: no readable content", source=source, line=number) from None
    if len(data) > max_file_bytes:
        raise InvalidImport("too_large", f"{where}: over {max_file_bytes} bytes", source=source, line=number)
    if sha256_bytes(data) != record.get("sha256"):
        raise InvalidImport(
            "checksum", f"{where}: content does not match its sha256", source=source, line=number
        )
    return data


def _jsonl_loader(handle: BinaryIO, source: str, number: int, offset: int, limit: int) -> Callable[[], bytes]:
    """The content of the file record on line ``number`` (at ``offset``), read and checked again."""

    def load() -> bytes:
        handle.seek(offset)
        try:
            record = json_loads(handle.readline(_line_cap(limit)))
        except ValueError as exc:
            raise InvalidImport("bad_json", f"line {number}: {exc}", source=source, line=number) from None
        if not isinstance(record, dict):
            raise InvalidImport("bad_json", f"line {number}: not a JSON object", source=source, line=number)
        return _record_bytes(record, source, number, limit)

    return load


def _line_cap(max_file_bytes: int) -> int:
    """The longest line a file record of at most ``max_file_bytes`` needs: its content escaped
    (``\u0001`` is 6 characters a byte) or in base64, and its other fields."""
    return 6 * max_file_bytes + (1 << 20)


def _open_jsonl(path: Path, max_bytes: int) -> BinaryIO:
    handle = open_source(path)
    try:
        size = os.fstat(handle.fileno()).st_size
    except OSError as exc:
        handle.close()
        raise unreadable(path, exc) from None
    if size > max_bytes:
        handle.close()
        raise InvalidImport("too_large", f"over {max_bytes} bytes", source=str(path))
    return handle


def _records(handle: BinaryIO, source: str, cap: int) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """``(line number, offset, object)`` for each non-blank line, read one line at a time; a line
    that is not a JSON object is ``InvalidImport`` (``bad_json``) with its number, one longer
    than ``cap`` bytes ``too_large``."""
    offset = 0
    number = 0
    while line := handle.readline(cap + 1):
        number += 1
        start, offset = offset, offset + len(line)
        if len(line) > cap:
            raise InvalidImport("too_large", f"line {number} is over {cap} bytes", source=source, line=number)
        if not line.strip():
            continue
        try:
            value = json_loads(line)
        except ValueError as exc:
            raise InvalidImport("bad_json", f"line {number}: {exc}", source=source, line=number) from None
        if not isinstance(value, dict):
            raise InvalidImport("bad_json", f"line {number}: not a JSON object", source=source, line=number)
        yield number, start, value


def json_lines(path: Path, max_bytes: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line of a JSONL file of at most ``max_bytes``
    (read one line at a time); a line that is not a JSON object is ``InvalidImport``
    (``bad_json``) with its number."""
    with _open_jsonl(path, max_bytes) as handle:
        for number, _, value in _records(handle, str(path), max_bytes):
            yield number, value
