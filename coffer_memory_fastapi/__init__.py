"""REST adapter for coffer-memory: ``create_app(service) -> FastAPI``; console ``coffer-api``.

A thin face: it validates requests, calls ``MemoryService`` and translates results and errors
(one envelope, ``{"error": {"code", "message", "details"}}``). No business logic lives here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app
    from .errors import STATUS

__all__ = ["STATUS", "create_app"]


def __getattr__(name: str) -> Any:
    # Imported on first use, so ``coffer-api`` (installed by every ``pip install coffer-memory``)
    # can say which extra to install instead of failing on ``import fastapi`` in this file.
    if name == "create_app":
        from .app import create_app

        return create_app
    if name == "STATUS":
        from .errors import STATUS

        return STATUS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
