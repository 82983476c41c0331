"""Request-scoped helpers shared by the routers: the service, input hygiene, If-Match."""

from __future__ import annotations

import os
import re
from typing import Annotated

from fastapi import Depends, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from coffer_memory import AsyncMemoryService, InvalidInput, MemoryService, safe_echo

from .operations import Operations

MAX_CWD_CHARS = 4096


def _service(request: Request) -> MemoryService:
    service: MemoryService = request.app.state.service
    return service


async def _async_service(request: Request) -> AsyncMemoryService:
    # async: FastAPI runs a plain-def dependency in its thread pool, a hop per request for nothing.
    service: AsyncMemoryService = request.app.state.async_service
    return service


def _operations(request: Request) -> Operations:
    ops: Operations = request.app.state.operations
    return ops


Service = Annotated[MemoryService, Depends(_service)]
# The routes of the memory surface await this: each call runs in its bounded thread pool, and
# reads there use per-thread reader connections, so requests do not queue behind one lock.
AsyncService = Annotated[AsyncMemoryService, Depends(_async_service)]
Ops = Annotated[Operations, Depends(_operations)]


_TAKES: dict[int, tuple[APIRoute, frozenset[str]]] = {}
MAX_LISTED = 10  # unknown parameters named in the error at most


def _query_params(dependant: Dependant) -> set[str]:
    names = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_params(sub)
    return names


def _query_names(route: APIRoute) -> frozenset[str]:
    held = _TAKES.get(id(route))
    if held is None or held[0] is not route:
        held = _TAKES[id(route)] = (route, frozenset(_query_params(route.dependant)))
    return held[1]


async def known_query(request: Request) -> None:
    """``INVALID_INPUT`` for a query parameter the route does not take: FastAPI ignored it, so a
    misspelt filter (``?serch=``, ``?tags=``) listed or searched everything (the MCP tools and the
    JSON bodies refuse an unknown argument already)."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    takes = _query_names(route)
    unknown = sorted({k for k in request.query_params if k not in takes})
    if unknown:
        listed = ", ".join(repr(safe_echo(u)) for u in unknown[:MAX_LISTED])
        said = f"it takes {', '.join(sorted(takes))}" if takes else "it takes no query parameter"
        raise InvalidInput(
            f"{request.method} {route.path} takes no query parameter {listed}; {said}",
            field=safe_echo(unknown[0]),
        )


KnownQuery = Depends(known_query)


def clean(value: str | None, field: str) -> str | None:
    """Reject NUL characters, which no file name, query or frontmatter can carry."""
    if value is not None and "\x00" in value:
        raise InvalidInput(f"{field} contains a NUL character", field=field)
    return value


def check_cwd(cwd: str) -> str:
    """A client's working directory: an absolute path (the server's own cwd means nothing to it)."""
    clean(cwd, "cwd")
    if len(cwd) > MAX_CWD_CHARS or not os.path.isabs(cwd):
        raise InvalidInput("cwd must be an absolute path", field="cwd")
    return cwd


_ENTITY_TAG = re.compile(r'\s*(\*|(W/)?"([^"]*)"|[0-9A-Fa-f]{64})\s*(?:,|$)')


def if_match(header: str | None) -> tuple[str, ...] | None:
    """The sha256s an ``If-Match`` header may match, strongly (RFC 9110 13.1.1): None for no
    header or ``*`` (any current file); else the quoted tags of its list, lower-cased, with the
    weak ones (``W/"..."``) left out, as a weak tag never matches (an empty tuple: nothing can).

    A bare sha256 is taken as its quoted tag; anything that is no entity tag is ``InvalidInput``.
    A weak tag was taken as a match, and a list (``"a", "b"``) was refused with 422."""
    if header is None:
        return None
    tags: list[str] = []
    position, any_tag = 0, False
    while position < len(header):
        found = _ENTITY_TAG.match(header, position)
        if found is None or found.end() == position:
            raise InvalidInput(
                'If-Match must be the fact\'s ETag ("<sha256>"), a list of them, or *', field="If-Match"
            )
        position = found.end()
        tag, weak, quoted = found.group(1), found.group(2), found.group(3)
        if tag == "*":
            any_tag = True
        elif weak is None:
            tags.append((quoted if quoted is not None else tag).lower())
    if not tags and not any_tag and not header.strip():
        raise InvalidInput("If-Match is empty", field="If-Match")
    return None if any_tag else tuple(tags)


def etag(sha256: str) -> dict[str, str]:
    """The ETag header for a fact file's sha256."""
    return {"ETag": f'"{sha256}"'}
