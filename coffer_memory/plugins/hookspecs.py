"""Hook specifications. Plugins implement them with ``@hookimpl`` (entry-point group ``coffer_memory``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import attrs
import pluggy

hookspec = pluggy.HookspecMarker("coffer_memory")
hookimpl = pluggy.HookimplMarker("coffer_memory")


@attrs.frozen
class GrepMatch:
    """One matching line: the file, its 1-based line number, the line, which patterns it holds."""

    path: Path
    line_number: int
    line: str
    patterns: frozenset[int]


@runtime_checkable
class GrepBackend(Protocol):
    """Searches Markdown files under folders for fixed strings, ignoring case."""

    name: str
    priority: int  # higher wins when several are available

    def available(self) -> bool:
        """True when the backend can run on this machine."""
        ...

    def search(self, folders: Sequence[Path], patterns: Sequence[str], *, max_lines: int) -> list[GrepMatch]:
        """Lines of ``*.md`` files under ``folders`` holding any of ``patterns`` (fixed strings)."""
        ...


class CofferHookSpecs:
    """The hooks a coffer-memory plugin may implement."""

    @hookspec
    def register_grep_backends(self, register: Callable[[GrepBackend], None]) -> None:
        """Register grep backends by calling ``register(backend)`` once per backend."""
