"""The MCP server through real clients: the SDK's in-process client, and coffer-mcp over stdio."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import git, make_repo
from mcp import Client, StdioServerParameters
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ListRootsResult, Root, TextContent
from served import Served

from coffer_memory import MemoryService
from coffer_memory_mcp import build_server

pytestmark = pytest.mark.anyio

TOOLS = {"coffer__recall", "coffer__remember", "coffer__list_memory", "coffer__resume", "coffer__handoff"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory that is not inside any git repository."""
    path = tmp_path / "outside"
    path.mkdir()
    return path


def roots_callback(*paths: Path) -> Any:
    async def list_roots(context: ClientRequestContext) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=p.as_uri(), name=p.name) for p in paths])

    return list_roots


@asynccontextmanager
async def connect(svc: MemoryService, **kwargs: Any) -> AsyncIterator[Client]:
    async with Client(build_server(svc), **kwargs) as client:
        yield client


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None and text_of(result)
    return result.structured_content


async def test_lists_exactly_the_five_tools_with_output_schemas(svc: MemoryService) -> None:
    async with connect(svc) as client:
        tools = (await client.list_tools()).tools
    assert {t.name for t in tools} == TOOLS
    for tool in tools:
        assert tool.output_schema is not None and tool.description
        assert "cwd" in tool.input_schema["properties"]
        assert "roots" not in tool.input_schema["properties"]
    remember = next(t for t in tools if t.name == "coffer__remember")
    assert "self-contained" in (remember.description or "")
    assert remember.input_schema["properties"]["scope"]["enum"] == ["global", "project"]


async def test_remember_then_recall_with_explicit_cwd(svc: MemoryService, repo: Path) -> None:
    async with connect(svc) as client:
        fact = ok(
            await client.call_tool(
                "coffer__remember",
                {
                    "text": "Deploys go through `make ship`; staging needs VPN first.",
                    "title": "How to deploy",
                    "cwd": str(repo),
                },
            )
        )
        res = await client.call_tool("coffer__recall", {"query": "deploy staging", "cwd": str(repo)})
    assert fact["store"] == svc.resolve_store(cwd=repo)
    assert Path(fact["path"]).is_file() and "make ship" in Path(fact["path"]).read_text()
    out = ok(res)
    assert out["hits"][0]["id"] == fact["id"] and out["hits"][0]["path"] == fact["path"]
    assert out["stores"][0] == fact["store"] and out["mode"] == "keyword" and out["cwd"] == str(repo)
    assert "How to deploy" in text_of(res)


async def test_global_scope_works_outside_a_repo(svc: MemoryService, outside: Path) -> None:
    async with connect(svc) as client:
        fact = ok(
            await client.call_tool(
                "coffer__remember",
                {
                    "text": "The user prefers ruff over black in every project.",
                    "scope": "global",
                    "cwd": str(outside),
                },
            )
        )
        hits = ok(await client.call_tool("coffer__recall", {"query": "ruff", "cwd": str(outside)}))["hits"]
        page = ok(await client.call_tool("coffer__list_memory", {"scope": "global"}))
    assert fact["store"] == "global" and [h["id"] for h in hits] == [fact["id"]]
    assert [f["id"] for f in page["items"]] == [fact["id"]] and page["store"] == "global"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_project_comes_from_the_clients_first_file_root(
    svc: MemoryService, tmp_path: Path, outside: Path, mode: str
) -> None:
    first, second = make_repo(tmp_path / "first"), make_repo(tmp_path / "second")
    async with connect(svc, list_roots_callback=roots_callback(first, second), mode=mode) as client:
        fact = ok(await client.call_tool("coffer__remember", {"text": "Rooted fact about the first repo."}))
        hits = ok(await client.call_tool("coffer__recall", {"query": "rooted fact"}))
        explicit = ok(
            await client.call_tool(
                "coffer__remember",
                {
                    "text": "An explicit cwd wins over the roots.",
                    "cwd": str(second),
                },
            )
        )
    assert fact["store"] == svc.resolve_store(cwd=first) != svc.resolve_store(cwd=second)
    assert hits["cwd"] == str(first) and hits["hits"][0]["id"] == fact["id"]
    assert explicit["store"] == svc.resolve_store(cwd=second)


async def test_without_roots_the_servers_directory_is_used(
    svc: MemoryService, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    async with connect(svc) as client:
        fact = ok(await client.call_tool("coffer__remember", {"text": "Fallback to the server cwd."}))
    assert fact["store"] == svc.resolve_store(cwd=repo)


async def test_core_errors_become_tool_errors_with_their_code(
    svc: MemoryService, repo: Path, outside: Path
) -> None:
    async with connect(svc) as client:
        unresolved = await client.call_tool("coffer__remember", {"text": "x", "cwd": str(outside)})
        empty = await client.call_tool("coffer__remember", {"text": "   ", "cwd": str(repo)})
        cursor = await client.call_tool("coffer__list_memory", {"cursor": "not-a-cursor", "cwd": str(repo)})
        limit = await client.call_tool("coffer__recall", {"query": "x", "limit": 0, "cwd": str(repo)})
        no_repo = await client.call_tool("coffer__resume", {"cwd": str(outside)})
        still_alive = await client.call_tool("coffer__recall", {"query": "anything", "cwd": str(repo)})
    assert unresolved.is_error and text_of(unresolved).startswith("SCOPE_UNRESOLVED: ")
    assert "scope='global'" in text_of(unresolved)
    assert empty.is_error and text_of(empty).startswith("MEMORY_REJECTED: ")
    assert cursor.is_error and text_of(cursor).startswith("INVALID_CURSOR: ")
    assert limit.is_error and text_of(limit).startswith("INVALID_INPUT: ")
    assert no_repo.is_error and text_of(no_repo).startswith("SCOPE_UNRESOLVED: ")
    assert ok(still_alive)["hits"] == []


async def test_list_memory_says_a_page_is_a_page_of_a_bigger_store(svc: MemoryService, repo: Path) -> None:
    # limit=1 said "1 fact in <store>, newest first:" for a store of three: a model took it for
    # the whole store (the cursor line came last, after the facts).
    async with connect(svc) as client:
        for n in range(3):
            ok(await client.call_tool("coffer__remember", {"text": f"Counted fact {n}.", "cwd": str(repo)}))
        first = await client.call_tool("coffer__list_memory", {"limit": 1, "cwd": str(repo)})
        head = text_of(first).splitlines()[0]
        cursor = ok(first)["next_cursor"]
        assert cursor and head.startswith("A page of 1 fact from ") and "more follow" in head
        middle = await client.call_tool(
            "coffer__list_memory", {"limit": 1, "cursor": cursor, "cwd": str(repo)}
        )
        assert text_of(middle).startswith("A page of 1 fact from ")
        last = await client.call_tool(
            "coffer__list_memory", {"limit": 1, "cursor": ok(middle)["next_cursor"], "cwd": str(repo)}
        )
        assert ok(last)["next_cursor"] is None and text_of(last).startswith("The last page of ")
        whole = await client.call_tool("coffer__list_memory", {"limit": 5, "cwd": str(repo)})
        assert (
            text_of(whole)
            .splitlines()[0]
            .endswith("3 facts in " + ok(whole)["store"] + ", newest first (all of them):")
        )


async def test_list_memory_pages_with_a_cursor(svc: MemoryService, repo: Path) -> None:
    async with connect(svc) as client:
        for n in range(3):
            ok(
                await client.call_tool(
                    "coffer__remember", {"text": f"Paged fact number {n}.", "cwd": str(repo)}
                )
            )
        first = ok(await client.call_tool("coffer__list_memory", {"limit": 2, "cwd": str(repo)}))
        rest = ok(
            await client.call_tool(
                "coffer__list_memory",
                {
                    "limit": 2,
                    "cursor": first["next_cursor"],
                    "cwd": str(repo),
                },
            )
        )
        other = await client.call_tool(
            "coffer__list_memory",
            {
                "scope": "global",
                "cursor": first["next_cursor"],
                "cwd": str(repo),
            },
        )
    assert len(first["items"]) == 2 and first["next_cursor"]
    assert len(rest["items"]) == 1 and rest["next_cursor"] is None
    assert len({f["id"] for f in first["items"] + rest["items"]}) == 3
    assert all(Path(f["path"]).is_file() and f["text"].startswith("Paged fact") for f in first["items"])
    assert other.is_error and text_of(other).startswith("INVALID_CURSOR: ")


async def test_handoff_then_resume_follows_the_branch(svc: MemoryService, repo: Path) -> None:
    async with connect(svc, list_roots_callback=roots_callback(repo)) as client:
        before = ok(await client.call_tool("coffer__resume", {}))
        saved = ok(
            await client.call_tool("coffer__handoff", {"text": "Half-way through the parser rewrite."})
        )
        after = ok(await client.call_tool("coffer__resume", {}))
        (repo / "parser.py").write_text("x = 1\n")
        git(repo, "add", "parser.py")
        git(repo, "commit", "-q", "-m", "parser: first cut")
        moved = await client.call_tool("coffer__resume", {})
        again = ok(await client.call_tool("coffer__handoff", {"text": "Parser done; tests next."}))
        empty = await client.call_tool("coffer__handoff", {"text": ""})
    assert before["found"] is False and before["branch"] == "main"
    assert saved["branch"] == "main" and saved["replaced"] is False and Path(saved["path"]).is_file()
    assert after["found"] and after["text"].strip() == "Half-way through the parser rewrite."
    assert ok(moved)["head_moved"] and ok(moved)["new_commits"] and "parser: first cut" in text_of(moved)
    assert again["replaced"] is True
    assert empty.is_error and text_of(empty).startswith("INVALID_INPUT: ")


async def test_stdio_end_to_end(tmp_home: Path, repo: Path) -> None:
    env = {**os.environ, "COFFER_HOME": str(tmp_home)}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "coffer_memory_mcp.cli"], env=env, cwd=str(repo)
    )
    async with Client(params) as client:
        fact = ok(await client.call_tool("coffer__remember", {"text": "The e2e fact lives in sqlite."}))
        hits = ok(await client.call_tool("coffer__recall", {"query": "e2e fact"}))["hits"]
    assert hits and hits[0]["id"] == fact["id"]
    with MemoryService(tmp_home) as svc:
        assert fact["store"] == svc.resolve_store(cwd=repo)
        assert Path(fact["path"]).is_relative_to(tmp_home)


async def test_streamable_http_requires_the_bearer_token(tmp_home: Path, repo: Path) -> None:
    env = {**os.environ, "COFFER_HOME": str(tmp_home), "COFFER_MCP_TOKEN": "s3cret"}
    args = [sys.executable, "-m", "coffer_memory_mcp.cli", "--transport", "streamable-http"]
    served = await anyio.to_thread.run_sync(lambda: Served(args, env, cwd=repo))
    url = f"{served.base}/mcp"
    try:
        async with httpx2.AsyncClient() as plain:
            refused = await plain.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "UNAUTHORIZED"
        authed = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"})
        async with authed, Client(streamable_http_client(url, http_client=authed)) as client:
            fact = ok(await client.call_tool("coffer__remember", {"text": "Over HTTP.", "cwd": str(repo)}))
            hits = ok(await client.call_tool("coffer__recall", {"query": "over http", "cwd": str(repo)}))
        assert hits["hits"][0]["id"] == fact["id"]
    finally:
        served.stop()


# -- errors as data --------------------------------------------------------------------------------
def error_of(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error and result.structured_content is not None
    error: dict[str, Any] = result.structured_content["error"]
    assert text_of(result).startswith(f"{error['code']}: {error['message']}")
    return error


async def test_errors_carry_code_and_details_as_structured_content(
    svc: MemoryService, repo: Path, outside: Path
) -> None:
    async with connect(svc) as client:
        unresolved = error_of(await client.call_tool("coffer__remember", {"text": "x", "cwd": str(outside)}))
        empty = error_of(await client.call_tool("coffer__remember", {"text": "  ", "cwd": str(repo)}))
    assert unresolved["code"] == "SCOPE_UNRESOLVED" and unresolved["details"]["cwd"] == str(outside)
    assert empty["code"] == "MEMORY_REJECTED" and empty["details"]["reason"] == "empty"


async def test_bad_arguments_are_explained_in_plain_words(svc: MemoryService, repo: Path) -> None:
    async with connect(svc) as client:
        missing = error_of(await client.call_tool("coffer__remember", {"cwd": str(repo)}))
        wrong = error_of(
            await client.call_tool("coffer__recall", {"query": "x", "limit": "lots", "cwd": str(repo)})
        )
        scope = error_of(await client.call_tool("coffer__list_memory", {"scope": "team"}))
    assert missing == {
        "code": "INVALID_INPUT",
        "message": "'text' is required (calling coffer__remember)",
        "details": {"fields": ["text"]},
    }
    assert wrong["message"].startswith("'limit' must be a whole number") and wrong["details"]["fields"] == [
        "limit"
    ]
    assert scope["message"].startswith("'scope': input should be 'global' or 'project'")
    for error in (missing, wrong, scope):
        assert "http" not in error["message"] and "pydantic" not in error["message"].lower()


async def test_an_argument_the_tool_does_not_take_is_refused(svc: MemoryService, repo: Path) -> None:
    async with connect(svc) as client:
        stray = error_of(
            await client.call_tool(
                "coffer__remember", {"text": "Deploys on Tuesdays.", "store": "nosuch", "cwd": str(repo)}
            )
        )
        listed = await client.call_tool("coffer__list_memory", {"cwd": str(repo)})
    assert stray["code"] == "INVALID_INPUT" and stray["details"] == {"fields": ["store"]}
    assert stray["message"].startswith("coffer__remember takes no argument 'store'; it takes ")
    assert "text" in stray["message"] and "session_id" in stray["message"]
    assert not listed.is_error and "Deploys on Tuesdays." not in str(listed.structured_content)
    assert not svc.list_facts(cwd=repo).items and not svc.list_facts(store="global").items


# -- resources and the resume prompt ---------------------------------------------------------------
def resource_text(result: Any) -> str:
    [content] = result.contents
    return str(content.text)


async def test_facts_rules_and_handoffs_are_resources(svc: MemoryService, repo: Path) -> None:
    fact = svc.remember("Releases are tagged vX.Y.Z by `make tag`.", title="Release tags", cwd=repo)
    svc.append_rule("Never push to main directly.", cwd=repo)
    svc.save_handoff("Tagging script half done.", cwd=repo)
    store = fact.store
    async with connect(svc) as client:
        listed = {str(r.uri) for r in (await client.list_resources()).resources}
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        stores = json.loads(resource_text(await client.read_resource("coffer://stores")))
        body = resource_text(await client.read_resource(f"coffer://{store}/facts/{fact.fact.id}"))
        rules = resource_text(await client.read_resource(f"coffer://{store}/rules"))
        handoff = resource_text(await client.read_resource(f"coffer://{store}/handoffs/main"))
        with pytest.raises(MCPError, match="MEMORY_NOT_FOUND"):
            await client.read_resource(f"coffer://{store}/facts/{'0' * 26}")
        with pytest.raises(MCPError, match="MEMORY_STORE_NOT_FOUND"):
            await client.read_resource("coffer://nope/rules")
    assert listed == {"coffer://stores"}
    assert templates == {
        "coffer://{store}/facts/{fact_id}",
        "coffer://{store}/rules",
        "coffer://{store}/handoffs/{branch}",
    }
    mine = next(s for s in stores["stores"] if s["name"] == store)
    assert mine["rules"] == f"coffer://{store}/rules" and mine["handoffs"] == [
        f"coffer://{store}/handoffs/main"
    ]
    assert body == fact.path.read_text() and "make tag" in body
    assert "Never push to main directly." in rules and handoff.strip() == "Tagging script half done."


async def test_resume_prompt_brings_the_handoff_and_rules(
    svc: MemoryService, repo: Path, outside: Path
) -> None:
    svc.append_rule("Run make lint before committing.", cwd=repo)
    svc.save_handoff("Parser rewrite: tokenizer done, AST next.", cwd=repo)
    async with connect(svc) as client:
        prompts = (await client.list_prompts()).prompts
        result = await client.get_prompt("resume", {"cwd": str(repo)})
        lost = await client.get_prompt("resume", {"cwd": str(outside)})
    assert [p.name for p in prompts] == ["resume"]
    [message] = result.messages
    text = message.content.text  # type: ignore[union-attr]
    assert message.role == "user" and "tokenizer done, AST next" in text and "make lint" in text
    assert "SCOPE_UNRESOLVED" in lost.messages[0].content.text  # type: ignore[union-attr]


async def test_the_tool_surface_stays_small(svc: MemoryService) -> None:
    async with connect(svc) as client:
        tools = (await client.list_tools()).tools
    schema_chars = sum(len(json.dumps(t.model_dump(mode="json", exclude_none=True))) for t in tools)
    # 13,000 until the outputs took every field's description from the core (they described about
    # a third of them); pydantic's property titles were dropped from the outputs to pay for most of it.
    # 14,000 until recall's since/until said their forms and zone rule (session 29: 13,997 to 14,116,
    # in the fewest words that say them; the CLI's full wording would have been 14,447).
    assert len(tools) == 5 and schema_chars < 14_200
