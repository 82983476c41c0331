"""Agent-facing endpoints: the session-start bundle."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from ..deps import Service, check_cwd
from ..errors import error_responses
from ..schemas import SessionContextOut

router = APIRouter(prefix="/api/v1/agents", tags=["agents"])


@router.get("/{name}/session-context", response_model=SessionContextOut, responses=error_responses())
def session_context(
    svc: Service,
    name: Annotated[str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", description="The agent.")],
    cwd: Annotated[str, Query(description="The agent's absolute working directory.")],
) -> SessionContextOut:
    """Project rules, global rules and the seeded rules (at most 10,000 characters). Read-only."""
    return SessionContextOut(additional_context=svc.assemble_session_context(check_cwd(cwd)))
