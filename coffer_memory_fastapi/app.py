"""``create_app``: the FastAPI application over one MemoryService."""

from __future__ import annotations

import hmac
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.security import HTTPBearer
from starlette.types import ASGIApp, Receive, Scope, Send

from coffer_memory import MemoryService, __version__

from . import errors
from .operations import Operations
from .routers import agents, facts, lanes, operations, recall, stores, transcripts

DESCRIPTION = """\
Local-first shared memory for coding agents. Facts are Markdown files (the truth); responses
carry their absolute paths and sha256s. Every error is `{"error": {"code", "message", "details"}}`.
"""


class BearerAuth:
    """Reject every HTTP request without ``Authorization: Bearer <token>`` (401, in the envelope)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                response = errors.envelope(
                    "UNAUTHORIZED",
                    "a bearer token is required: Authorization: Bearer <token>",
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(service: MemoryService | None = None, *, token: str | None = None) -> FastAPI:
    """The REST app. With ``service=None`` it opens ``MemoryService()`` (``$COFFER_HOME``) and closes
    it on shutdown; a service passed in stays the caller's to close. With ``token``, every request
    must carry ``Authorization: Bearer <token>``.
    """
    owned = service is None
    svc = service if service is not None else MemoryService()
    ops = Operations()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # Index what was written while no server ran, without delaying start-up.
        threading.Thread(target=svc.startup_sweep, name="coffer-startup-sweep", daemon=True).start()
        try:
            yield
        finally:
            ops.close()
            if owned:
                svc.close()

    # Declared for the OpenAPI document only; BearerAuth does the checking, on every path.
    security = [Depends(HTTPBearer(auto_error=False))] if token else []
    app = FastAPI(
        title="coffer-memory",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        dependencies=security,
    )
    app.state.service = svc
    app.state.operations = ops
    errors.install(app)
    for router in (
        recall.router,
        stores.router,
        facts.router,
        lanes.router,
        operations.router,
        agents.router,
        transcripts.router,
    ):
        app.include_router(router)
    if token:
        app.add_middleware(BearerAuth, token=token)
    return app
