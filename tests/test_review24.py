"""Review of sessions 22-23's lead changes (session 24): what a demanding user found."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import test_distill
import test_distill_grown
from agent_samples import AgentSamples
from http_scripted import ScriptedServer, serve

from coffer_memory import MemoryService
from coffer_memory._scope import project_id_for
from coffer_memory._store.paths import store_name_for_project

samples = test_distill.samples


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    yield from serve(monkeypatch, test_distill_grown.one_insight_per_mark)


@pytest.fixture
def home(tmp_home: Path, llm: ScriptedServer) -> Path:
    test_distill.write_llm_config(tmp_home, llm.url)
    return tmp_home


def _session_with_a_fact(home: Path, samples: AgentSamples, svc: MemoryService) -> tuple[str, str]:
    """A Claude Code session of the sample project with new turns to distill, and the store a
    fact remembered there made."""
    session_id, source = test_distill_grown.session_in_project(home, samples, "claude-code")
    test_distill_grown.claude_turns(source, "MARK-LANDED", minute=1)
    return session_id, svc.remember("release notes go in CHANGES.md", cwd=samples.project_dir).store


def test_a_distillation_names_the_store_its_checkout_lands_in(home: Path, samples: AgentSamples) -> None:
    """A checkout whose store was merged into another's (the offered merge of a second clone)
    lands in the merged store; a distillation there wrote into it but named the retired store."""
    project = samples.project_dir
    copy = project.with_name(f"{project.name}-copy")
    with MemoryService(home) as svc:
        session_id, first = _session_with_a_fact(home, samples, svc)
        shutil.copytree(project, copy, symlinks=True)
        into = svc.repository_offers(cwd=copy)[0].rsplit(" ", 1)[1]
        svc.merge_stores(first, into, cwd=copy)
        assert into != store_name_for_project(project_id_for(project))
        result = svc.distill_session("claude-code", session_id)
        assert result.status == "distilled", result
        assert result.paths and all(f"/{into.removeprefix('project-')}/" in str(p) for p in result.paths)
        assert result.store == into
        assert {e.store for e in svc.distilled_sessions(session_id=session_id)} == {into}


def test_a_distillation_in_a_moved_checkout_names_the_store_it_wrote(
    home: Path, samples: AgentSamples
) -> None:
    """The repository moved (its store stays, found by fingerprint): the distillation of a session
    run before the move, given the checkout's new place, wrote into the store and named a store
    that does not exist (the new path's)."""
    project = samples.project_dir
    moved = project.with_name(f"{project.name}-moved")
    with MemoryService(home) as svc:
        session_id, store = _session_with_a_fact(home, samples, svc)
        project.rename(moved)
        result = svc.distill_session("claude-code", session_id, cwd=moved)
        assert result.status == "distilled", result
        assert result.store == store
        assert [s.name for s in svc.stores()] == [store]
