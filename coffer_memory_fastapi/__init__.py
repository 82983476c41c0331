"""REST adapter for coffer-memory: ``create_app(service) -> FastAPI``; console ``coffer-api``.

A thin face: it validates requests, calls ``MemoryService`` and translates results and errors
(one envelope, ``{"error": {"code", "message", "details"}}``). No business logic lives here.
"""

from .app import create_app
from .errors import STATUS

__all__ = ["STATUS", "create_app"]
