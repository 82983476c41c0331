"""Agent-facing endpoints: the session-start bundle, hook / MCP install and native-memory toggles."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path, Query

from ..deps import Service, check_cwd
from ..errors import error_responses
from ..schemas import AgentChangeOut, AgentListOut, AgentOut, AgentPatch, HookInstallIn, SessionContextOut

router = APIRouter(prefix="/api/v1/agents", tags=["agents"])
CheckMcp = Annotated[
    bool,
    Query(
        description="Start the registered coffer-mcp and ask it for its tools (takes up to a few seconds)."
    ),
]

AgentName = Annotated[
    str,
    Path(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
        description="'claude-code', 'codex' or 'opencode' (another name: 422 INVALID_INPUT).",
    ),
]


@router.get("/{name}/session-context", response_model=SessionContextOut, responses=error_responses())
def session_context(
    svc: Service,
    name: Annotated[str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", description="The agent.")],
    cwd: Annotated[str, Query(description="The agent's absolute working directory.")],
) -> SessionContextOut:
    """Project rules, global rules and the seeded rules (at most 10,000 characters). Read-only."""
    return SessionContextOut(additional_context=svc.assemble_session_context(check_cwd(cwd)))


# -- install / uninstall / native memory (edits the agent's own config files on this machine) --
@router.get("", response_model=AgentListOut, responses=error_responses(409))
def list_agents(svc: Service, check_mcp: CheckMcp = False) -> AgentListOut:
    """Every known agent: installed or not, hooks, MCP entry, native memory setting."""
    return AgentListOut(items=[AgentOut.of(s) for s in svc.agents(check_mcp=check_mcp)])


@router.get("/{name}", response_model=AgentOut, responses=error_responses(409))
def get_agent(name: AgentName, svc: Service, check_mcp: CheckMcp = False) -> AgentOut:
    """One agent's integration status (same as ``GET /{name}/hook-install``)."""
    return AgentOut.of(svc.agent_status(name, check_mcp=check_mcp))


@router.patch("/{name}", response_model=AgentChangeOut, responses=error_responses(409, 503, 507))
def patch_agent(name: AgentName, body: AgentPatch, svc: Service) -> AgentChangeOut:
    """Switch the agent's own memory off (``disable_native_memory: true``) or restore the user's
    prior settings (``false``). OpenCode has no such setting: 422."""
    return AgentChangeOut.of(svc.set_native_memory(name, body.disable_native_memory))


@router.get("/{name}/hook-install", response_model=AgentOut, responses=error_responses(409))
def get_hook_install(name: AgentName, svc: Service) -> AgentOut:
    """Whether coffer's session hooks and MCP entry are installed, and in which files."""
    return AgentOut.of(svc.agent_status(name))


@router.post("/{name}/hook-install", response_model=AgentChangeOut, responses=error_responses(409, 503, 507))
def post_hook_install(
    name: AgentName, svc: Service, body: Annotated[HookInstallIn | None, Body()] = None
) -> AgentChangeOut:
    """Install the session hooks and the MCP entry (idempotent: ``changed`` is empty the second
    time). 409 AGENT_CONFIG_INVALID when a config file does not parse: it is never overwritten;
    503 STORAGE_NOT_WRITABLE when one (or its folder) may not be written: none is.
    422 INVALID_INPUT when the MCP SDK is not installed where coffer-api runs (the message names
    ``pip install 'coffer-memory[mcp]'``); ``hooks_only: true`` installs the session hooks alone.
    409 AGENT_CONFIG_INVALID too for a ``coffer`` MCP entry of the user's own: ``force: true``
    replaces it (``notes`` says so; uninstall puts it back)."""
    disable = body.disable_native_memory if body is not None else None
    hooks_only = body.hooks_only if body is not None else False
    force = body.force if body is not None else False
    change = svc.install_agent(name, disable_native_memory=disable, hooks_only=hooks_only, force=force)
    return AgentChangeOut.of(change)


@router.delete(
    "/{name}/hook-install", response_model=AgentChangeOut, responses=error_responses(409, 503, 507)
)
def delete_hook_install(name: AgentName, svc: Service) -> AgentChangeOut:
    """Remove coffer's entries and restore the native-memory settings; each file is left as it was
    before install."""
    return AgentChangeOut.of(svc.uninstall_agent(name))
