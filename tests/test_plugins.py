"""Plugins: built-ins register like outside packages; entry points load lazily."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from coffer_memory import InvalidInput, MemoryService, Settings
from coffer_memory.plugins import GrepBackend, get_grep_backend, get_grep_backends, reload_plugins
from coffer_memory.plugins.hookspecs import CofferHookSpecs

PLUGIN = '''
from pathlib import Path
from coffer_memory.plugins import GrepMatch, hookimpl


class FirstLineGrep:
    """Matches only the first line of each file: easy to tell apart from the built-ins."""

    name = "first-line"
    priority = 1000

    def available(self):
        return True

    def search(self, folders, patterns, *, max_lines):
        out = []
        for folder in folders:
            for path in sorted(Path(folder).rglob("*.md")):
                if path.name.startswith("."):
                    continue
                first = path.read_text().splitlines()[0]
                hit = frozenset(i for i, p in enumerate(patterns) if p.lower() in first.lower())
                if hit:
                    out.append(GrepMatch(path, 1, first, hit))
        return out[:max_lines]


@hookimpl
def register_grep_backends(register):
    register(FirstLineGrep())
'''


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A real distribution on sys.path whose entry point is in the coffer_memory group."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "coffer_firstline.py").write_text(PLUGIN)
    dist = site / "coffer_firstline-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: coffer-firstline\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[coffer_memory]\nfirstline = coffer_firstline\n")
    monkeypatch.syspath_prepend(str(site))
    reload_plugins()
    yield site
    sys.modules.pop("coffer_firstline", None)
    monkeypatch.undo()
    reload_plugins()


def test_builtins_are_registered_through_the_hook() -> None:
    backends = get_grep_backends()
    assert {"ripgrep", "python"} <= set(backends)
    assert all(isinstance(b, GrepBackend) for b in backends.values())
    assert get_grep_backend().name == "ripgrep"
    assert get_grep_backend("python").name == "python"
    with pytest.raises(InvalidInput):
        get_grep_backend("nope")


def test_entry_point_plugin_is_loaded_and_used(installed_plugin: Path, tmp_home: Path) -> None:
    assert get_grep_backend().name == "first-line"
    with MemoryService(settings=Settings.load(tmp_home, grep_backend="first-line")) as svc:
        svc.remember("zebra crossing rules", title="zebra", scope="global")
        hits = svc.recall("zebra", stores=["global"], mode="grep").hits
        # The first line of a fact file is '---': the plugin, not a built-in, answered.
        assert hits == ()
        (svc.paths("global").knowledge / "plain.md").write_text("zebra on the first line\n")
        assert [h.title for h in svc.recall("zebra", stores=["global"], mode="grep").hits] == ["plain"]


def test_coffer_load_plugins_restricts_entry_points(
    installed_plugin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COFFER_LOAD_PLUGINS", "")
    reload_plugins()
    assert "first-line" not in get_grep_backends()
    monkeypatch.setenv("COFFER_LOAD_PLUGINS", "firstline")
    reload_plugins()
    assert "first-line" in get_grep_backends()


def test_every_hook_is_documented() -> None:
    docs = (Path(__file__).parent.parent / "docs" / "plugins.md").read_text()
    hooks = [name for name in dir(CofferHookSpecs) if name.startswith("register_")]
    assert hooks
    for name in hooks:
        assert f"{name}(register)" in docs, f"hook {name} is not documented in docs/plugins.md"
