"""``create_app``: the FastAPI application over one MemoryService."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.security import HTTPBearer
from fastapi_offline import FastAPIOffline

from coffer_memory import AsyncMemoryService, MemoryService, __version__
from coffer_memory._http_hosts import HostRule, normal_origin

from . import errors, web
from .deps import KnownQuery
from .guard import RefusingCors, RequestGuard
from .operations import Operations
from .routers import agents, audit, facts, lanes, operations, porting, recall, resources, stores, transcripts
from .shortcut import RecallShortcut

DESCRIPTION = """\
Local-first shared memory for coding agents. Facts are Markdown files (the truth); responses
carry their absolute paths and sha256s. Every error is `{"error": {"code", "message", "details"}}`.
"""


def create_app(
    service: MemoryService | None = None,
    *,
    token: str | None = None,
    allowed_hosts: Iterable[str] = (),
    cors_origins: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
    operations_dir: Path | None = None,
    max_recalls: int | None = None,
) -> FastAPI:
    """The REST app. With ``service=None`` it opens ``MemoryService()`` (``$COFFER_HOME``) and closes
    it on shutdown; a service passed in stays the caller's to close. With ``token``, every request
    must carry ``Authorization: Bearer <token>``.

    Served ``Host`` values are the loopback names, the address a connection arrived at and
    ``allowed_hosts`` (``name``, ``name:port`` or ``*``); ``cors_origins`` (full origins such as
    ``https://app.example``) turns CORS on for them; ``allowed_origins`` are origins whose requests
    are served besides the server's own, without CORS (``coffer-api --allowed-origin``). See
    ``RequestGuard`` for every check.
    The read-only web view is served at ``/ui`` (``/`` redirects there; docs/web.md).
    ``operations_dir``: a folder where several server processes share the state of long-running
    operations (``coffer-api --workers N`` makes one); without it that state stays in this process.
    ``max_recalls``: the keyword recalls run at once (``AsyncMemoryService``; None: one per CPU
    this process may run on); ``coffer-api --workers N`` gives each worker its share of the CPUs.
    """
    hosts = HostRule(allowed_hosts)  # a malformed entry fails here, not on the first request
    # As a browser sends an Origin: Starlette compares it as given, and HTTPS://App.Example:443
    # (which the guard let through) got no CORS answer.
    cors = [normal_origin(o) for o in cors_origins]
    owned = service is None
    svc = service if service is not None else MemoryService()
    ops = Operations(operations_dir)
    asvc = AsyncMemoryService(svc, max_recalls=max_recalls)  # the routes' way in: never blocks the loop

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # Index what was written while no server ran, without delaying start-up.
        threading.Thread(target=svc.startup_sweep, name="coffer-startup-sweep", daemon=True).start()
        try:
            yield
        finally:
            ops.close()
            await asvc.close()  # the wrapped service stays open: closed below only if owned
            if owned:
                svc.close()

    # Declared for the OpenAPI document only; RequestGuard does the checking, on every path.
    security = [Depends(HTTPBearer(auto_error=False))] if token else []
    # /docs and /redoc with Swagger UI and ReDoc served from the package, not a CDN: offline too.
    app = FastAPIOffline(
        title="coffer-memory",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        dependencies=security,
    )
    app.state.service = svc
    app.state.async_service = asvc
    app.state.operations = ops
    errors.install(app)
    routers = (
        recall.router,
        stores.router,
        facts.router,
        lanes.router,
        operations.router,
        agents.router,
        transcripts.router,
        resources.router,
        audit.router,
        porting.router,
    )
    for router in routers:
        app.include_router(router, dependencies=[KnownQuery])  # an unknown query parameter: 422
    app.state.route_methods = errors.route_methods(r for router in routers for r in router.routes)
    web.install(app)  # the read-only pages at /ui, outside the OpenAPI document

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = errors.document_guard(FastAPI.openapi(app))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    # The last added runs first: the guard refuses before CORS answers a preflight.
    if cors:
        app.add_middleware(
            RefusingCors,
            allow_origins=cors,
            allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "If-Match"],
            expose_headers=["ETag", "Location"],
        )
    guarding: dict[str, Any] = {
        "hosts": hosts,
        "cors_origins": cors,
        "allowed_origins": list(allowed_origins),
        "token": token,
        "ui_prefix": web.UI_PREFIX,
        "body_limits": {porting.IMPORT_PATH: porting.MAX_UPLOAD_BODY_BYTES},
    }
    app.add_middleware(RequestGuard, **guarding)
    # A plain recall is answered in front of the whole stack, asking the same guard first
    # (``RecallShortcut``); ``app.state.recall_shortcut = False`` before the first request leaves
    # every recall to the routes.
    app.state.recall_shortcut = True

    def build_middleware_stack() -> Any:
        stack = FastAPI.build_middleware_stack(app)
        if not app.state.recall_shortcut:
            return stack
        guard = RequestGuard(stack, **guarding)
        return RecallShortcut(stack, guard=guard, service=asvc, cors=bool(cors))

    app.build_middleware_stack = build_middleware_stack  # type: ignore[method-assign]
    return app
