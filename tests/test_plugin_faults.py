"""A broken plugin (it raises, registers the wrong thing, returns the wrong type) costs only what
it provides: the built-ins and keyword recall keep working, and every error names the plugin."""

from __future__ import annotations

import contextlib
import importlib
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import CliRunner
from test_plugins import _install

from coffer_memory import InvalidInput, MemoryService, Settings
from coffer_memory.plugins import get_grep_backend, get_grep_backends, reload_plugins
from coffer_memory.plugins.manager import plugin_infos

# One module, its faults chosen by the test: FAULT is set on the imported module before use.
BROKEN = """
from coffer_memory.plugins import hookimpl

FAULT = ""


class Grep:
    name = "faulty-grep"
    priority = 1

    def available(self):
        return True

    def search(self, folders, patterns, *, max_lines):
        if FAULT == "search raises":
            raise RuntimeError("search went wrong")
        return None  # "search returns None": not a list of GrepMatch


class Embedder:
    name = model_id = "faulty"
    dimensions = 8

    def available(self):
        return True

    def embed_batch(self, texts):
        value = float("nan") if FAULT == "nan vectors" else 1.0
        return [[value] * 8 for _ in texts]


def embedder(settings):
    if FAULT == "factory raises":
        raise RuntimeError("no model here")
    return Embedder()


class Model:
    name = model_id = "faulty-llm"

    def available(self):
        return True

    def complete(self, messages, *, json_schema=None, max_tokens=None, temperature=0.0):
        if FAULT == "complete raises":
            raise RuntimeError("the model fell over")
        return "not a Completion"


@hookimpl
def register_llms(register):
    register("faulty", lambda settings: Model())


@hookimpl
def register_grep_backends(register):
    if FAULT == "hook raises":
        raise RuntimeError("grep hook went wrong")
    register(42 if FAULT == "registers an int" else Grep())


@hookimpl
def register_embedders(register):
    if FAULT == "hook raises":
        raise RuntimeError("embedder hook went wrong")
    register("faulty", embedder)
"""


@pytest.fixture
def faulty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Installs the plugin as a real distribution (entry point ``faulty``); call it with a fault."""
    site = tmp_path / "site"
    _install(site, "coffer_faulty", BROKEN, "coffer-faulty", "0.1", "faulty")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()

    def arm(fault: str) -> None:
        reload_plugins()
        get_grep_backends()  # imports the entry point
        sys.modules["coffer_faulty"].FAULT = fault

    yield arm
    sys.modules.pop("coffer_faulty", None)
    monkeypatch.undo()
    reload_plugins()


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("hook raises", "RuntimeError: grep hook went wrong"),
        ("registers an int", "TypeError: register(backend) takes a GrepBackend"),
    ],
)
def test_a_plugin_whose_hook_fails_is_skipped_and_named(
    faulty: Callable[[str], None], fault: str, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    """It raised out of the one pluggy call, so no grep backend was left at all (the built-ins'
    registrations were lost with it), with an error that did not say which plugin it was."""
    faulty(fault)
    with caplog.at_level(logging.WARNING, "coffer_memory"):
        backends = get_grep_backends()
    assert {"ripgrep", "python"} <= set(backends) and "faulty-grep" not in backends
    assert any("plugin faulty" in r.getMessage() and said in r.getMessage() for r in caplog.records)
    assert said in (next(p for p in plugin_infos() if p.name == "faulty").error or "")
    with pytest.raises(InvalidInput) as caught:
        get_grep_backend("faulty-grep")
    assert "plugin faulty was skipped: register_grep_backends failed: " + said in str(caught.value)


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("search raises", "RuntimeError: search went wrong"),
        ("search returns None", "TypeError: 'NoneType' object is not iterable"),
    ],
)
def test_a_grep_backend_that_fails_is_a_typed_error_naming_it(
    faulty: Callable[[str], None], fault: str, said: str, tmp_home: Path
) -> None:
    faulty(fault)
    with MemoryService(settings=Settings.load(tmp_home, grep_backend="faulty-grep")) as svc:
        svc.remember("zebra crossing rules", scope="global")
        with pytest.raises(InvalidInput) as caught:
            svc.recall("zebra", stores=["global"], mode="grep")
        assert caught.value.field == "grep_backend"
        assert f"the grep backend 'faulty-grep' (plugin faulty) failed: {said}" in str(caught.value)
        assert len(svc.recall("zebra", stores=["global"], mode="keyword").hits) == 1  # the rest is up


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("factory raises", "(plugin faulty) failed to start: RuntimeError: no model here"),
        ("hook raises", "plugin faulty was skipped: register_embedders failed: RuntimeError: embedder hook"),
    ],
)
def test_an_embedder_plugin_that_fails_leaves_keyword_recall_up(
    faulty: Callable[[str], None], fault: str, said: str, tmp_home: Path
) -> None:
    """Every recall, keyword included, and the index after each remember failed with
    "unexpected RuntimeError": the embedder is built when the index opens."""
    faulty(fault)
    tmp_home.mkdir()
    (tmp_home / "config.toml").write_text(
        '[memory]\nretrieval_modes = ["keyword", "vector", "hybrid"]\n[embedding]\nprovider = "faulty"\n'
    )
    with MemoryService(tmp_home) as svc:
        svc.remember("zebra crossing rules", scope="global")
        assert len(svc.recall("zebra", stores=["global"], mode="keyword").hits) == 1
        res = svc.recall("zebra", stores=["global"], mode="hybrid")
        assert (res.fallback, len(res.hits)) == (True, 1)
        assert said in (svc.doctor().vector_problem or "")


def test_plugins_list_shows_a_plugin_whose_hook_fails(faulty: Callable[[str], None], cli: CliRunner) -> None:
    faulty("hook raises")
    out = cli("plugins", "list")
    line = next(row for row in out.stdout.splitlines() if row.startswith("faulty "))
    assert "register_embedders failed: RuntimeError: embedder hook went wrong" in line
    assert "register_grep_backends failed: RuntimeError: grep hook went wrong" in line


def test_an_embedder_returning_nan_is_refused_not_stored(
    faulty: Callable[[str], None], tmp_home: Path
) -> None:
    """NaN vectors were stored and every vector and hybrid hit came back with score NaN (which
    JSON cannot carry); they are an embedding failure now: keyword answers, with fallback=True."""
    pytest.importorskip("sqlite_vec")
    faulty("nan vectors")
    tmp_home.mkdir()
    (tmp_home / "config.toml").write_text(
        '[memory]\nretrieval_modes = ["keyword", "vector", "hybrid"]\n[embedding]\nprovider = "faulty"\n'
    )
    with MemoryService(tmp_home) as svc:
        svc.remember("zebra crossing rules", scope="global")
        for mode in ("vector", "hybrid"):
            res = svc.recall("zebra", stores=["global"], mode=mode)
            assert res.fallback and [h.score == h.score for h in res.hits] == [True], (mode, res.hits)


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("complete raises", "the LLM 'faulty-llm' (plugin faulty) failed: RuntimeError: the model fell over"),
        ("complete returns a str", "the LLM 'faulty-llm' (plugin faulty) returned str, not a Completion"),
    ],
)
def test_an_llm_plugin_that_fails_is_llm_unavailable_naming_the_plugin(
    faulty: Callable[[str], None], fault: str, said: str, tmp_home: Path
) -> None:
    """``coffer organize`` stopped at the first item with "unexpected RuntimeError" (or
    AttributeError: 'str' object has no attribute 'text'), naming no plugin. It is
    LLM_UNAVAILABLE naming it; with nothing filed the pass fails with it (docs/organizer.md),
    and the item stays."""
    from coffer_memory.plugins import LLMUnavailable

    faulty(fault)
    tmp_home.mkdir()
    (tmp_home / "config.toml").write_text('[llm]\nprovider = "faulty"\nmodel = "m"\n')
    with MemoryService(tmp_home) as svc:
        svc.remember("Deploy with make ship.", scope="global")
        with pytest.raises(LLMUnavailable) as err:
            svc.organize("global")
        assert err.value.message == said
        assert svc.list_facts(store="global").items[0].fact.body == "Deploy with make ship."


def test_a_misspelt_hook_is_reported_not_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: CliRunner
) -> None:
    """``def register_embedder`` (the hook is ``register_embedders``) registered nothing, and
    ``coffer plugins list`` said the plugin was ``ok``: pluggy keeps a hookimpl with no hookspec
    without a word."""
    with _one_hook(tmp_path, monkeypatch, "typo", "register_embedder(register)"):
        reload_plugins()
        info = next(p for p in plugin_infos() if p.name == "typo")
        assert info.error is not None and info.error.startswith(
            "register_embedder is not a coffer_memory hook (they are register_embedders, "
        )
        line = next(row for row in cli("plugins", "list").stdout.splitlines() if row.startswith("typo "))
        assert "some hooks skipped: register_embedder is not a coffer_memory hook" in line


@contextlib.contextmanager
def _one_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, signature: str) -> Iterator[None]:
    """A plugin ``name`` installed as a real distribution, with one ``@hookimpl def SIGNATURE``."""
    source = f"from coffer_memory.plugins import hookimpl\n\n\n@hookimpl\ndef {signature}:\n    register('{name}', print)\n"
    _install(tmp_path / "site", f"coffer_{name}", source, f"coffer-{name}", "0.1", name)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    try:
        yield
    finally:
        sys.modules.pop(f"coffer_{name}", None)
        monkeypatch.undo()
        reload_plugins()


def test_a_hook_of_the_wrong_signature_is_one_line_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: CliRunner, caplog: pytest.LogCaptureFixture
) -> None:
    """pluggy refuses ``def register_embedders(register, extra)`` with a three-line message, which
    split ``coffer plugins list``'s table (the status ran on over two more lines) and every
    warning, ``coffer doctor``'s plugin line included."""
    with _one_hook(tmp_path, monkeypatch, "twoargs", "register_embedders(register, extra)"):
        # A plugin that fails to load is logged at INFO (said where it matters: session 28).
        with caplog.at_level(logging.INFO, "coffer_memory"):
            reload_plugins()
            get_grep_backends()  # loads the entry points
        said = [r.getMessage() for r in caplog.records if "twoargs" in r.getMessage()]
        assert said and all("\n" not in m for m in said), said
        listed = cli("plugins", "list").stdout.splitlines()
        [line] = [row for row in listed if "twoargs" in row or "hookimpl" in row or "hookspec" in row]
        assert line.startswith("twoargs ") and "PluginValidationError: Plugin 'twoargs'" in line
        assert "Argument(s) {'extra'} are declared in the hookimpl" in line
