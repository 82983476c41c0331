"""``build_server(service)``: the coffer MCP tools over a ``MemoryService``.

The tools validate, call the service and translate; there is no business logic here. The project
a call works in is the explicit ``cwd`` argument, else the client's first ``file://`` MCP root,
else the server's working directory.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

from mcp.server.mcpserver import Context, ListRoots, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    INVALID_PARAMS,
    CallToolResult,
    GetPromptResult,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    TextContent,
    ToolAnnotations,
)
from mcp_types.version import is_version_at_least
from pydantic import Field, ValidationError
from pydantic_core import to_jsonable_python

import coffer_memory
from coffer_memory import (
    CofferError,
    InvalidInput,
    MemoryFact,
    MemoryService,
    json_field,
    json_items,
    safe_echo,
)
from coffer_memory.vocabulary import (
    MAX_LIST_LIMIT,
    MAX_PATH_CHARS,
    MAX_RECALL_LIMIT,
    MAX_SESSION_ID_CHARS,
    MAX_TAGS,
    RetrievalMode,
    Scope,
)

from .errors import core_error, error_result, invalid_arguments
from .resources import add_resources_and_prompts
from .schemas import (
    HANDOFF,
    LIST_MEMORY,
    RECALL,
    REMEMBER,
    RESUME,
    handoff_out,
    recall_out,
    render_handoff,
    render_list,
    render_recall,
    render_remember,
    resume_out,
)

__all__ = ["CofferServer", "build_server"]

log = logging.getLogger("coffer_memory_mcp")

# From this protocol revision on, server-to-client requests ride the tool call's input_required
# round-trip (the SDK drives it for a `ListRoots` marker); before it they go over the back-channel.
_INPUT_REQUIRED_VERSION = "2026-07-28"
ROOTS_TIMEOUT_SECONDS = 5.0

INSTRUCTIONS = """\
coffer is the user's long-term memory, shared by every coding agent they use (Claude Code, Codex,
OpenCode...). Facts are Markdown files the user can read and edit.
- Before asking the user something they may have told an agent before (conventions, commands,
  preferences, where things live, why a decision was made), call coffer__recall.
- When you learn something durable that a future session would need, call coffer__remember:
  one self-contained fact per call.
- At the start of a session call coffer__resume; before stopping mid-task call coffer__handoff.
The project is taken from the client's workspace root, or from `cwd` when you pass one."""

RECALL_DOC = """\
Search the user's long-term memory: the current project's facts first, then global ones.

Call this before asking the user about anything they may have told an agent before: project
conventions, build/test/deploy commands, preferences, architecture decisions and their reasons,
where things live, known pitfalls. Also call it when starting unfamiliar work in this project.
Phrase the query as keywords or a short question ("deploy staging", "why sqlite not postgres").
Hits come back ranked, with the store and the file each lives in."""

REMEMBER_DOC = """\
Store one durable fact in long-term memory, for every future session and every agent.

Remember things that will still be true and useful next week: a decision and its reason, a
convention, a command that works, a user preference, a pitfall and its fix, where something lives.
A good fact is self-contained (readable with no conversation around it: name the thing, don't say
"it" or "this file"), specific, and short (a few sentences). One fact per call; call again for
another. Do not store transient chatter, task progress or plans (use coffer__handoff for where work
stands), things obvious from the code, or secrets. Recall first to avoid duplicates.
scope="project" (default) files it under the current git project; scope="global" is for facts
about the user or their tools that hold in every project."""

LIST_DOC = """\
List the facts of one store (the current project's, or global), newest first, a page at a time.

Use it to review what is already known, e.g. before a clean-up or when recall keywords miss.
For finding something specific, coffer__recall is better. Pass next_cursor back as cursor for
the next page."""

RESUME_DOC = """\
Get the handoff note saved for the current project and git branch: where work stood, what was
next, and which commits landed since it was written. Call it when a session starts or when the
user says "continue" / "where were we"."""

HANDOFF_DOC = """\
Save a handoff note for the current project and git branch, replacing the previous one: what you
were doing, what is done, what is next, open questions, files involved. The next session (any
agent) reads it with coffer__resume. Call it before the session ends or the context runs out
with work unfinished. It is not a place for durable facts: use coffer__remember for those."""

# What since/until take and the zone rule, as the CLI's help says them (WHEN_FORMS), in fewer words:
# the tool list has a size bound (tests/test_mcp.py), and an agent in UTC+8 passing today's date got
# yesterday evening's facts with nothing to say why.
SINCE = (
    "Only facts updated at or after this time: an ISO 8601 date or time (UTC if no zone; a date "
    "alone is its midnight UTC) or a duration ago (30m, 12h, 7d, 2w)."
)
UNTIL = "Only facts updated before this time (the forms of since)."

CwdArg = Annotated[
    str | None,
    Field(description="Directory to resolve the project from (default: the client's workspace root)."),
]
Mode = RetrievalMode
TagsArg = Annotated[
    list[Annotated[str, json_items(MemoryFact, "tags")]] | None, json_field(MemoryFact, "tags")
]


def _root_path(uri: str) -> str | None:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return url2pathname(unquote(parsed.path)) or None


async def _client_roots(ctx: Context, cwd: str | None = None) -> ListRoots | ListRootsResult | None:
    """The client's roots when it offers them and the caller gave no ``cwd``; else ``None``."""
    if cwd:
        return None
    caps = ctx.client_capabilities
    if caps is None or caps.roots is None:
        return None
    version = ctx.protocol_version
    if version is not None and is_version_at_least(version, _INPUT_REQUIRED_VERSION):
        return ListRoots()
    if not ctx.session.can_send_request:
        return None
    try:
        result: ListRootsResult = await ctx.session.send_request(
            ListRootsRequest(),
            ListRootsResult,
            request_read_timeout_seconds=ROOTS_TIMEOUT_SECONDS,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
        )
    except Exception as exc:  # a client that declares roots but fails them: fall back, don't fail
        log.warning("roots/list failed, using the server's directory: %r", exc)
        return None
    return result


RootsArg = Annotated[ListRootsResult | None, Resolve(_client_roots)]


def _workdir(cwd: str | None, roots: ListRootsResult | None) -> str:
    """Explicit ``cwd``, else the first ``file://`` root, else the server's working directory."""
    if cwd:
        return os.path.abspath(os.path.expanduser(cwd))
    for root in roots.roots if roots is not None else ():
        path = _root_path(str(root.uri))
        if path:
            return path
    return os.getcwd()


def _ok(out: dict[str, Any], text: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=to_jsonable_python(out)
    )


_SURROGATE = re.compile("[\ud800-\udfff]")
# The longest value read (``since``/``until`` as the REST face's): the core's message quotes the
# value it refuses, so a megabyte sent came back twice. Checked here, not in the input schemas
# every session loads.
_LONGEST = {"cwd": MAX_PATH_CHARS, "since": 64, "until": 64}


def _guard(tool: str, call: Callable[[], CallToolResult], **texts: str | None) -> CallToolResult:
    """Run a tool; a core error, a value of ``texts`` over its ``_LONGEST`` or holding a lone
    surrogate, is a tool error."""
    try:
        for field, value in texts.items():
            if value is not None and len(value) > _LONGEST.get(field, len(value)):
                raise InvalidInput(f"{field} is longer than {_LONGEST[field]} characters", field=field)
            if value is not None and _SURROGATE.search(value):
                # No file can hold it (it is not a character): refuse before the core sees it.
                raise InvalidInput(
                    f"{field} contains a lone surrogate, which is not a character", field=field
                )
        return call()
    except CofferError as exc:
        return core_error(tool, exc)


class CofferServer(MCPServer[Any]):
    """``MCPServer`` whose argument-validation failures read like coffer's other tool errors."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """Call a tool; arguments that do not fit its schema give ``INVALID_INPUT`` in plain words.

        An argument the tool does not take is refused too: the SDK would drop it, and an agent
        that sent ``store`` or ``tag`` would have its fact written elsewhere or without its tags."""
        tool = self._tool_manager.get_tool(name)
        if tool is None:  # the SDK's answer carried no code
            tools = sorted(t.name for t in self._tool_manager.list_tools())
            return error_result(
                "NOT_FOUND", f"there is no tool {name!r}; the tools are {', '.join(tools)}", {"tool": name}
            )
        takes = set(tool.parameters.get("properties", {}))
        unknown = sorted(set(arguments) - takes)
        if unknown:
            listed = ", ".join(repr(u) for u in unknown)
            return error_result(
                "INVALID_INPUT",
                f"{name} takes no argument {listed}; it takes {', '.join(sorted(takes))}",
                {"fields": unknown},
            )
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            # As the REST face's 500: the code and the exception's class, never its text.
            cause = exc.__cause__ or exc
            log.error("%s failed unexpectedly", name, exc_info=cause)
            return error_result("INTERNAL", f"{name} failed unexpectedly", {"type": type(cause).__name__})
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                return invalid_arguments(name, exc.__cause__)
            raise

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        """Read a resource; a URI no resource takes is named bounded and clean (``safe_echo``): the
        SDK repeated it whole, terminal escapes and megabytes included."""
        try:
            return await super().read_resource(uri, context)
        except ResourceNotFoundError as exc:
            if not str(exc).startswith("Unknown resource: "):
                raise
            raise ResourceNotFoundError(f"Unknown resource: {safe_echo(uri, 200)}") from None

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context[Any, Any] | None = None
    ) -> GetPromptResult | InputRequiredResult:
        """Render a prompt; an unknown prompt or argument is ``INVALID_INPUT`` (the SDK answered
        "Internal server error" and logged a traceback)."""
        prompt = self._prompt_manager.get_prompt(name)
        if prompt is None:
            names = ", ".join(sorted(p.name for p in self._prompt_manager.list_prompts()))
            raise MCPError(
                INVALID_PARAMS, f"INVALID_INPUT: there is no prompt {name!r}; the prompts are {names}"
            )
        takes = sorted(a.name for a in prompt.arguments or ())
        unknown = sorted(set(arguments or {}) - set(takes))
        if unknown:
            listed = ", ".join(repr(u) for u in unknown)
            raise MCPError(
                INVALID_PARAMS,
                f"INVALID_INPUT: prompt {name} takes no argument {listed}; it takes {', '.join(takes)}",
            )
        return await super().get_prompt(name, arguments, context)


def build_server(service: MemoryService | None = None, *, name: str = "coffer") -> CofferServer:
    """An ``MCPServer`` exposing coffer's tools over ``service`` (a new ``MemoryService()`` if None).

    The tools are ``coffer__recall``, ``coffer__remember``, ``coffer__list_memory``,
    ``coffer__resume`` and ``coffer__handoff``; there are no edit or delete tools. Facts, rules and
    handoffs are also resources (``coffer://...``), and ``resume`` is a prompt.
    """
    svc = service if service is not None else MemoryService()
    server = CofferServer(
        name=name,
        title="coffer memory",
        instructions=INSTRUCTIONS,
        version=coffer_memory.__version__,
    )
    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    def recall(
        query: Annotated[str, Field(description="What to look for: keywords or a short question.")],
        roots: RootsArg,
        mode: Annotated[
            Mode | None,
            Field(description="Retrieval mode; omit for the configured default (keyword offline)."),
        ] = None,
        limit: Annotated[int, Field(description=f"At most this many hits (1-{MAX_RECALL_LIMIT}).")] = 10,
        cwd: CwdArg = None,
        tags: Annotated[
            list[Annotated[str, json_items(MemoryFact, "tags")]] | None,
            Field(max_length=MAX_TAGS, description="Only facts with all these tags."),
        ] = None,
        since: Annotated[str | None, Field(description=SINCE)] = None,
        until: Annotated[str | None, Field(description=UNTIL)] = None,
    ) -> Annotated[CallToolResult, RECALL.model]:
        def run() -> CallToolResult:
            where = _workdir(cwd, roots)
            res = svc.recall(query, cwd=where, mode=mode, limit=limit, tags=tags, since=since, until=until)
            out = recall_out(query, where, res)
            return _ok(out, render_recall(out))

        return _guard("coffer__recall", run, query=query, cwd=cwd, since=since, until=until)

    def remember(
        text: Annotated[str, Field(description="The fact, self-contained, in a few sentences.")],
        roots: RootsArg,
        title: Annotated[str | None, json_field(MemoryFact, "title")] = None,
        description: Annotated[str | None, json_field(MemoryFact, "description")] = None,
        scope: Annotated[
            Scope,
            Field(description="'project' (the current git project, default) or 'global' (every project)."),
        ] = "project",
        cwd: CwdArg = None,
        tags: TagsArg = None,
        session_id: Annotated[
            str | None,
            Field(
                max_length=MAX_SESSION_ID_CHARS,
                description="An id you keep for this conversation (your session id if you know it): "
                "facts remembered with the same id are recalled with their neighbours.",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, REMEMBER.model]:
        def run() -> CallToolResult:
            where = _workdir(cwd, roots)
            res = svc.remember(
                text,
                title=title,
                description=description,
                scope=scope,
                cwd=where,
                tags=tags or (),
                origin_session_id=session_id,
            )
            out = REMEMBER.dump(res)
            return _ok(out, render_remember(out))

        return _guard("coffer__remember", run, text=text, title=title, description=description, cwd=cwd)

    def list_memory(
        roots: RootsArg,
        scope: Annotated[
            Scope, Field(description="'project' (the current git project, default) or 'global'.")
        ] = "project",
        limit: Annotated[int, Field(description=f"Facts per page (1-{MAX_LIST_LIMIT}).")] = 20,
        cursor: Annotated[
            str | None, Field(description="next_cursor from the previous page; omit for the first.")
        ] = None,
        cwd: CwdArg = None,
    ) -> Annotated[CallToolResult, LIST_MEMORY.model]:
        def run() -> CallToolResult:
            where = _workdir(cwd, roots)
            page = svc.list_facts(cwd=where, scope=scope, limit=limit, cursor=cursor)
            assert page.target is not None  # list_facts always says where it listed
            out = LIST_MEMORY.dump(page)
            return _ok(out, render_list(out, first_page=cursor is None))

        return _guard("coffer__list_memory", run, cursor=cursor, cwd=cwd)

    def resume(roots: RootsArg, cwd: CwdArg = None) -> Annotated[CallToolResult, RESUME.model]:
        def run() -> CallToolResult:
            out = resume_out(svc.resume(cwd=_workdir(cwd, roots)))
            return _ok(out, out["summary"])

        return _guard("coffer__resume", run, cwd=cwd)

    def handoff(
        text: Annotated[str, Field(description="Where work stands: done, next, open questions, files.")],
        roots: RootsArg,
        cwd: CwdArg = None,
    ) -> Annotated[CallToolResult, HANDOFF.model]:
        def run() -> CallToolResult:
            where = _workdir(cwd, roots)
            res = svc.save_handoff(text, cwd=where)
            out = handoff_out(res)
            return _ok(out, render_handoff(out))

        return _guard("coffer__handoff", run, text=text, cwd=cwd)

    server.add_tool(
        recall, name="coffer__recall", title="Recall memory", description=RECALL_DOC, annotations=reads
    )
    server.add_tool(
        remember,
        name="coffer__remember",
        title="Remember a fact",
        description=REMEMBER_DOC,
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
    )
    server.add_tool(
        list_memory, name="coffer__list_memory", title="List memory", description=LIST_DOC, annotations=reads
    )
    server.add_tool(
        resume, name="coffer__resume", title="Resume from handoff", description=RESUME_DOC, annotations=reads
    )
    server.add_tool(
        handoff,
        name="coffer__handoff",
        title="Save a handoff",
        description=HANDOFF_DOC,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
        ),
    )
    add_resources_and_prompts(server, svc)
    return server
