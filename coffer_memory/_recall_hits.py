"""How a recall's rows become ``MemoryHit``s: each hit's ``Path`` and ``source`` kept per file.

The same files come back recall after recall: a ``Path`` and a source string per hit were a fifth
of a keyword recall's Python, so both are made once per (store, path) and kept.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from ._index.keys import HEADER_END, strip_header
from ._models import MemoryHit
from ._recall_rows import DocRow
from ._store.paths import scope_of

# The store, Path and source of each hit's file, by its path string.
_PATHS: dict[str, tuple[str, Path, str]] = {}
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


# ``MemoryHit``'s attrs ``__init__`` (frozen) sets each field through ``object.__setattr__``, a
# method-wrapper call and a type lookup per field: ~11 k instructions a hit, ten hits a recall.
# A hit is made instead as a ``_Building``: the same class but for plain attribute setting (its
# ``__setattr__`` and ``__delattr__`` are ``object``'s, so that Python's stores into its slots
# are specialised, ~15 ns each, where each slot's own setter, a method-wrapper call, was ~60),
# and then made a ``MemoryHit`` (CPython allows the class change: the layout is the same, no slot
# added). The object is then the one the class makes. Only while the class's fields are these,
# none with a converter or validator, and it runs no code after ``__init__``, and only where the
# class change is allowed (all checked when this module loads; otherwise hits are made by
# calling the class).
_FIELDS = ("id", "text", "score", "source", "time", "store", "path", "title")


class _Building(MemoryHit):
    """A ``MemoryHit`` whose fields are being set; never seen outside this module."""

    __slots__ = ()
    __setattr__ = object.__setattr__
    __delattr__ = object.__delattr__


_NEW = object.__new__


def _built(
    id: str, text: str, score: float, source: str, time: datetime, store: str, path: Path | None, title: str
) -> MemoryHit:
    hit: Any = _NEW(_Building)
    hit.id = id
    hit.text = text
    hit.score = score
    hit.source = source
    hit.time = time
    hit.store = store
    hit.path = path
    hit.title = title
    hit.__class__ = MemoryHit
    return hit  # type: ignore[no-any-return]


def _fast() -> bool:
    """Whether hits are made as ``_Building``s (see ``_FIELDS``)."""
    fields = attrs.fields(MemoryHit)
    plain = all(f.converter is None and f.validator is None for f in fields)
    if tuple(f.name for f in fields) != _FIELDS or not plain or hasattr(MemoryHit, "__attrs_post_init__"):
        return False
    values = ("id", "text", 0.0, "source", datetime.min, "store", None, "title")
    try:
        made = _built(*values)
    except TypeError:  # a Python that refuses the class change
        return False
    return type(made) is MemoryHit and made == MemoryHit(*values)


FAST = _fast()


def new_hit(
    id: str, text: str, score: float, source: str, time: datetime, store: str, path: Path | None, title: str
) -> MemoryHit:
    """``MemoryHit(id, text, score, source, time, store, path, title)``, made faster (see ``_FIELDS``)."""
    if not FAST:
        return MemoryHit(id, text, score, source, time, store, path, title)
    return _built(id, text, score, source, time, store, path, title)


def _held(store: str, path: str) -> tuple[str, Path, str]:
    """``store``, the ``Path`` of its file ``path`` and the hit's source, kept by ``path``."""
    if len(_PATHS) >= _PATHS_KEPT:
        _PATHS.clear()
    made, written = _file_path(path)
    scope = _SCOPES.get(store)
    if scope is None:
        if len(_SCOPES) >= _PATHS_KEPT:
            _SCOPES.clear()
        scope = _SCOPES[store] = scope_of(store).value
    held = _PATHS[path] = (store, made, f"{scope}:{written}")
    return held


def make_hit(store: str, doc: DocRow, text: str, score: float) -> MemoryHit:
    """The hit of ``doc`` (a document of ``store``) with its chunk ``text`` and ``score``."""
    # Kept by the path alone (a key tuple made and hashed a hit was ~100 instructions), with the
    # store it was made for: a path another store's hit names is made again.
    path = doc[1]
    held = _PATHS.get(path)
    if held is None or held[0] != store:
        held = _held(store, path)
    if not FAST:
        return MemoryHit(
            doc.id, strip_header(text), score, held[2], doc.updated_at, store, held[1], doc.title
        )
    # ``_built`` written out (a call fewer a hit), and ``strip_header`` too; the row's fields by
    # index (a named field is a descriptor call)
    parts = text.partition(HEADER_END)
    hit: Any = _NEW(_Building)
    hit.id = doc[0]
    hit.text = parts[2] if parts[1] else text
    hit.score = score
    hit.source = held[2]
    hit.time = doc[4]
    hit.store = store
    hit.path = held[1]
    hit.title = doc[2]
    hit.__class__ = MemoryHit
    return hit  # type: ignore[no-any-return]


def rescored(hit: MemoryHit, score: float) -> MemoryHit:
    """``attrs.evolve(hit, score=score)`` made as ``new_hit`` makes hits: evolve reads the class's
    fields and builds keyword arguments for every copy (a hybrid recall copies the keyword hits it
    fuses, after its query embedding)."""
    return new_hit(hit.id, hit.text, score, hit.source, hit.time, hit.store, hit.path, hit.title)
