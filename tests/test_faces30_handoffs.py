"""Session 30 (faces30): every face lists a handoff under its branch's name after ``git branch -m``.

``coffer handoff show`` (text) followed a renamed branch since session 29, but ``--json``, the REST
``/handoff`` listing and delete, and the MCP ``coffer://`` handoff resources listed each scene under
the name it was saved under, a branch that no longer exists. The rename is now followed in the
service (``Lanes.handoffs``), so every face gets it from one place. Real git repositories, the
``coffer`` CLI in-process, FastAPI's TestClient and the MCP SDK's in-process client.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from conftest import CliRunner, git, make_repo
from fastapi.testclient import TestClient
from mcp import Client

from coffer_memory import MemoryService
from coffer_memory_fastapi import create_app
from coffer_memory_mcp import build_server

API = "/api/v1/memory_stores"


@pytest.fixture
def renamed(svc: MemoryService, tmp_path: Path) -> tuple[Path, str]:
    """A repository whose branch ``a`` saved a handoff and was then renamed ``b``; its store."""
    repo = make_repo(tmp_path / "repo")
    git(repo, "checkout", "-q", "-b", "a")
    write = svc.save_handoff("Halfway through the parser.", cwd=repo)
    git(repo, "branch", "-m", "a", "b")
    return repo, write.store


def test_the_service_lists_and_resumes_the_scene_under_the_name_now(
    svc: MemoryService, renamed: tuple[Path, str]
) -> None:
    repo, store = renamed
    for listed in (svc.handoffs(cwd=repo), svc.handoffs(store=store)):
        assert [s.branch for s in listed] == ["b"]
        assert [(s.branch, s.saved_as, s.renamed_to) for s in listed] == [("b", "a", None)]
    scene = svc.resume(cwd=repo).scene
    assert scene is not None and (scene.branch, scene.saved_as) == ("b", "a")


def test_cli_text_and_json_list_it_under_b(cli: CliRunner, renamed: tuple[Path, str], tmp_path: Path) -> None:
    repo, store = renamed
    text = cli("handoff", "show", cwd=repo)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("=== b  (saved as 'a', renamed since)"), text.stdout
    for where, args in ((repo, ()), (tmp_path, ("--store", store))):
        shown = cli("handoff", "show", "--json", *args, cwd=where)
        assert shown.returncode == 0, shown.stderr
        scenes = json.loads(shown.stdout)
        assert [s["branch"] for s in scenes] == ["b"], args
        assert [(s["branch"], s["saved_as"], s["renamed_to"]) for s in scenes] == [("b", "a", None)], args
    # Outside the repository, the store's recorded checkout tells the rename too.
    elsewhere = cli("handoff", "show", "--store", store, cwd=tmp_path)
    assert elsewhere.stdout.startswith("=== b  (saved as 'a', renamed since)"), elsewhere.stdout


def test_cli_json_marks_the_old_scene_once_the_branch_saved_its_own(
    svc: MemoryService, cli: CliRunner, renamed: tuple[Path, str]
) -> None:
    repo, _store = renamed
    svc.save_handoff("Parser done.", cwd=repo)
    shown = cli("handoff", "show", "--json", cwd=repo)
    scenes = json.loads(shown.stdout)
    assert [s.get("renamed_to") for s in scenes] == [None, "b"]
    assert [(s["branch"], s["saved_as"], s["renamed_to"]) for s in scenes] == [
        ("b", None, None),
        ("a", None, "b"),
    ]


def test_rest_lists_it_under_b_and_deletes_it_by_that_name(
    svc: MemoryService, renamed: tuple[Path, str]
) -> None:
    _repo, store = renamed
    with TestClient(create_app(svc)) as client:
        listed = client.get(f"{API}/{store}/handoff")
        assert listed.status_code == 200, listed.text
        scenes = listed.json()["scenes"]
        assert [s["branch"] for s in scenes] == ["b"]
        assert [(s["branch"], s["saved_as"], s["renamed_to"]) for s in scenes] == [("b", "a", None)]
        gone = client.delete(f"{API}/{store}/handoff/b")
        assert gone.status_code == 200, gone.text
        assert client.get(f"{API}/{store}/handoff").json()["scenes"] == []


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_mcp_resources_list_and_read_it_under_b(
    svc: MemoryService, renamed: tuple[Path, str], anyio_backend: str
) -> None:
    _repo, store = renamed
    async with Client(build_server(svc)) as client:
        stores = await client.read_resource("coffer://stores")
        note = await client.read_resource(f"coffer://{store}/handoffs/{quote('b', safe='')}")

    def text(result: Any) -> str:
        [content] = result.contents
        return str(content.text)

    mine = next(s for s in json.loads(text(stores))["stores"] if s["name"] == store)
    assert mine["handoffs"] == [f"coffer://{store}/handoffs/b"]
    assert text(note).strip() == "Halfway through the parser."
