"""Read, parse, render and durably write memory Markdown files.

Writes are atomic: a temp file in the same folder, fsync, rename (or link, when the
target must not exist), fsync of the folder. New files are 0600, new folders 0700.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import stat
from collections.abc import Mapping
from contextlib import AbstractContextManager
from datetime import UTC, date, datetime
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO

import attrs

from .._models import Actor, MemoryFact
from .._ulid_text import crockford_ulid
from ..vocabulary import MAX_TAG_CHARS, MAX_TAGS
from .durable import CACHE_FOLDER as CACHE_FOLDER
from .durable import DIR_MODE as DIR_MODE
from .durable import FILE_MODE as FILE_MODE
from .durable import atomic_stream
from .durable import atomic_write as atomic_write
from .durable import ensure_dir as ensure_dir
from .durable import fsync_dir as fsync_dir
from .durable import write_home_cache as write_home_cache
from .scan import odd_kind

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
    "tags",
)


# Frontmatter is a few lines; more than this is not a fact header, and is not parsed.
MAX_FRONTMATTER_CHARS = 256 * 1024
# The range of times a fact may carry: what a timestamp-based ULID and ISO 8601 can hold.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LAST = datetime(9999, 12, 31, tzinfo=UTC)


class FactParseError(ValueError):
    """A memory file whose frontmatter cannot be read."""


class FileTooLarge(FactParseError):
    """A hand-written file over the configured size cap (``[memory] max_file_bytes``)."""


@functools.cache
def _handlers() -> tuple[Any, ...]:
    """The frontmatter handlers: YAML (aliases refused, lenient timestamps) and JSON.

    Built on the first parse: PyYAML and python-frontmatter are a fifth of a keyword recall's
    imports, and a recall over an unchanged index parses nothing.
    """
    import yaml
    from frontmatter.default_handlers import JSONHandler, YAMLHandler

    def lenient_timestamp(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> object:
        """A YAML timestamp, or its text when it names no real time (``0000-00-00``)."""
        try:
            return loader.construct_yaml_timestamp(node)
        except (ValueError, OverflowError):
            return loader.construct_scalar(node)

    class CheckedLoader(yaml.SafeLoader):
        """SafeLoader that refuses aliases: an alias bomb expands a few lines into gigabytes."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise yaml.composer.ComposerError(None, None, "aliases are not allowed", mark)
            return super().compose_node(parent, index)

    # libyaml when present (what python-frontmatter used; about twice as fast over a rebuild).
    fast: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class FastLoader(fast):  # type: ignore[valid-type,misc]
        """The fast loader, for frontmatter that holds no ``*`` or ``&`` and so no alias or anchor."""

    for loader in (CheckedLoader, FastLoader):
        loader.add_constructor("tag:yaml.org,2002:timestamp", lenient_timestamp)

    class YAML(YAMLHandler):
        def load(self, fm: str, **kwargs: object) -> Any:
            if len(fm) > MAX_FRONTMATTER_CHARS:
                raise FactParseError(f"frontmatter longer than {MAX_FRONTMATTER_CHARS} characters")
            loader = CheckedLoader if "*" in fm or "&" in fm else FastLoader
            return yaml.load(fm, Loader=loader)  # both are SafeLoaders

    return (YAML(), JSONHandler())


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of bytes."""
    return hashlib.sha256(data).hexdigest()


def now_utc() -> datetime:
    """The current UTC time, truncated to milliseconds (what the files store)."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def format_time(value: datetime) -> str:
    """ISO 8601 in UTC with millisecond precision, e.g. ``2026-06-09T10:11:12.345+00:00``."""
    return (value if value.tzinfo is UTC else value.astimezone(UTC)).isoformat(timespec="milliseconds")


def write_outside_store(path: Path, data: bytes, *, mode: int, temp_prefix: str) -> None:
    """Atomically replace a file that is not a memory file (an agent's config file), keeping ``mode``.

    The one durable-write routine of the package, shared so that no other module renames files.
    """
    atomic_write(path, data, mode=mode, temp_prefix=temp_prefix)


def stream_outside_store(path: Path, *, mode: int, temp_prefix: str) -> AbstractContextManager[BinaryIO]:
    """``write_outside_store`` for a file written piece by piece (an export): a handle on a temp
    file beside ``path``, renamed over it durably when the block ends, removed when it raises."""
    return atomic_stream(path, mode=mode, temp_prefix=temp_prefix)


def remove_file(path: Path) -> None:
    """Unlink ``path`` and fsync its folder so the removal is durable."""
    os.unlink(path)
    fsync_dir(path.parent)


def move_aside(path: Path, target: Path, *, suffixes: tuple[str, ...] = ()) -> None:
    """Rename ``path`` (and any ``path + suffix`` side files that exist) to ``target`` in the same
    folder, then fsync the folder: a damaged derived file is kept for inspection, never deleted."""
    os.rename(path, target)
    for suffix in suffixes:
        try:
            os.rename(f"{path}{suffix}", f"{target}{suffix}")
        except FileNotFoundError:
            continue
    fsync_dir(path.parent)


def yaml_scalar(value: object) -> str:
    """One YAML scalar on one line (quoted when YAML needs it).

    A string PyYAML would write plain, or a list of such strings, is written here without it (an
    import of 1,000 facts spent 4 s in its emitter for their titles and descriptions); the
    answers are PyYAML's, which a test compares on many strings.
    """
    if isinstance(value, str) and _plain(value):
        return value
    if value is None:
        return "null"
    if isinstance(value, list) and all(isinstance(v, str) and _flow_plain(v) for v in value):
        return "[" + ", ".join(value) + "]"
    import yaml

    text = yaml.safe_dump(value, allow_unicode=True, default_flow_style=True, width=10**9)
    # Not ``strip()``: it took a leading U+00A0 off "\xa0{", which then read as a flow mapping.
    return text.removesuffix("\n").removesuffix("\n...").strip("\n ")


# What PyYAML's emitter (``analyze_scalar``, with allow_unicode) lets stand in a plain scalar: no
# line break, control character, BOM or surrogate; no leading indicator or space, no trailing
# space, no ": " or " #", no document marker.
_PLAIN_CHARS = re.compile("[^\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ud800-\udfff\ufffe\uffff]+")
_LEADING = frozenset(" #,[]{}&*!|>'\"%@`")


def _plain(text: str) -> bool:
    if (
        not _PLAIN_CHARS.fullmatch(text)
        or text[0] in _LEADING
        or text[-1] in " :"
        or (text[0] in "?:-" and text[1:2] in ("", " "))
        or ": " in text
        or " #" in text
        or text.startswith(("---", "..."))
    ):
        return False
    return _resolves_to_str(text)


def _flow_plain(text: str) -> bool:
    """A plain scalar inside a flow list: none of the flow indicators either."""
    return _plain(text) and not any(c in text for c in ",?[]{}:#")


@functools.cache
def _resolver() -> Any:
    import yaml

    return yaml.resolver.Resolver()


def _resolves_to_str(text: str) -> bool:
    """Whether YAML reads ``text``, written plain, back as a string (not a bool, number, null...)."""
    import yaml

    tag = _resolver().resolve(yaml.ScalarNode, text, (True, False))
    return bool(tag == "tag:yaml.org,2002:str")


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
    if fact.tags:
        lines.append(f"tags: {yaml_scalar(list(fact.tags))}")
    if extra:
        rest = {k: v for k, v in extra.items() if k not in KNOWN_KEYS}
        if rest:
            import yaml

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
    # As python-ulid's ``str(ULID.from_bytes(...))`` prints it (pinned by a test), in a third
    # of its time: a rebuild makes one per file.
    return crockford_ulid(millis.to_bytes(6, "big") + digest[:10])


def parse_time(value: object) -> datetime | None:
    """A timezone-aware datetime from a frontmatter value (naive means UTC).

    None when unreadable or outside 1970..9999 (a ULID's time and ISO 8601 cannot hold it):
    the caller falls back to the other date or the file's mtime.
    """
    if type(value) is datetime and value.tzinfo is UTC:  # what fastmeta reads (two per file of a rebuild)
        return value if _EPOCH <= value <= _LAST else None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    elif isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if not isinstance(value, datetime):
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        in_range = _EPOCH <= value.astimezone(UTC) <= _LAST
    except (OverflowError, ValueError):
        return None
    return value if in_range else None


_FORBIDDEN = frozenset(",\n\r\t\x00")


def clean_tag(raw: object) -> str | None:
    """A tag as stored: stripped, inner whitespace collapsed, lowercased; None if it cannot be one
    (empty, too long, a comma or a control character)."""
    if not isinstance(raw, str):
        return None
    tag = " ".join(raw.split()).lower()
    if not tag or len(tag) > MAX_TAG_CHARS:
        return None
    if any(ch in _FORBIDDEN or ord(ch) < 32 or 0xD800 <= ord(ch) <= 0xDFFF for ch in raw.strip()):
        return None
    return tag


def file_tags(value: object) -> tuple[str, ...]:
    """The ``tags`` of a file's frontmatter, read leniently: a list (or a comma-separated string);
    entries that cannot be tags are skipped, never fatal (the file is the user's)."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list):
        return ()
    out: list[str] = []
    for raw in value:
        tag = clean_tag(str(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else raw)
        if tag is not None and tag not in out:
            out.append(tag)
    return tuple(out[:MAX_TAGS])


@attrs.frozen
class ParsedFile:
    """A memory file as parsed: the fact view, its bytes' sha256 and any extra frontmatter."""

    fact: MemoryFact
    sha256: str
    extra: Mapping[str, Any]
    has_frontmatter: bool
    has_created_at: bool
    # The fact's created_at and updated_at as ``format_time`` writes them, taken from a header in
    # ``render_fact``'s form (None otherwise): a rebuild formatted two times per file again. Not
    # part of what was parsed (a file read through YAML has None), so not compared.
    times: tuple[str, str] | None = attrs.field(default=None, eq=False)


def split_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """``(metadata, body)`` through python-frontmatter and YAML: any header a person may write."""
    import frontmatter
    import yaml

    try:
        handler = frontmatter.detect_format(text, _handlers())
        post = frontmatter.loads(text, handler=handler) if handler else frontmatter.Post(text.strip())
    except FactParseError:
        raise
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:
        raise FactParseError(f"broken frontmatter: {exc}".splitlines()[0]) from exc
    meta = post.metadata
    if not isinstance(meta, dict):
        raise FactParseError("frontmatter is not a mapping")
    return meta, str(post.content)


def _header_text(meta: dict[str, Any], text: str, *keys: str) -> str | None:
    """The first of the header's ``keys`` holding a text worth showing, or None. A value YAML
    reads as a number, time or bool (``title: 2024``, ``description: 3.10``, ``title: yes``) is
    the text written there: a title was dropped for the file's name, a description shown empty."""
    for key in keys:
        value = meta.get(key)
        if isinstance(value, bool | int | float | date):  # a datetime is a date
            value = _written_scalar(text, key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _written_scalar(text: str, key: str) -> str | None:
    """The text of a YAML header's top-level ``key`` as written (YAML's base loader resolves no
    type: ``3.10`` stays ``3.10``), or None. Only asked for a value YAML typed, so the header has
    passed ``split_frontmatter``'s checks already."""
    import frontmatter
    import yaml

    handler = frontmatter.detect_format(text, _handlers())
    if handler is None or handler is not _handlers()[0]:
        return None
    try:
        header, _ = handler.split(text)
        raw = yaml.load(header, Loader=getattr(yaml, "CBaseLoader", yaml.BaseLoader))
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):
        return None
    value = raw.get(key) if isinstance(raw, dict) else None
    return value if isinstance(value, str) else None


_fast_reader: ModuleType | None = None


def _fastmeta() -> ModuleType:
    """``fastmeta``, imported on the first parse (it imports PyYAML's resolver); looked up once,
    not by an import statement on every parse (a rebuild parses every file)."""
    global _fast_reader
    if _fast_reader is None:
        from . import fastmeta

        _fast_reader = fastmeta
    return _fast_reader


def parse_fact(data: bytes, *, store: str, relpath: str, mtime: float) -> ParsedFile:
    """Parse a fact file's bytes. Missing fields fall back (heading/file name, mtime).

    Raises ``FactParseError`` when the file holds a NUL byte (binary), or the frontmatter is not
    a YAML mapping, uses aliases, nests too deep or is longer than ``MAX_FRONTMATTER_CHARS``. A
    header exactly as ``render_fact`` writes it is read without YAML (``fastmeta``); the results
    are the same.
    """
    nul = data.find(b"\x00")
    if nul >= 0:
        # A binary file named .md: no write path makes one (a NUL is refused), grep takes it for
        # binary and skips it, and the word index took its words: both modes now skip it, and
        # doctor names it. Bytes that are not UTF-8 alone stay a fact, read with U+FFFD for them.
        raise FactParseError(f"binary, not text: a NUL byte at offset {nul}")
    text = data.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    fast = _fastmeta().read_rendered(text)
    actor: Actor
    if fast is None:
        meta, body = split_frontmatter(text)
        body = body.strip("\n")
        title = _header_text(meta, text, "title", "name")
        description = _header_text(meta, text, "description") or ""
        nested = meta.get("metadata")
        actor_raw = nested.get("actor") if isinstance(nested, dict) else None
        actor = actor_raw if actor_raw in ("agent", "user") else "user"
        origin = meta.get("origin_session_id")
        if origin is None and isinstance(nested, dict):
            origin = nested.get("origin_session_id")
        created = parse_time(meta.get("created_at"))
        updated = parse_time(meta.get("updated_at"))
    else:  # the body stripped of all whitespace already
        meta, body, created_text, updated_text = fast
        # What the lines above give for render_fact's header, without their general checks (a
        # rebuild reads every file here): its title, description and origin are each a text or
        # None (``fastmeta._scalar``), its actor one of the two, its times aware UTC ones.
        title = meta["title"]
        if title is not None and not title.strip():
            title = None
        description = meta["description"] or ""  # one of only whitespace is stripped to "" below
        actor = meta["metadata"]["actor"]
        origin = meta["origin_session_id"]
        created = meta.get("created_at")
        if created is not None and not _EPOCH <= created <= _LAST:
            created = None
        updated = meta["updated_at"]
        if not _EPOCH <= updated <= _LAST:
            updated = None
    if title is None:
        heading = _HEADING_RE.search(body)
        title = heading.group(1) if heading else relpath.rsplit("/", 1)[-1].removesuffix(".md")
    file_time = _EPOCH
    if created is None and updated is None:  # the file's mtime stands in for both
        with contextlib.suppress(OverflowError, OSError, ValueError):
            file_time = max(_EPOCH, min(_LAST, datetime.fromtimestamp(mtime, UTC)))
    tags = meta.get("tags")
    fact = MemoryFact(
        id=fact_id_for(store, relpath, created),
        title=title.strip(),
        description=description.strip(),
        body=body,
        actor=actor,
        origin_session_id=str(origin) if origin not in (None, "") else None,
        created_at=created or updated or file_time,
        updated_at=updated or created or file_time,
        tags=file_tags(tags) if tags is not None else (),
    )
    times = None
    if fast is None:
        extra = {k: v for k, v in meta.items() if k not in KNOWN_KEYS}
    else:  # the rendered shape holds no other key
        extra = {}
        # The two times as ``format_time`` writes them, from the text the header holds: a time out
        # of range stands in for the other as above; a non-ASCII digit (``\d``) is formatted anew.
        first = created_text if created is not None and created_text.isascii() else None
        second = updated_text if updated is not None and updated_text.isascii() else None
        if first is not None or second is not None:
            times = (first or second or "", second or first or "")
    return ParsedFile(
        fact=fact,
        sha256=sha256_bytes(data),
        extra=extra,
        has_frontmatter=bool(meta),
        has_created_at=bool(created),
        times=times,
    )


def read_bytes(path: str | Path, *, max_bytes: int | None = None) -> tuple[bytes, os.stat_result]:
    """A file's bytes and its stat, refusing anything that is not a regular file.

    Opened non-blocking, so a FIFO or device named ``*.md`` is refused instead of hanging the
    reader. With ``max_bytes``, a larger file raises ``FileTooLarge`` before it is read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IsADirectoryError(f"{path}: {odd_kind(st.st_mode)}")
        if max_bytes is not None and st.st_size > max_bytes:
            raise FileTooLarge(
                f"{st.st_size} bytes is over the {max_bytes}-byte cap ([memory] max_file_bytes): not indexed"
            )
        # A read of one byte more than its size: a shorter answer is the end of a regular file,
        # so most files cost one read (a rebuild reads them all).
        first = os.read(fd, st.st_size + 1)
        if len(first) <= st.st_size:
            return first, st
        chunks = [first]
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def read_fact_file(path: str | Path) -> str:
    """A fact file's text as the indexer reads it: ``read_bytes`` (a regular file only, never
    through a symlink, never blocking on a FIFO), invalid UTF-8 replaced as ``parse_fact`` does.

    For the faces that show a file whole (the web view's frontmatter, MCP's fact resource): they
    read it with ``Path.read_text``, so a byte that is no UTF-8 was a raw ``UnicodeDecodeError``
    (a 500 page) while every other face showed the fact, and a file swapped for a FIFO after the
    fact was found blocked the reading thread for ever.
    """
    return read_bytes(path)[0].decode("utf-8", errors="replace")
