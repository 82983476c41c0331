"""What every source reader shares: reading a source file safely, walking a folder, content keys."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from .._errors import InvalidImport
from .._store.files import FactParseError, read_bytes
from .models import Item, Skipped

Plan = tuple[list[Item], list[Skipped]]


class StoreResolver(Protocol):
    """How a source reader finds the store an entry belongs to (the service implements it)."""

    def project_store(self, path: Path) -> str:
        """The project store of the repository that contains ``path`` (``ScopeUnresolved`` outside one)."""

    def claude_project_store(self, encoded: str, transcripts: Path) -> str | None:
        """The store of the project Claude Code keeps under ``projects/<encoded>/``, if it can be told."""


def content_sha(*parts: str | bytes) -> str:
    """sha256 over the parts (NUL-separated): the key that makes a second import a no-op."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part)
        digest.update(b"\x00")
    return digest.hexdigest()


def read_source(path: Path, max_bytes: int) -> tuple[bytes, datetime]:
    """A source file's bytes and its mtime (UTC); never through a symbolic link, never over ``max_bytes``."""
    try:
        data, st = read_bytes(path, max_bytes=max_bytes)
    except FactParseError:
        raise InvalidImport("too_large", f"{path} is over {max_bytes} bytes", source=str(path)) from None
    except OSError as exc:
        if os.path.islink(path):
            raise InvalidImport("symlink", f"{path} is a symbolic link", source=str(path)) from None
        raise InvalidImport(
            "not_found", f"cannot read {path}: {exc.strerror or exc}", source=str(path)
        ) from None
    return data, datetime.fromtimestamp(st.st_mtime, UTC)


def source_text(data: bytes) -> str:
    """A source file's text (UTF-8, a BOM dropped, undecodable bytes replaced)."""
    return data.decode("utf-8", errors="replace").removeprefix("\ufeff")


def walk(root: Path, suffixes: tuple[str, ...]) -> Iterator[Path]:
    """Regular files under ``root`` ending in ``suffixes``, sorted; hidden entries and links skipped."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            path = Path(dirpath) / name
            if name.startswith(".") or not name.endswith(suffixes):
                continue
            if stat.S_ISREG(os.lstat(path).st_mode):
                found.append(path)
    yield from sorted(found)


def first_heading(body: str) -> str | None:
    """The text of the first Markdown heading, if any."""
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            text = stripped.lstrip("#").strip()
            if text:
                return text
    return None
