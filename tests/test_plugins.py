"""Plugins: built-ins register like outside packages; entry points load lazily."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import CliRunner

from coffer_memory import InvalidInput, MemoryService, Settings
from coffer_memory.plugins import GrepBackend, get_grep_backend, get_grep_backends, reload_plugins
from coffer_memory.plugins.hookspecs import CofferHookSpecs
from coffer_memory.plugins.manager import BUILTIN_PLUGINS, plugin_infos

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


def _install(site: Path, module: str, source: str, dist: str, version: str, entry: str) -> None:
    """A real distribution (module + dist-info with an entry point in the coffer_memory group)."""
    site.mkdir(exist_ok=True)
    (site / f"{module}.py").write_text(source)
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[coffer_memory]\n{entry} = {module}\n")


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A real distribution on sys.path whose entry point is in the coffer_memory group."""
    site = tmp_path / "site"
    _install(site, "coffer_firstline", PLUGIN, "coffer-firstline", "0.1", "firstline")
    monkeypatch.syspath_prepend(str(site))
    reload_plugins()
    yield site
    sys.modules.pop("coffer_firstline", None)
    monkeypatch.undo()
    reload_plugins()


@pytest.fixture
def broken_plugin(installed_plugin: Path) -> Iterator[Path]:
    """Beside the working plugin, a distribution whose entry-point module raises on import."""
    source = 'raise RuntimeError("this plugin is broken")\n'
    _install(installed_plugin, "coffer_broken", source, "coffer-broken", "2.3", "broken")
    importlib.invalidate_caches()
    reload_plugins()
    yield installed_plugin
    sys.modules.pop("coffer_broken", None)


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


def test_a_broken_plugin_is_skipped_and_reported(
    broken_plugin: Path, cli: CliRunner, caplog: pytest.LogCaptureFixture
) -> None:
    infos = {p.name: p for p in plugin_infos()}
    assert infos["broken"].error == "RuntimeError: this plugin is broken"
    assert (infos["broken"].distribution, infos["broken"].version) == ("coffer-broken", "2.3")
    assert infos["firstline"].error is None and infos["firstline"].hooks == ("register_grep_backends",)
    assert infos["firstline"].version == "0.1" and infos["firstline"].source == "entry point"
    assert get_grep_backend().name == "first-line"  # the working plugin still serves

    out = cli("plugins", "list")
    assert out.returncode == 0
    line = next(row for row in out.stdout.splitlines() if row.startswith("broken "))
    assert "2.3" in line and "failed to load, skipped: RuntimeError: this plugin is broken" in line
    assert "grep_backends" in next(row for row in out.stdout.splitlines() if row.startswith("firstline "))

    assert cli("remember", "still works", "--global").returncode == 0
    out = cli("doctor")
    assert out.returncode == 1
    assert "plugin: broken (coffer-broken) failed to load: RuntimeError" in out.stdout
    assert "fix or uninstall the broken plugins" in out.stdout
    report = json.loads(cli("doctor", "--json").stdout)
    assert [p["name"] for p in report["broken_plugins"]] == ["broken"]


def test_builtins_are_listed_with_the_hooks_they_implement() -> None:
    infos = {p.name: p for p in plugin_infos()}
    for module_name, hooks in BUILTIN_PLUGINS.items():
        module = importlib.import_module(module_name)
        specs = [name for name in dir(CofferHookSpecs) if name.startswith("register_")]
        implemented = tuple(sorted(name for name in dir(module) if name in specs))
        assert implemented == tuple(sorted(hooks)), module_name
        assert infos[module_name].hooks == implemented and infos[module_name].source == "builtin"
