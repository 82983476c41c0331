"""Vector modes enabled but unable to run: doctor says which provider is missing and what to do,
and recall answers from keyword, saying so (a real plugin embedder that is not available)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import CliRunner, example_embedder

from coffer_memory import MemoryService, Settings
from coffer_memory.plugins import get_plugin_manager, hookimpl


class _Missing(example_embedder()):  # type: ignore[misc]
    """The docs' example embedder, as if its model package were not installed."""

    def available(self) -> bool:
        return False


class _MissingPlugin:
    @hookimpl
    def register_embedders(self, register: Callable[[str, object], None]) -> None:
        register("not-installed", lambda _settings: _Missing())


@pytest.fixture
def missing() -> Iterator[None]:
    get_plugin_manager().register(_MissingPlugin(), name="not-installed-test")
    try:
        yield
    finally:
        get_plugin_manager().unregister(name="not-installed-test")


def _settings(home: Path, modes: list[str]) -> Settings:
    return Settings.load(home, embedding={"provider": "not-installed"}, memory={"retrieval_modes": modes})


def test_doctor_names_the_missing_embedder_and_recall_says_it_fell_back(
    missing: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with MemoryService(settings=_settings(tmp_path / "home", ["grep", "keyword", "vector", "hybrid"])) as svc:
        svc.remember("Deploys go out on Tuesdays.", scope="global")
        report = svc.doctor()
        assert report.vector_problem is not None and not report.ok
        assert "'not-installed' is not available" in report.vector_problem
        assert "recall answers from keyword" in report.vector_problem
        with caplog.at_level(logging.WARNING, logger="coffer_memory"):
            result = svc.recall("deploys", stores=["global"], mode="hybrid")
        assert result.fallback and [h.text for h in result.hits] == ["Deploys go out on Tuesdays."]
        assert any("'not-installed' is not available" in r.getMessage() for r in caplog.records)


def test_no_vector_problem_when_vector_modes_are_off(missing: None, tmp_path: Path) -> None:
    with MemoryService(settings=_settings(tmp_path / "home", ["grep", "keyword"])) as svc:
        report = svc.doctor()
        assert report.vector_problem is None and report.ok


def test_coffer_doctor_prints_the_vector_line_and_fails(
    missing: None, cli: CliRunner, tmp_home: Path
) -> None:
    tmp_home.mkdir(parents=True, exist_ok=True)
    (tmp_home / "config.toml").write_text(
        '[memory]\nretrieval_modes = ["grep", "keyword", "hybrid"]\n[embedding]\nprovider = "not-installed"\n'
    )
    out = cli("doctor")
    assert out.returncode == 1, out.stderr
    assert (
        "vector: vector recall is enabled but the embedding provider 'not-installed' is not available"
        in out.stdout
    )
    assert "leave vector and hybrid out of retrieval_modes" in out.stdout
