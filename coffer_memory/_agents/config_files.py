"""Read-modify-write of agents' JSON and TOML config files.

Three promises, because these files belong to the user and to their agents:

* a file that does not parse is never overwritten (``AgentConfigInvalid`` names it);
* every write is atomic (temp file in the same folder, fsync, rename, fsync of the folder) and
  keeps the file's mode, and the previous bytes can be kept next to it as ``<name>.coffer.bak``;
* an edit keeps what it does not touch: JSON key order and indent style, TOML comments and
  layout (tomlkit).

A symlinked config file (a dotfiles checkout) is written through: the link stays a link.
"""

from __future__ import annotations

import copy
import errno
import json
import os
import re
import stat
import tomllib
from abc import ABC, abstractmethod
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import InlineTable

from .._errors import AgentConfigInvalid, CofferError, StorageFull, StorageNotWritable
from .._jsontext import loads as json_loads
from .._store.files import ensure_dir, fsync_dir, write_outside_store
from .json_splice import JsonStyle, splice

# Not ``.bak``: a user's own ``settings.json.bak`` (kept by hand, or by another tool) was
# overwritten by the first install, and removed by uninstall when it matched the restored file.
BACKUP_SUFFIX = ".coffer.bak"
# What earlier coffer named its backups; one that holds coffer's entries is still removed.
LEGACY_BACKUP_SUFFIX = ".bak"
NEW_FILE_MODE = 0o600
_TEMP_PREFIX = ".coffer-tmp-"
_INDENT = re.compile(r"\n([ \t]+)\S")

__all__ = [
    "BACKUP_SUFFIX",
    "LEGACY_BACKUP_SUFFIX",
    "NEW_FILE_MODE",
    "ConfigDoc",
    "JsonDoc",
    "TomlDoc",
    "backup_path",
    "check_writable",
    "load_doc",
    "read_bytes",
    "remove_with_backup",
    "write_atomic",
    "write_error",
]


def _real(path: Path) -> Path:
    """The file behind ``path`` (symlinks followed), so writing keeps a symlinked config a symlink."""
    return Path(os.path.realpath(path))


def backup_path(path: Path) -> Path:
    """Where the previous bytes of ``path`` are kept: ``<name>.coffer.bak`` beside the (real) file."""
    real = _real(path)
    return real.with_name(real.name + BACKUP_SUFFIX)


def legacy_backup_path(path: Path) -> Path:
    """Where an older coffer kept them: ``<name>.bak`` (only ever removed when it holds coffer's
    entries, which no backup of the user's own does)."""
    real = _real(path)
    return real.with_name(real.name + LEGACY_BACKUP_SUFFIX)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AgentConfigInvalid(str(path), f"cannot be read ({exc.strerror or exc})") from exc


def _replace(path: Path, data: bytes, mode: int) -> None:
    """Durably put ``data`` at ``path`` with ``mode``: temp + fsync + rename + fsync(dir)."""
    write_outside_store(path, data, mode=mode, temp_prefix=_TEMP_PREFIX)


def write_atomic(path: Path, data: bytes, *, backup: bool = True) -> None:
    """Atomically write ``data`` to ``path``, keeping its mode and (with ``backup``) its previous
    bytes in ``.coffer.bak``.

    A new file gets mode 0600 (missing folders 0700).
    """
    real = _real(path)
    previous = _read(real)
    ensure_dir(real.parent)
    mode = stat.S_IMODE(os.stat(real).st_mode) if previous is not None else NEW_FILE_MODE
    if previous is not None and backup:
        _replace(backup_path(real), previous, mode)
    _replace(real, data, mode)


def remove_with_backup(path: Path, *, backup: bool = True) -> None:
    """Remove ``path`` (a file coffer created), keeping (with ``backup``) its last bytes in ``.coffer.bak``."""
    real = _real(path)
    previous = _read(real)
    if previous is None:
        return
    if backup:
        _replace(backup_path(real), previous, stat.S_IMODE(os.stat(real).st_mode))
    os.unlink(real)
    fsync_dir(real.parent)


class ConfigDoc(ABC):
    """One config file loaded for editing: ``data`` is a mutable mapping of its top level.

    ``raw`` is the bytes read (``None`` when the file does not exist yet).
    """

    def __init__(self, path: Path, raw: bytes | None) -> None:
        self.path = path
        self.raw = raw

    data: MutableMapping[str, Any]

    @abstractmethod
    def render(self) -> bytes:
        """The document as the bytes to write, in the file's own style."""

    @abstractmethod
    def new_table(self, parent: Any, *, holds_tables: bool) -> MutableMapping[str, Any]:
        """An empty container to create in ``parent`` on the way down a key path.

        ``holds_tables``: the container will only hold tables (TOML then writes no header for it).
        """

    @abstractmethod
    def make_value(self, value: Any, parent: Any) -> Any:
        """``value`` (plain JSON-like data) as an item this document can store in ``parent``."""

    @abstractmethod
    def plain(self, value: Any) -> Any:
        """A plain, JSON-serialisable copy of an item read from this document."""

    @abstractmethod
    def same_document(self, text: bytes) -> bool:
        """Whether ``text`` holds what this document holds now (so ``text`` may be written instead)."""

    @abstractmethod
    def snapshot(self) -> str:
        """A string that changes whenever the document does (to tell which edits changed it)."""

    @property
    @abstractmethod
    def changed(self) -> bool:
        """Whether the document differs from what was read (then it must be written)."""

    def is_empty(self) -> bool:
        """Whether the document holds nothing at all."""
        return len(self.data) == 0


def _decode(raw: bytes | None, path: Path, encoding: str) -> str:
    """The file's text ("" for a file that does not exist yet); ``AgentConfigInvalid`` if not UTF-8."""
    if raw is None:
        return ""
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise AgentConfigInvalid(str(path), "is not UTF-8 text") from exc


class JsonDoc(ConfigDoc):
    """A JSON object file. Order is kept (``json`` keeps it); indent and final newline are re-used."""

    def __init__(self, path: Path, raw: bytes | None) -> None:
        super().__init__(path, raw)
        text = _decode(raw, path, "utf-8-sig")
        self.data = self._parse(text, path)
        self._text = text
        self._original = copy.deepcopy(self.data)
        self._loaded = self._canon(self.data)
        self.indent: int | str | None = 2
        self.separators: tuple[str, str] = (",", ": ")
        self.final_newline = True
        # A file that spells non-ASCII as \u escapes (and holds no raw non-ASCII) keeps doing so.
        self.ensure_ascii = text.isascii() and re.search(r"\\u(?!00[0-7])[0-9a-fA-F]{4}", text) is not None
        if text.strip():
            self._learn_style(text)

    @staticmethod
    def _parse(text: str, path: Path) -> dict[str, Any]:
        if not text.strip():
            return {}  # an empty file holds nothing we could lose
        try:
            data = json_loads(text)
        except json.JSONDecodeError as exc:
            raise AgentConfigInvalid(
                str(path), f"is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
            ) from exc
        if not isinstance(data, dict):
            raise AgentConfigInvalid(str(path), "does not hold a JSON object at the top level")
        return data

    def _learn_style(self, text: str) -> None:
        body = text.strip()
        self.final_newline = text.endswith("\n")
        if "\n" not in body:
            # One line: JSON.stringify's compact form unless the file spaces its colons.
            self.indent = None
            spaced = re.search(r'"\s*:\s', body) is not None
            self.separators = (", ", ": ") if spaced else (",", ":")
            return
        match = _INDENT.search(body)
        if match:
            unit = match.group(1)
            self.indent = len(unit) if set(unit) == {" "} else unit
        elif '"' in body:  # members on their own lines, none indented
            self.indent = 0

    @staticmethod
    def _canon(data: Any) -> str:
        """An order-preserving canonical form: two documents are the same when these are equal."""
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    def snapshot(self) -> str:
        """The canonical, order-preserving form."""
        return self._canon(self.data)

    def render(self) -> bytes:
        """The file's text with only what changed re-rendered, in the file's style (``json_splice``);
        a new or unscannable file is rendered whole, with its final newline if it had one."""
        style = JsonStyle(self.indent, self.separators, self.ensure_ascii)
        if self._text.strip():
            spliced = splice(self._text, self._original, self.data, style)
            if spliced is not None:
                return spliced.encode("utf-8")
        text = json.dumps(
            self.data, ensure_ascii=self.ensure_ascii, indent=self.indent, separators=self.separators
        )
        return (text + ("\n" if self.final_newline else "")).encode("utf-8")

    def new_table(self, parent: Any, *, holds_tables: bool) -> MutableMapping[str, Any]:
        """A new JSON object."""
        return {}

    def make_value(self, value: Any, parent: Any) -> Any:
        """A private copy, so later edits never alias a caller's value."""
        return copy.deepcopy(value)

    def plain(self, value: Any) -> Any:
        """A deep copy (JSON values are already plain)."""
        return copy.deepcopy(value)

    def same_document(self, text: bytes) -> bool:
        """Same keys, same order, same values."""
        try:
            other = self._parse(text.decode("utf-8-sig"), self.path)
        except (AgentConfigInvalid, UnicodeDecodeError):
            return False
        return self._canon(other) == self._canon(self.data)

    @property
    def changed(self) -> bool:
        """Whether the object differs from what was read (order counts; formatting does not)."""
        return self._canon(self.data) != self._loaded


def _toml_problem(text: str, exc: TOMLKitError) -> str:
    """What is wrong with ``text``: tomllib's words where it refuses it too (tomlkit says
    "Unexpected character: '\\x00' at line 1 col 0" for an array left open at the end)."""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as problem:
        return str(problem)
    return str(exc)


class TomlDoc(ConfigDoc):
    """A TOML file edited through tomlkit, which keeps comments, order and layout."""

    def __init__(self, path: Path, raw: bytes | None) -> None:
        super().__init__(path, raw)
        text = _decode(raw, path, "utf-8")
        try:
            self.doc = tomlkit.parse(text)
        except TOMLKitError as exc:
            raise AgentConfigInvalid(str(path), f"is not valid TOML ({_toml_problem(text, exc)})") from exc
        self.data = self.doc
        self._text = text

    def snapshot(self) -> str:
        """tomlkit's text."""
        return tomlkit.dumps(self.doc)

    def render(self) -> bytes:
        """tomlkit's rendering, ending in as many newlines as the file did (at least one).

        tomlkit puts a blank line before a table it appends and keeps it when that table goes.
        """
        text = tomlkit.dumps(self.doc)
        if self._text:
            want = len(self._text) - len(self._text.rstrip("\n"))
            have = len(text) - len(text.rstrip("\n"))
            if have > want:
                text = text.rstrip("\n") + "\n" * max(want, 1)
        return text.encode("utf-8")

    def new_table(self, parent: Any, *, holds_tables: bool) -> MutableMapping[str, Any]:
        """A table; a super table (no ``[header]`` of its own) when it only holds tables.

        Inside an inline table (``x = { ... }``) only inline tables can go.
        """
        if isinstance(parent, InlineTable):
            return tomlkit.inline_table()
        return tomlkit.table(is_super_table=holds_tables)

    def make_value(self, value: Any, parent: Any) -> Any:
        """Dicts become a table (nested dicts inline tables) followed by a blank line; inside an
        inline table, an inline table."""
        if not isinstance(value, dict):
            return tomlkit.item(value)
        if isinstance(parent, InlineTable):
            inline = tomlkit.inline_table()
            inline.update(value)
            return inline
        table = tomlkit.table()
        for key, item in value.items():
            if isinstance(item, dict):
                inline = tomlkit.inline_table()
                inline.update(item)
                table.add(key, inline)
            else:
                table.add(key, item)
        table.add(tomlkit.nl())
        return table

    def plain(self, value: Any) -> Any:
        """tomlkit items unwrapped to plain Python values."""
        unwrap = getattr(value, "unwrap", None)
        return unwrap() if callable(unwrap) else copy.deepcopy(value)

    def same_document(self, text: bytes) -> bool:
        """Same values, and no comment here that ``text`` lacks (a comment the user added stays)."""
        try:
            other = tomlkit.parse(text.decode("utf-8"))
        except (TOMLKitError, UnicodeDecodeError):
            return False
        if other.unwrap() != self.doc.unwrap():
            return False
        theirs = {line.strip() for line in other.as_string().splitlines()}
        return all(line.strip() in theirs for line in tomlkit.dumps(self.doc).splitlines() if "#" in line)

    @property
    def changed(self) -> bool:
        """Whether the rendered text differs from what was read."""
        return self.render().decode("utf-8") != self._text


def read_bytes(path: Path) -> bytes | None:
    """The bytes of ``path`` (symlinks followed; ``None`` when missing), ``AgentConfigInvalid`` if unreadable."""
    return _read(_real(path))


def load_doc(path: Path) -> ConfigDoc:
    """Load ``path`` (``.toml`` through tomlkit, anything else as JSON); a missing file is empty.

    Raises ``AgentConfigInvalid`` for a file that cannot be read or parsed.
    """
    raw = _read(_real(path))
    return TomlDoc(path, raw) if path.suffix == ".toml" else JsonDoc(path, raw)


def check_writable(path: Path) -> None:
    """``StorageNotWritable`` naming ``path`` when this process may not write it (the file, made
    read-only, or its folder, or a read-only file system): it was ``AGENT_CONFIG_INVALID`` (409), as
    if the file did not parse, and raised after the files before it were written."""
    real = Path(os.path.realpath(path))
    folder = real.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    for entry, mode in ((real, os.W_OK), (folder, os.W_OK | os.X_OK)):
        if os.path.exists(entry) and not os.access(entry, mode):
            read_only = os.statvfs(entry).f_flag & os.ST_RDONLY
            reason = "on a read-only file system" if read_only else "not writable by this user"
            where = str(path) if entry == real else f"{path} (its folder {entry})"
            raise StorageNotWritable(where, reason)


def write_error(path: Path, exc: OSError) -> CofferError:
    """A config file write that failed, typed as a store write is (no permission, a full disk)."""
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return StorageNotWritable(str(path), reason)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return StorageFull(str(path), reason)
    return AgentConfigInvalid(str(path), f"cannot be written ({reason})")
