"""The web view's pages: stores overview, one store's four lanes, one fact, recall. Read-only."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, PackageLoader, select_autoescape

from coffer_memory import CofferError, InvalidInput, MemoryScope, MemoryService, StoreInfo, read_fact_file
from coffer_memory.vocabulary import MAX_JOURNAL_DAYS, RETRIEVAL_MODES

from ..errors import STATUS
from .render import Exact, document, finalize, markdown, split_frontmatter
from .security import PAGE_HEADERS

PAGE_SIZE = 50
RECALL_LIMIT = 20
MAX_QUERY_CHARS = 1000

router = APIRouter(prefix="/ui", include_in_schema=False)
templates = Jinja2Templates(
    env=Environment(
        loader=PackageLoader("coffer_memory_fastapi.web", "templates"),
        autoescape=select_autoescape(default=True),
        finalize=finalize,
    )
)
templates.env.filters["markdown"] = markdown
templates.env.filters["document"] = document
templates.env.filters["exact"] = Exact

T = TypeVar("T")

PAGE_METHODS = ["GET", "HEAD"]
"""HEAD as GET without the body (a link checker's or an uptime probe's request); FastAPI's ``get``
answered it 405."""


def _service(request: Request) -> MemoryService:
    service: MemoryService = request.app.state.service
    return service


def _page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    # Only the modes this home enables: another one would only lead to an error page.
    enabled = _service(request).settings.memory.retrieval_modes
    modes = [m for m in RETRIEVAL_MODES if m in enabled]
    return templates.TemplateResponse(
        request, template, {"modes": modes, **context}, status_code=status, headers=PAGE_HEADERS
    )


def _guarded(request: Request, build: Callable[[], HTMLResponse]) -> HTMLResponse:
    """A page, or the error page for a core error (same codes and statuses as the REST API)."""
    try:
        return build()
    except CofferError as exc:
        return _page(request, "error.html", STATUS.get(exc.code, 500), error=exc, title=exc.code)


def _last_change(store_dir: Path) -> datetime | None:
    """When any Markdown file of a store last changed (facts, lanes, changelog)."""
    newest = max((p.stat().st_mtime for p in store_dir.rglob("*.md") if p.is_file()), default=None)
    return None if newest is None else datetime.fromtimestamp(newest, UTC)


@router.api_route("", methods=PAGE_METHODS, response_class=HTMLResponse, name="ui_overview")
def overview(request: Request) -> HTMLResponse:
    """Every store: label, repository root, fact count, last change."""

    def build() -> HTMLResponse:
        rows = [(info, _last_change(info.store_dir)) for info in _service(request).stores()]
        return _page(request, "overview.html", rows=rows, title="Stores")

    return _guarded(request, build)


@router.api_route("/stores/{name}", methods=PAGE_METHODS, response_class=HTMLResponse, name="ui_store")
def store(request: Request, name: str, cursor: str | None = None) -> HTMLResponse:
    """One store as four lanes (Knowledge, Rules, Journal, Handoff) and its consolidation changelog."""

    def build() -> HTMLResponse:
        svc = _service(request)
        info: StoreInfo = svc.store_info(name)
        project = info.scope is MemoryScope.PROJECT
        return _page(
            request,
            "store.html",
            info=info,
            facts=svc.list_facts(store=info.name, limit=PAGE_SIZE, cursor=cursor),
            rules=svc.rules(store=info.name),
            journal=svc.journal(store=info.name, limit=MAX_JOURNAL_DAYS) if project else [],
            handoffs=svc.handoffs(store=info.name),
            changelog=svc.consolidation_log(store=info.name),
            title=info.display_name,
        )

    return _guarded(request, build)


@router.api_route(
    "/stores/{name}/facts/{fact_id}", methods=PAGE_METHODS, response_class=HTMLResponse, name="ui_fact"
)
def fact(request: Request, name: str, fact_id: str) -> HTMLResponse:
    """One fact: its body rendered, its frontmatter, its provenance and where its file is."""

    def build() -> HTMLResponse:
        svc = _service(request)
        record = svc.get_fact(fact_id, store=name)
        try:
            frontmatter, _ = split_frontmatter(read_fact_file(record.path))
        except OSError:  # removed or replaced (a FIFO, a link) since the read above: the fields still show
            frontmatter = ""
        info = svc.store_info(record.store)
        return _page(
            request, "fact.html", info=info, record=record, frontmatter=frontmatter, title=record.fact.title
        )

    return _guarded(request, build)


@router.api_route("/search", methods=PAGE_METHODS, response_class=HTMLResponse, name="ui_search")
def search(
    request: Request,
    q: str = "",
    store: str = "",
    mode: str = "",
) -> HTMLResponse:
    """The recall box: hits with their store, score and the mode that found them."""

    def build() -> HTMLResponse:
        svc = _service(request)
        stores = svc.stores()
        result = None
        if len(q) > MAX_QUERY_CHARS:  # checked here, not by Query(max_length): that answered JSON
            raise InvalidInput(
                f"the query is {len(q)} characters long; at most {MAX_QUERY_CHARS} characters are searched",
                field="q",
            )
        if q.strip():
            names = [store] if store else [s.name for s in stores]
            result = svc.recall(q, stores=names, mode=mode or None, limit=RECALL_LIMIT)
        # A hit names its store by the label the overview shows (its name stays in a tooltip).
        labels = {s.name: s.display_name for s in stores}
        return _page(
            request,
            "search.html",
            q=q,
            store=store,
            mode=mode,
            stores=stores,
            labels=labels,
            result=result,
            title="Recall",
        )

    return _guarded(request, build)
