"""coffer's memory as MCP resources (``coffer://...``) and the ``resume`` prompt.

Resources let a client attach memory to a conversation without a tool call (Claude Code's ``@``
mentions, VS Code's "Add context"):

- ``coffer://stores``: every store, with the URIs of its rules and handoffs (JSON);
- ``coffer://{store}/facts/{fact_id}``: one fact's Markdown file, as written on disk;
- ``coffer://{store}/rules``: the store's rules, concatenated;
- ``coffer://{store}/handoffs/{branch}``: a branch's handoff note (``/`` in a branch as ``%2F``).

Reads go through ``MemoryService`` and write nothing. A core error becomes a resource error
naming its code (``MEMORY_NOT_FOUND: ...``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote, unquote

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from coffer_memory import CofferError, MemoryNotFound, MemoryService, MemoryStoreNotFound, read_fact_file

__all__ = ["RESUME_PROMPT_DOC", "add_resources_and_prompts"]

T = TypeVar("T")
MARKDOWN = "text/markdown"

RESUME_PROMPT_DOC = """\
Pick up where the last session on this project and branch stopped: the saved handoff note, the
commits since, and the project's rules."""


def _read(call: Callable[[], T]) -> T:
    try:
        return call()
    except (MemoryNotFound, MemoryStoreNotFound) as exc:
        raise ResourceNotFoundError(f"{exc.code}: {exc.message}") from exc
    except CofferError as exc:
        raise ResourceError(f"{exc.code}: {exc.message}") from exc


def add_resources_and_prompts(server: MCPServer[Any], svc: MemoryService) -> None:
    """Register coffer's resources and the ``resume`` prompt on ``server``."""

    def markdown(uri: str, name: str, title: str, description: str) -> Callable[[Callable[..., str]], Any]:
        return server.resource(uri, name=name, title=title, description=description, mime_type=MARKDOWN)

    @server.resource(
        "coffer://stores",
        name="stores",
        title="coffer stores",
        description="Every memory store (global and one per git project) with its resource URIs.",
        mime_type="application/json",
    )
    def stores() -> dict[str, Any]:
        def run() -> dict[str, Any]:
            return {
                "stores": [
                    {
                        "name": info.name,
                        "display_name": info.display_name,
                        "project_root": info.project_root,
                        "fact_count": info.fact_count,
                        "rules": f"coffer://{info.name}/rules",
                        "handoffs": [
                            f"coffer://{info.name}/handoffs/{quote(scene.branch, safe='')}"
                            for scene in svc.handoffs(store=info.name)
                        ],
                    }
                    for info in svc.stores()
                ]
            }

        return _read(run)

    @markdown(
        "coffer://{store}/facts/{fact_id}",
        "fact",
        "A remembered fact",
        "One fact's Markdown file (frontmatter and body), by store and fact id.",
    )
    def fact(store: str, fact_id: str) -> str:
        def run() -> str:
            record = svc.get_fact(fact_id, store=store)
            try:
                return read_fact_file(record.path)
            except OSError as exc:  # removed or replaced (a FIFO, a link) since it was found
                raise MemoryNotFound(record.store, fact_id) from exc

        return _read(run)

    @markdown(
        "coffer://{store}/rules",
        "rules",
        "Rules of a store",
        "The store's rules (what every session is told at start), concatenated.",
    )
    def rules(store: str) -> str:
        return _read(lambda: svc.rules(store=store).text)

    @markdown(
        "coffer://{store}/handoffs/{branch}",
        "handoff",
        "Handoff note of a branch",
        "Where work stood on a branch when the last session saved a handoff.",
    )
    def handoff(store: str, branch: str) -> str:
        wanted = unquote(branch)

        def run() -> str:
            for scene in svc.handoffs(store=store):
                if scene.branch == wanted:
                    return scene.text
            raise MemoryNotFound(store, f"handoff/{wanted}")

        return _read(run)

    @server.prompt(name="resume", title="Resume work", description=RESUME_PROMPT_DOC)
    def resume(cwd: str | None = None) -> str:
        where = os.path.abspath(os.path.expanduser(cwd)) if cwd else os.getcwd()
        try:
            result = svc.resume(cwd=where)
            rules_text = svc.assemble_session_context(where)
        except CofferError as exc:
            return (
                f"coffer could not load this project's memory ({exc.code}: {exc.message}). "
                "Ask the user where the project lives, or pass cwd."
            )
        return (
            "We are resuming earlier work. Here is what coffer remembers for this project and "
            f"branch.\n\n## Handoff\n{result.summary}\n\n## Rules\n{rules_text}\n\n"
            "Continue from the handoff: restate in two lines where things stand, then go on with "
            "the next step. Use coffer__recall for anything else the user may have told an agent "
            "before, and coffer__handoff before stopping with work unfinished."
        )
