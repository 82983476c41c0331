"""How a recall's rows become ``MemoryHit``s: each hit's ``Path`` and ``source`` kept per file.

The same files come back recall after recall: a ``Path`` and a source string per hit were a fifth
of a keyword recall's Python, so both are made once per (store, path) and kept.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ._index.keys import strip_header
from ._models import MemoryHit
from ._recall_rows import DocRow
from ._store.paths import scope_of

# The Path and source of each hit's file, by store and path string.
_PATHS: dict[tuple[str, str], tuple[Path, str]] = {}
_PATHS_KEPT = 4096
_SCOPES: dict[str, str] = {}  # each store's scope, as a source names it
# Each hit file's folder as a Path, and the way to a child of it without parsing it (3.11, 3.12).
_DIRS: dict[str, Path] = {}
_CHILD: Callable[[Path, str], Path] | None = getattr(Path, "_make_child_relpath", None)


def _file_path(path: str) -> tuple[Path, str]:
    """``Path(path)`` and its ``str`` (``path`` itself when absolute and normalised: formatting a
    new Path was ~70 k instructions of a first recall), its folder's ``Path`` kept."""
    parent, _, name = path.rpartition("/")
    if _CHILD is None or not parent.startswith("/") or not name or "/." in path or "//" in path:
        return (made := Path(path)), str(made)
    folder = _DIRS.get(parent)
    if folder is None:
        if len(_DIRS) >= _PATHS_KEPT:
            _DIRS.clear()
        folder = _DIRS[parent] = Path(parent)
    return _CHILD(folder, name), path


def make_hit(store: str, doc: DocRow, text: str, score: float) -> MemoryHit:
    """The hit of ``doc`` (a document of ``store``) with its chunk ``text`` and ``score``."""
    key = (store, doc.path)
    held = _PATHS.get(key)
    if held is None:
        if len(_PATHS) >= _PATHS_KEPT:
            _PATHS.clear()
        path, written = _file_path(doc.path)
        scope = _SCOPES.get(store)
        if scope is None:
            if len(_SCOPES) >= _PATHS_KEPT:
                _SCOPES.clear()
            scope = _SCOPES[store] = scope_of(store).value
        held = _PATHS[key] = (path, f"{scope}:{written}")
    return MemoryHit(
        id=doc.id,
        text=strip_header(text),
        score=score,
        source=held[1],
        time=doc.updated_at,
        store=store,
        path=held[0],
        title=doc.title,
    )
