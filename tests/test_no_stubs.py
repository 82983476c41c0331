"""No method ships as a ``raise NotImplementedError`` stub: an abstract one is declared abstract
(``abc``), so a subclass that forgets it fails when it is made, not when the path is hit (fixes16:
``_index/pg/reach.py``'s ``Reaching.recreate``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("coffer_memory", "coffer_memory_fastapi", "coffer_memory_mcp")


def _raises_not_implemented(node: ast.Raise) -> bool:
    if node.exc is None:
        return False
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def test_no_module_raises_not_implemented_error() -> None:
    stubs = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Raise) and _raises_not_implemented(node)
    ]
    assert stubs == []


def test_reaching_declares_recreate_abstract() -> None:
    pytest.importorskip("psycopg")
    from coffer_memory._index.pg.backend import PostgresIndex
    from coffer_memory._index.pg.reach import Reaching

    assert Reaching.__abstractmethods__ == frozenset({"recreate"})
    assert not PostgresIndex.__abstractmethods__

    class Forgot(Reaching):
        pass

    with pytest.raises(TypeError, match="recreate"):
        Forgot()  # type: ignore[abstract]
