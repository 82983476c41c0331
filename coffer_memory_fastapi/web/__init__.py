"""The read-only web view served by coffer-api at ``/ui`` (docs/web.md).

Server-rendered pages over the public ``MemoryService`` API: no build step, no network fetches,
a few kilobytes of plain JS and CSS served from this package, Markdown sanitised with nh3.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

from .views import PAGE_METHODS, router

UI_PREFIX = "/ui"
"""Where the pages live, relative to the app's root path."""

__all__ = ["UI_PREFIX", "install"]


def install(app: FastAPI) -> None:
    """Mount the pages and their static files on ``app``, and send ``/`` to the overview."""
    app.mount(
        f"{UI_PREFIX}/static",
        StaticFiles(packages=[("coffer_memory_fastapi.web", "static")]),
        name="ui_static",
    )
    app.include_router(router)

    @app.api_route("/", methods=PAGE_METHODS, include_in_schema=False)
    def root(request: Request) -> RedirectResponse:
        return RedirectResponse(request.url_for("ui_overview"), status_code=307)
