"""A plugin whose factory (or ``available()``) fails costs only what it provides, with an error that
names it: the LLM and index-backend factories were called bare, so their exceptions surfaced as
"unexpected ZeroDivisionError" with no plugin named, and with ``[organize] auto`` on, a write whose
file was already durable failed because arming the auto-organize timer asked for the LLM."""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import CliRunner
from test_plugins import _install

from coffer_memory import IndexUnavailable, MemoryService
from coffer_memory._llm import LLMUnavailable
from coffer_memory.plugins import get_grep_backends, reload_plugins

FACTORIES = """
from coffer_memory.plugins import hookimpl

FAULT = ""


class Model:
    name = model_id = "broken-llm"

    def available(self):
        raise RuntimeError("available() fell over")

    def complete(self, messages, **options):
        raise AssertionError("never called: available() failed")


def llm(settings):
    if FAULT == "llm factory raises":
        return 1 / 0
    if FAULT == "llm factory returns a str":
        return "not an LLM"
    return Model()


def embedder(settings):
    return None  # forgot the return: not an Embedder


def backend(settings):
    return 1 / 0


@hookimpl
def register_llms(register):
    register("broken", llm)


@hookimpl
def register_embedders(register):
    register("hollow", embedder)


@hookimpl
def register_index_backends(register):
    register("broken-index", backend)
"""


@pytest.fixture
def broken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """The plugin installed as a real distribution (entry point ``factories``); call it with a fault."""
    site = tmp_path / "site"
    _install(site, "coffer_factories", FACTORIES, "coffer-factories", "0.1", "factories")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()

    def arm(fault: str) -> None:
        reload_plugins()
        get_grep_backends()  # imports the entry point
        sys.modules["coffer_factories"].FAULT = fault

    yield arm
    sys.modules.pop("coffer_factories", None)
    monkeypatch.undo()
    reload_plugins()


def test_an_llm_factory_that_raises_is_a_typed_error_naming_the_plugin(
    broken: Callable[[str], None], tmp_home: Path, cli: CliRunner
) -> None:
    """``coffer organize`` said "unexpected ZeroDivisionError: division by zero", naming no plugin."""
    broken("llm factory raises")
    tmp_home.mkdir()
    (tmp_home / "config.toml").write_text('[llm]\nprovider = "broken"\n')
    with MemoryService(tmp_home) as svc:
        svc.remember("Deploy with make ship.", scope="global")
        with pytest.raises(LLMUnavailable) as caught:
            svc.organize("global")
    said = "the LLM provider 'broken' (plugin factories) failed to start: ZeroDivisionError: division by zero"
    assert said in str(caught.value)
    result = cli("organize", "--global")
    assert result.returncode == 1 and f"error: LLM_UNAVAILABLE: {said}" in result.stderr, result.stderr
    assert "unexpected" not in result.stderr


@pytest.mark.parametrize("fault", ["llm factory raises", "unknown provider"])
def test_auto_organize_never_fails_a_write_that_landed(
    broken: Callable[[str], None], fault: str, tmp_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With ``[organize] auto = true``, remember wrote and indexed the fact and then raised (the
    ZeroDivisionError, or InvalidInput for a misspelt provider) while arming the timer: the caller
    was told the write failed, and an agent wrote it again."""
    broken(fault)
    tmp_home.mkdir()
    provider = "broken" if fault == "llm factory raises" else "brokne"
    (tmp_home / "config.toml").write_text(f'[organize]\nauto = true\n\n[llm]\nprovider = "{provider}"\n')
    with MemoryService(tmp_home) as svc, caplog.at_level(logging.WARNING, "coffer_memory"):
        written = svc.remember("Deploy with make ship.", scope="global")
        assert written.created
        assert [h.id for h in svc.recall("ship", stores=["global"]).hits] == [written.fact.id]
    warned = [r.getMessage() for r in caplog.records if "auto-organize" in r.getMessage()]
    assert warned and provider in warned[0], warned


def test_an_llm_whose_available_raises_is_said_naming_the_plugin(
    broken: Callable[[str], None], tmp_home: Path, cli: CliRunner
) -> None:
    """``coffer organize`` answered "the [llm] provider 'broken' has no model: set llm.model",
    a fix that has nothing to do with the plugin's ``available()`` raising."""
    broken("")
    tmp_home.mkdir()
    (tmp_home / "config.toml").write_text('[llm]\nprovider = "broken"\n')
    cli("remember", "--global", "Deploy with make ship.")
    result = cli("organize", "--global")
    assert "set llm.model" not in result.stdout, result.stdout
    said = (
        "the LLM 'broken-llm' (plugin factories) failed in available(): RuntimeError: available() fell over"
    )
    assert said in result.stdout + result.stderr, (result.stdout, result.stderr)


def test_an_index_backend_factory_that_raises_is_index_unavailable_naming_the_plugin(
    broken: Callable[[str], None], tmp_home: Path, cli: CliRunner
) -> None:
    """Every command failed with "unexpected ZeroDivisionError", naming no plugin."""
    broken("")
    tmp_home.mkdir()
    (tmp_home / "config.toml").write_text('[index]\nbackend = "broken-index"\n')
    with MemoryService(tmp_home) as svc, pytest.raises(IndexUnavailable) as caught:
        svc.recall("ship", stores=["global"])
    said = "the broken-index index is unavailable: its plugin factories failed to start: ZeroDivisionError"
    assert said in str(caught.value)
    result = cli("recall", "ship", "--store", "global")
    assert result.returncode == 1 and f"error: INDEX_UNAVAILABLE: {said}" in result.stderr, result.stderr


def test_an_llm_factory_returning_no_llm_is_a_typed_error_naming_the_plugin(
    broken: Callable[[str], None], tmp_home: Path
) -> None:
    """It failed ``organize`` with "unexpected AttributeError: 'str' object has no attribute 'name'"."""
    broken("llm factory returns a str")
    tmp_home.mkdir()
    (tmp_home / "config.toml").write_text('[llm]\nprovider = "broken"\n')
    with MemoryService(tmp_home) as svc, pytest.raises(LLMUnavailable) as caught:
        svc.organize("global")
    assert "the LLM provider 'broken' (plugin factories) returned str, not an LLM" in str(caught.value)


def test_an_embedder_factory_returning_none_is_said_naming_the_plugin(
    broken: Callable[[str], None], tmp_home: Path, cli: CliRunner
) -> None:
    """Recall fell back to keyword with "the embedding provider 'hollow' is not available: install
    what its plugin needs", naming no plugin and a fix that was not the problem."""
    broken("")
    tmp_home.mkdir()
    (tmp_home / "config.toml").write_text(
        '[memory]\nretrieval_modes = ["keyword", "vector"]\n\n[embedding]\nprovider = "hollow"\n'
    )
    cli("remember", "--global", "Deploy with make ship.")
    result = cli("recall", "ship", "--store", "global", "--mode", "vector")
    assert result.returncode == 0 and "fell back to keyword" in result.stdout, result.stdout
    said = "the embedding provider 'hollow' (plugin factories) returned NoneType, not an Embedder"
    assert said in result.stderr, result.stderr
    assert "install what its plugin needs" not in result.stderr
