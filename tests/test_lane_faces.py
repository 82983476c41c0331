"""What each face (Python, async Python, CLI, REST, MCP) answers where a lane cannot be: the global
store's journal, and recall from a worktree whose main checkout moved. One behaviour on every face."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import CliRunner, git, make_repo
from fastapi.testclient import TestClient

from coffer_memory import AsyncMemoryService, InvalidInput, MemoryService, ScopeUnresolved

API = "/api/v1/memory_stores"


def _rest_error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code
    return error


# -- the global store has no journal ------------------------------------------------------------
def test_the_global_journal_is_invalid_input_on_every_face(
    svc: MemoryService, client: TestClient, cli: CliRunner, repo: Path
) -> None:
    """REST answered ``{"files": []}`` for the global store's journal where Python and the CLI
    said INVALID_INPUT: an empty journal reads as "nothing happened". Now every face refuses it
    the same way and says what to do (name a project store, or a cwd in the repository)."""
    svc.journal_append("Shipped the billing migration.", cwd=repo)  # a project journal exists

    with pytest.raises(InvalidInput) as python:
        svc.journal(store="global")
    assert python.value.field == "store"
    message = python.value.message
    assert "global store has no journal" in message and "project store" in message
    assert "coffer stores list" in message

    async def read_async() -> InvalidInput:
        async with AsyncMemoryService(svc) as asvc:
            with pytest.raises(InvalidInput) as raised:
                await asvc.journal(store="global")
            return raised.value

    assert anyio.run(read_async).message == message

    rest = _rest_error(client.get(f"{API}/global/journal"), 422, "INVALID_INPUT")
    assert rest["message"] == message and rest["details"]["field"] == "store"
    # Deleting a day of it is the same refusal, not a 404 for a day that could never exist.
    gone = _rest_error(client.delete(f"{API}/global/journal/2026-11-29"), 422, "INVALID_INPUT")
    assert gone["message"] == message

    out = cli("journal", "--store", "global", cwd=repo)
    assert out.returncode != 0 and out.stdout == ""
    assert out.stderr.strip() == f"error: INVALID_INPUT: {message}"
    as_json = cli("journal", "--store", "global", "--json", cwd=repo)
    assert json.loads(as_json.stderr)["error"] == {
        "code": "INVALID_INPUT",
        "message": message,
        "details": {"field": "store"},
    }

    # The project store's journal still reads on every face.
    store = svc.resolve_store(cwd=repo)
    assert [f["period"] for f in client.get(f"{API}/{store}/journal").json()["files"]] == [
        d.period for d in svc.journal(cwd=repo)
    ]


# -- recall from a worktree whose main checkout moved -------------------------------------------
@pytest.fixture
def orphan(svc: MemoryService, tmp_path: Path) -> tuple[Path, Path]:
    """A linked worktree (inside another repository's checkout, ``outer``) whose main checkout was
    moved away: its ``.git`` file points at a gitdir that no longer exists. The project store holds
    a fact, and so does ``outer``'s, both with the words searched for."""
    outer = make_repo(tmp_path / "outer")
    svc.remember("The outer project deploys with make ship.", cwd=outer)
    repo = make_repo(tmp_path / "repo")
    git(repo, "commit", "-q", "--amend", "-m", "another root")  # not outer's root commit: another repository
    worktree = outer / "checkouts" / "feature"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(worktree))
    svc.remember("The feature project deploys with make release.", cwd=worktree)
    svc.remember("Every project deploys on weekdays only.", scope="global")
    repo.rename(tmp_path / "moved")
    return worktree, tmp_path / "moved"


def test_recall_from_an_orphaned_worktree_fails_as_remember_does_on_every_face(
    svc: MemoryService, client: TestClient, cli: CliRunner, orphan: tuple[Path, Path]
) -> None:
    """Recall in a worktree whose main checkout moved searched the global store alone (or, with
    the worktree inside another checkout, that other project's store) without a word, where
    ``remember`` said SCOPE_UNRESOLVED and how to repair it. Now recall says the same, on every
    face, and searches nothing."""
    worktree, moved = orphan
    where = worktree / "src"
    where.mkdir()

    with pytest.raises(ScopeUnresolved) as written:
        svc.remember("x", cwd=where)
    with pytest.raises(ScopeUnresolved) as searched:
        svc.recall("deploys", cwd=where)
    message = searched.value.message
    assert message == written.value.message
    assert str(worktree / ".git") in message and "git worktree repair" in message

    async def recall_async() -> ScopeUnresolved:
        async with AsyncMemoryService(svc) as asvc:
            with pytest.raises(ScopeUnresolved) as raised:
                await asvc.recall("deploys", cwd=where)
            return raised.value

    assert anyio.run(recall_async).message == message

    rest = _rest_error(
        client.get(f"{API}/recall", params={"query": "deploys", "cwd": str(where)}), 422, "SCOPE_UNRESOLVED"
    )
    assert rest["message"] == message and rest["details"]["cwd"] == str(where)

    out = cli("recall", "deploys", cwd=where)
    assert out.returncode != 0 and out.stdout == ""
    # One line: the message says to run git worktree repair; no generic "run it inside a git
    # repository" hint after it (the command was run inside one).
    (first,) = out.stderr.strip().splitlines()
    assert first == f"error: SCOPE_UNRESOLVED: {message}"
    assert cli("remember", "x", cwd=where).stderr.splitlines()[0] == first

    from mcp import Client
    from mcp_types import TextContent

    from coffer_memory_mcp import build_server

    async def recall_mcp() -> tuple[bool, str, dict[str, Any]]:
        async with Client(build_server(svc)) as mcp:
            result = await mcp.call_tool("coffer__recall", {"query": "deploys", "cwd": str(where)})
        text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
        return result.is_error, text, dict(result.structured_content or {})

    is_error, text, structured = anyio.run(recall_mcp)
    assert is_error and text.startswith(f"SCOPE_UNRESOLVED: {message}")
    assert "handoff" not in text and "Nothing was searched" in text
    assert structured["error"]["code"] == "SCOPE_UNRESOLVED"

    # The advice works: repaired, the worktree recalls its own project's fact and the global one.
    git(moved, "worktree", "repair", str(worktree))
    hits = svc.recall("deploys", cwd=where, mode="grep").hits
    assert {h.text for h in hits} == {
        "The feature project deploys with make release.",
        "Every project deploys on weekdays only.",
    }


def test_an_orphaned_worktree_never_lands_in_the_enclosing_checkouts_store(
    svc: MemoryService, orphan: tuple[Path, Path]
) -> None:
    """The orphaned worktree sits inside ``outer``'s checkout: git stops at the worktree's own
    ``.git`` file; coffer went on up and wrote the fact to ``outer``'s store."""
    worktree, _ = orphan
    outer_store = svc.resolve_store(cwd=worktree.parent.parent)
    before = svc.store_info(outer_store).fact_count
    with pytest.raises(ScopeUnresolved):
        svc.remember("A fact about the feature branch.", cwd=worktree)
    with pytest.raises(ScopeUnresolved):
        svc.resolve_store(cwd=worktree)
    assert svc.store_info(outer_store).fact_count == before
