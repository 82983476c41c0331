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


# ``MemoryHit``'s attrs ``__init__`` (frozen) sets each field through ``object.__setattr__``, a
# method-wrapper call and a type lookup per field: ~11 k instructions a hit, ten hits a recall.
# Its slots set through their own descriptors make the same object in half of that. Only while
# the class's fields are these, none with a converter or validator, and it runs no code after
# ``__init__`` (checked when this module loads; otherwise hits are made by calling the class).
_FIELDS = ("id", "text", "score", "source", "time", "store", "path", "title")


def _slot_setters() -> tuple[Callable[[Any, Any], None], ...] | None:
    fields = attrs.fields(MemoryHit)
    plain = all(f.converter is None and f.validator is None for f in fields)
    if tuple(f.name for f in fields) != _FIELDS or not plain or hasattr(MemoryHit, "__attrs_post_init__"):
        return None
    return tuple(vars(MemoryHit)[name].__set__ for name in _FIELDS)


_SETTERS = _slot_setters()


def _by_class(hit: Any, value: Any) -> None:
    """In the setters' places when there are none: never called (hits are then made by the class)."""
    raise AssertionError("MemoryHit's slot setters are not in use")


# Each setter a global of its own: unpacking the tuple in every call cost a hit ~500 instructions.
_S_ID, _S_TEXT, _S_SCORE, _S_SOURCE, _S_TIME, _S_STORE, _S_PATH, _S_TITLE = _SETTERS or (_by_class,) * len(
    _FIELDS
)
_NEW = object.__new__


def new_hit(
    id: str, text: str, score: float, source: str, time: datetime, store: str, path: Path | None, title: str
) -> MemoryHit:
    """``MemoryHit(id, text, score, source, time, store, path, title)``, made faster (see ``_FIELDS``)."""
    if _SETTERS is None:
        return MemoryHit(id, text, score, source, time, store, path, title)
    hit = _NEW(MemoryHit)
    _S_ID(hit, id)
    _S_TEXT(hit, text)
    _S_SCORE(hit, score)
    _S_SOURCE(hit, source)
    _S_TIME(hit, time)
    _S_STORE(hit, store)
    _S_PATH(hit, path)
    _S_TITLE(hit, title)
    return hit


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
    if _SETTERS is None:
        return MemoryHit(
            doc.id, strip_header(text), score, held[1], doc.updated_at, store, held[0], doc.title
        )
    # ``new_hit`` written out: a call fewer a hit
    hit = _NEW(MemoryHit)
    _S_ID(hit, doc.id)
    _S_TEXT(hit, strip_header(text))
    _S_SCORE(hit, score)
    _S_SOURCE(hit, held[1])
    _S_TIME(hit, doc.updated_at)
    _S_STORE(hit, store)
    _S_PATH(hit, held[0])
    _S_TITLE(hit, doc.title)
    return hit


def rescored(hit: MemoryHit, score: float) -> MemoryHit:
    """``attrs.evolve(hit, score=score)`` made as ``new_hit`` makes hits: evolve reads the class's
    fields and builds keyword arguments for every copy (a hybrid recall copies the keyword hits it
    fuses, after its query embedding)."""
    return new_hit(hit.id, hit.text, score, hit.source, hit.time, hit.store, hit.path, hit.title)
