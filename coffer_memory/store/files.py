"""Read, parse, render and durably write memory Markdown files.

Writes are atomic: a temp file in the same folder, fsync, rename (or link, when the
target must not exist), fsync of the folder. New files are 0600, new folders 0700.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import tempfile
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import attrs
import frontmatter
import yaml
from ulid import ULID

from ..models import Actor, MemoryFact

FILE_MODE = 0o600
TEMP_PREFIX = ".tmp-"  # hidden, so scans and grep never see a half-written file
DIR_MODE = 0o700
_HEADING_RE = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
KNOWN_KEYS = (
    "kind",
    "title",
    "name",
    "description",
    "metadata",
    "origin_session_id",
    "created_at",
    "updated_at",
)


class FactParseError(ValueError):
    """A memory file whose frontmatter cannot be read."""


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of bytes."""
    return hashlib.sha256(data).hexdigest()


def now_utc() -> datetime:
    """The current UTC time, truncated to milliseconds (what the files store)."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def format_time(value: datetime) -> str:
    """ISO 8601 in UTC with millisecond precision, e.g. ``2026-06-09T10:11:12.345+00:00``."""
    return value.astimezone(UTC).isoformat(timespec="milliseconds")


def fsync_dir(path: Path) -> None:
    """fsync a folder so a create, rename or unlink in it is durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(path: Path) -> None:
    """Create ``path`` and missing parents with mode 0700, fsync'ing each new entry's parent."""
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            continue
        fsync_dir(folder.parent)


def atomic_write(
    path: Path, data: bytes, *, overwrite: bool = True, mode: int = FILE_MODE, temp_prefix: str = TEMP_PREFIX
) -> None:
    """Durably write ``data`` to ``path``: temp + fsync + rename + fsync(dir).

    With ``overwrite=False`` the file is linked into place and ``FileExistsError`` is raised
    if ``path`` exists, so concurrent creators can never replace each other's file.
    Memory files go through ``store.writer``; other callers use ``write_outside_store``.
    """
    ensure_dir(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temp_prefix, suffix=".part")
    try:
        if mode != FILE_MODE:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
            os.unlink(tmp)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def write_outside_store(path: Path, data: bytes, *, mode: int, temp_prefix: str) -> None:
    """Atomically replace a file that is not a memory file (an agent's config file), keeping ``mode``.

    The one durable-write routine of the package, shared so that no other module renames files.
    """
    atomic_write(path, data, mode=mode, temp_prefix=temp_prefix)


def remove_file(path: Path) -> None:
    """Unlink ``path`` and fsync its folder so the removal is durable."""
    os.unlink(path)
    fsync_dir(path.parent)


def yaml_scalar(value: object) -> str:
    """One YAML scalar on one line (quoted when YAML needs it)."""
    text = yaml.safe_dump(value, allow_unicode=True, default_flow_style=True, width=10**9)
    return text.removesuffix("\n").removesuffix("\n...").strip()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def render_fact(
    fact: MemoryFact, extra: Mapping[str, Any] | None = None, *, with_created: bool = True
) -> bytes:
    """The fact file's bytes: the seed's frontmatter keys in order, then the body.

    ``extra`` keeps frontmatter keys a user added by hand; they follow the seed's keys.
    ``with_created=False`` leaves ``created_at`` out, for a hand-written file that never had
    one: its id does not depend on a creation time, and must not start to.
    """
    lines = [
        "---",
        "kind: knowledge",
        f"title: {yaml_scalar(_one_line(fact.title))}",
        f"description: {yaml_scalar(_one_line(fact.description))}",
        "metadata:",
        f"  actor: {fact.actor}",
        f"origin_session_id: {yaml_scalar(fact.origin_session_id)}",
        f"created_at: {format_time(fact.created_at)}",
        f"updated_at: {format_time(fact.updated_at)}",
    ]
    if not with_created:
        lines.remove(f"created_at: {format_time(fact.created_at)}")
    if extra:
        rest = {k: v for k, v in extra.items() if k not in KNOWN_KEYS}
        if rest:
            dumped = yaml.safe_dump(rest, allow_unicode=True, sort_keys=False, default_flow_style=False)
            lines.append(dumped.rstrip("\n"))
    body = fact.body.strip("\n")
    return ("\n".join(lines) + "\n---\n\n" + body + "\n").encode("utf-8")


def fact_id_for(store: str, relpath: str, created_at: datetime | None) -> str:
    """A deterministic ULID for a fact file: creation time + hash of (store, relative path).

    Deterministic so that rebuilding the index from the files yields the same ids; the
    time part keeps ids sortable by creation. Files with no ``created_at`` get time 0.
    """
    millis = int(created_at.timestamp() * 1000) if created_at else 0
    digest = hashlib.sha256(f"{store}\x00{relpath}".encode("utf-8", "surrogateescape")).digest()
    return str(ULID.from_bytes(millis.to_bytes(6, "big") + digest[:10]))


def parse_time(value: object) -> datetime | None:
    """A timezone-aware datetime from a frontmatter value (naive means UTC); None if unreadable."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


@attrs.frozen
class ParsedFile:
    """A memory file as parsed: the fact view, its bytes' sha256 and any extra frontmatter."""

    fact: MemoryFact
    sha256: str
    extra: Mapping[str, Any]
    has_frontmatter: bool
    has_created_at: bool


def parse_fact(data: bytes, *, store: str, relpath: str, mtime: float) -> ParsedFile:
    """Parse a fact file's bytes. Missing fields fall back (heading/file name, mtime).

    Raises ``FactParseError`` when the frontmatter is not a YAML mapping.
    """
    text = data.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        post = frontmatter.loads(text)
    except (yaml.YAMLError, ValueError, TypeError) as exc:
        raise FactParseError(f"broken frontmatter: {exc}".splitlines()[0]) from exc
    meta = post.metadata
    if not isinstance(meta, dict):
        raise FactParseError("frontmatter is not a mapping")
    body = str(post.content).strip("\n")
    stem = relpath.rsplit("/", 1)[-1].removesuffix(".md")
    title = meta.get("title") or meta.get("name")
    if not isinstance(title, str) or not title.strip():
        heading = _HEADING_RE.search(body)
        title = heading.group(1) if heading else stem
    description = meta.get("description")
    description = description if isinstance(description, str) else ""
    nested = meta.get("metadata")
    actor_raw = nested.get("actor") if isinstance(nested, dict) else None
    actor: Actor = actor_raw if actor_raw in ("agent", "user") else "user"
    origin = meta.get("origin_session_id")
    if origin is None and isinstance(nested, dict):
        origin = nested.get("origin_session_id")
    created = parse_time(meta.get("created_at"))
    updated = parse_time(meta.get("updated_at"))
    file_time = datetime.fromtimestamp(mtime, UTC)
    fact = MemoryFact(
        id=fact_id_for(store, relpath, created),
        title=title.strip(),
        description=description.strip(),
        body=body,
        actor=actor,
        origin_session_id=str(origin) if origin not in (None, "") else None,
        created_at=created or updated or file_time,
        updated_at=updated or created or file_time,
    )
    extra = {k: v for k, v in meta.items() if k not in KNOWN_KEYS}
    return ParsedFile(
        fact=fact,
        sha256=sha256_bytes(data),
        extra=extra,
        has_frontmatter=bool(meta),
        has_created_at=bool(created),
    )


def read_bytes(path: Path) -> tuple[bytes, os.stat_result]:
    """A file's bytes and its stat, refusing anything that is not a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IsADirectoryError(str(path))
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


class FileStat(NamedTuple):
    """Size and mtime (ns) of a file, what the reconcile fast path compares (a tuple: hot path)."""

    size: int
    mtime_ns: int


def scan_markdown(root: Path, folders: tuple[Path, ...]) -> tuple[dict[str, FileStat], dict[str, int]]:
    """Every visible ``*.md`` regular file under ``folders`` (relative to ``root``) and folder mtimes.

    Hidden entries (temp files among them) and symlinks are skipped.
    """
    files: dict[str, FileStat] = {}
    dirs: dict[str, int] = {}
    for folder in folders:
        for rel_dir, entries in _walk(root, folder, dirs):
            for name, st in entries:
                files[f"{rel_dir}/{name}"] = st
    return files, dirs


def _walk(root: Path, folder: Path, dirs: dict[str, int]) -> Iterator[tuple[str, list[tuple[str, FileStat]]]]:
    stack = [folder]
    while stack:
        current = stack.pop()
        try:
            dir_stat = os.stat(current, follow_symlinks=False)
            scanner = os.scandir(current)
        except (FileNotFoundError, NotADirectoryError):
            continue
        rel_dir = current.relative_to(root).as_posix()
        dirs[rel_dir] = dir_stat.st_mtime_ns
        entries: list[tuple[str, FileStat]] = []
        with scanner:
            for entry in scanner:
                name = entry.name
                if name[0] == ".":
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                elif name.endswith(".md"):
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    if stat.S_ISREG(st.st_mode):
                        entries.append((name, FileStat(st.st_size, st.st_mtime_ns)))
        yield rel_dir, entries


def list_folder(root: Path, rel_dir: str) -> tuple[int, dict[str, FileStat], list[str]] | None:
    """One folder's mtime, its direct ``*.md`` files and its visible subfolders; ``None`` if gone."""
    folder = root / rel_dir
    try:
        mtime = os.stat(folder, follow_symlinks=False).st_mtime_ns
        scanner = os.scandir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return None
    files: dict[str, FileStat] = {}
    subdirs: list[str] = []
    with scanner:
        for entry in scanner:
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(f"{rel_dir}/{entry.name}")
            elif entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                files[f"{rel_dir}/{entry.name}"] = FileStat(st.st_size, st.st_mtime_ns)
    return mtime, files, subdirs


def stale_temp_files(folders: tuple[Path, ...], older_than_seconds: float) -> list[Path]:
    """Temp files left by writers that died mid-write (never part of the truth)."""
    import time

    cutoff = time.time() - older_than_seconds
    found: list[Path] = []
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                if name.startswith(TEMP_PREFIX):
                    path = Path(dirpath) / name
                    try:
                        if path.lstat().st_mtime < cutoff:
                            found.append(path)
                    except FileNotFoundError:
                        continue
    return found
