"""An embedder plugin that returns the wrong thing (None, too few rows, a row of another width, a
row of strings) is an embedding failure naming its model: keyword answers (``fallback=True``),
never a bare ``ValueError`` from the vector search, and the log line says what was wrong."""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_plugins import _install

from coffer_memory import MemoryService
from coffer_memory.plugins import reload_plugins

pytest.importorskip("sqlite_vec")

# FAULT is set on the imported module by the test.
PLUGIN = """
from coffer_memory.plugins import hookimpl

FAULT = ""


def row(text, width):
    return [float(len(text) % 7 + 1)] + [1.0] * (width - 1)


class Shapeless:
    name = "shapeless"
    model_id = "shapeless-8"
    dimensions = 8

    def available(self):
        return True

    def embed_batch(self, texts):
        if FAULT == "returns None":
            return None
        if FAULT == "one row short":
            return [row(t, 8) for t in texts][:-1]
        if FAULT == "rows of strings":
            return [["a"] * 8 for _ in texts]
        if FAULT == "rows one wider":
            return [row(t, 9) for t in texts]
        return [row(t, 8) for t in texts]


@hookimpl
def register_embedders(register):
    register("shapeless", lambda settings: Shapeless())
"""


@pytest.fixture
def shapeless(
    tmp_path: Path, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str], None]]:
    """The plugin installed as a real distribution and selected in the home's config."""
    site = tmp_path / "site"
    _install(site, "coffer_shapeless", PLUGIN, "coffer-shapeless", "0.1", "shapeless")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    reload_plugins()
    tmp_home.mkdir()
    (tmp_home / "config.toml").write_text(
        '[memory]\nretrieval_modes = ["keyword", "vector", "hybrid"]\n[embedding]\nprovider = "shapeless"\n'
    )

    def arm(fault: str) -> None:
        import coffer_shapeless  # type: ignore[import-not-found]

        coffer_shapeless.FAULT = fault

    yield arm
    sys.modules.pop("coffer_shapeless", None)
    monkeypatch.undo()
    reload_plugins()


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_a_query_vector_of_another_width_falls_back_to_keyword(
    shapeless: Callable[[str], None], tmp_home: Path, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The stored rows were 8 wide and the query's 9: every vector and hybrid recall failed with
    "unexpected ValueError: operands could not be broadcast together" (numpy's words)."""
    shapeless("")
    with MemoryService(tmp_home) as svc:
        svc.remember("zebra crossing rules", scope="global")
        assert not svc.recall("zebra", stores=["global"], mode="vector").fallback
        shapeless("rows one wider")
        with caplog.at_level(logging.WARNING, "coffer_memory"):
            res = svc.recall("zebra crossing", stores=["global"], mode=mode)
    assert (res.fallback, [h.text for h in res.hits]) == (True, ["zebra crossing rules"])
    said = [r.getMessage() for r in caplog.records]
    assert any(
        "embedder shapeless-8 returned a query vector of 9 dimensions, expected 8" in m for m in said
    ), said


@pytest.mark.parametrize(
    ("fault", "document", "query"),
    [
        (
            "returns None",
            "embedder shapeless-8 returned NoneType from embed_batch, not a list of vectors",
            "embedder shapeless-8 returned NoneType from embed_batch, not a list of vectors",
        ),
        (
            "one row short",
            "embedder shapeless-8 returned 0 vectors for 1 texts",
            "embedder shapeless-8 returned 0 vectors for 1 texts",
        ),
        (
            "rows of strings",
            "embedder shapeless-8 returned a vector that is not all floats: could not convert string to float",
            "embedder shapeless-8 returned a query vector that is not all floats",
        ),
    ],
)
def test_a_batch_of_the_wrong_shape_is_said_naming_the_model(
    shapeless: Callable[[str], None],
    tmp_home: Path,
    fault: str,
    document: str,
    query: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The log said only "object of type 'NoneType' has no len()", "list index out of range" or
    "unsupported operand type(s) for +: 'int' and 'str'": no embedder, no hint of what it returned."""
    shapeless(fault)
    with MemoryService(tmp_home) as svc:
        with caplog.at_level(logging.WARNING, "coffer_memory"):
            svc.remember("zebra crossing rules", scope="global")
        said = [r.getMessage() for r in caplog.records]
        assert any(document in m for m in said), said
    caplog.clear()
    for path in tmp_home.glob("index.db*"):  # a new index (no back-off): good rows, a bad query
        path.unlink()
    shapeless("")
    with MemoryService(tmp_home) as svc:
        svc.list_facts(store="global")
        shapeless(fault)
        with caplog.at_level(logging.WARNING, "coffer_memory"):
            res = svc.recall("zebra", stores=["global"], mode="vector")
    assert (res.fallback, len(res.hits)) == (True, 1)
    said = [r.getMessage() for r in caplog.records]
    assert any(query in m for m in said), said


def test_doctor_names_the_embedder_in_use(shapeless: Callable[[str], None], tmp_home: Path, cli: Any) -> None:
    """``coffer doctor`` said nothing of the embedder when it worked: a plugin's author could not
    tell that vector recall ran on the plugin (only a failure was printed, as ``vector:``)."""
    shapeless("")
    with MemoryService(tmp_home) as svc:
        svc.remember("zebra crossing rules", scope="global")
        assert svc.doctor().embedder == "shapeless (model shapeless-8, 8 dimensions)"
    out = cli("doctor")
    assert out.returncode == 0 and "embedder:     shapeless (model shapeless-8, 8 dimensions)" in out.stdout
    (tmp_home / "config.toml").write_text("")  # keyword recall only: no embedder
    with MemoryService(tmp_home) as svc:
        assert svc.doctor().embedder is None
