"""``RecallShortcut``: plain recall requests skip FastAPI's machinery and answer exactly as the routes.

Each request goes to two apps over one real home: the app as built, and the same app without the
shortcut (FastAPI's routes answer everything). Status, headers and body must be the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlencode

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from coffer_memory import MemoryService
from coffer_memory.vocabulary import MAX_QUERY_CHARS, MAX_RECALL_LIMIT, MAX_TAG_CHARS, MAX_TAGS
from coffer_memory_fastapi import create_app
from coffer_memory_fastapi.shortcut import recall_arguments

API = "/api/v1/memory_stores"
TOKEN = "s3cret"
ORIGIN = "https://app.example"


def without_shortcut(app: FastAPI) -> FastAPI:
    """The app with the shortcut left out (the middleware stack is built on the first request)."""
    assert app.state.recall_shortcut
    app.state.recall_shortcut = False
    return app


@pytest.fixture
def home(svc: MemoryService, repo: Path) -> tuple[MemoryService, Path]:
    svc.remember("we deploy with fly.io from the main branch", store="global", tags=["ops"])
    svc.remember("the deploy pipeline caches docker layers", store="global", tags=["ops", "ci"])
    svc.remember("release notes go to the changelog before a deploy", cwd=repo)
    return svc, repo


@pytest.fixture(params=["open", "token+cors"])
def pair(
    request: pytest.FixtureRequest, home: tuple[MemoryService, Path]
) -> Iterator[tuple[TestClient, TestClient]]:
    svc, _ = home
    options: dict[str, Any] = {"token": TOKEN, "cors_origins": [ORIGIN]} if request.param != "open" else {}
    headers = {"Authorization": f"Bearer {TOKEN}"} if request.param != "open" else {}
    with (
        TestClient(create_app(svc, **options), raise_server_exceptions=False, headers=headers) as fast,
        TestClient(
            without_shortcut(create_app(svc, **options)), raise_server_exceptions=False, headers=headers
        ) as slow,
    ):
        yield fast, slow


def queries(svc: MemoryService, repo: Path) -> list[str]:
    """Query strings for ``/recall``: plain ones the shortcut takes, odd ones it leaves to FastAPI."""
    project = svc.resolve_store(cwd=repo)
    plain: list[dict[str, Any]] = [
        {"query": "deploy", "store": "global"},
        {"query": "deploy docker", "store": "global", "limit": 1},
        {"query": "deploy", "store": ["global", project], "limit": MAX_RECALL_LIMIT},
        {"query": "deploy", "cwd": str(repo)},
        {"query": "deploy", "cwd": str(repo / "sub")},
        {"query": "deploy", "store": "global", "mode": "grep"},
        {"query": "deploy", "store": "global", "mode": "keyword", "tag": ["ops", "ci"]},
        {"query": "deploy", "store": "global", "since": "2020-01-01", "until": "2999-01-01T10"},
        {"query": "deploy", "store": "global", "tag": ""},
        {"query": "deploy", "store": "global", "unknown": "ignored"},
        {"query": "déploiement ünïcode", "store": "global"},
        {"query": "x" * MAX_QUERY_CHARS, "store": "global"},
        {"query": "deploy", "store": "global", "tag": ["t" * MAX_TAG_CHARS] * MAX_TAGS},
    ]
    core_errors: list[dict[str, Any]] = [
        {"query": "deploy"},  # neither cwd nor store
        {"query": "deploy", "cwd": str(repo), "store": "global"},
        {"query": "deploy", "cwd": "relative/dir"},
        {"query": "deploy", "cwd": str(repo.parent)},  # not in a git repository
        {"query": "de\x00ploy", "store": "global"},
        {"query": "deploy", "store": "nope"},
        {"query": "deploy", "store": ""},
        {"query": "deploy", "store": "global", "mode": "vector"},
        {"query": "deploy", "store": "global", "since": "yesterday-ish"},
        {"query": "deploy", "store": "global", "since": "2030-01-01", "until": "2020-01-01"},
    ]
    fastapi_errors: list[dict[str, Any]] = [
        {"store": "global"},
        {"query": "", "store": "global"},
        {"query": "x" * (MAX_QUERY_CHARS + 1), "store": "global"},
        {"query": "deploy", "store": "global", "mode": "magic"},
        {"query": "deploy", "store": "global", "mode": "KEYWORD"},
        {"query": "deploy", "store": "global", "tag": ["t"] * (MAX_TAGS + 1)},
        {"query": "deploy", "store": "global", "tag": "t" * (MAX_TAG_CHARS + 1)},
        {"query": "deploy", "store": "global", "since": "2" * 65},
        *(
            {"query": "deploy", "store": "global", "limit": bad}
            for bad in ("0", "-1", str(MAX_RECALL_LIMIT + 1), "abc", "", "1.5")
        ),
    ]
    odd_but_valid = [  # FastAPI reads these; the shortcut leaves them to it
        "query=deploy&query=docker&store=global",
        "query=deploy&store=global&limit=010",
        "query=deploy&store=global&limit=+5",
        "query=deploy&store=global&limit=%205",
        "query=deploy&store=global&limit=3&limit=2",
        "query=deploy&store=global&mode=grep&mode=keyword",
        "query=deploy+docker&store=global&cwd=",
        "query=%ff%fe&store=global",
    ]
    encoded = [urlencode(q, doseq=True) for q in [*plain, *core_errors, *fastapi_errors]]
    return [*encoded, *odd_but_valid]


def same(fast: Any, slow: Any, what: str) -> None:
    assert (fast.status_code, fast.headers.multi_items(), fast.content) == (
        slow.status_code,
        slow.headers.multi_items(),
        slow.content,
    ), what


def test_every_recall_request_is_answered_as_the_routes_answer_it(
    pair: tuple[TestClient, TestClient], home: tuple[MemoryService, Path]
) -> None:
    fast, slow = pair
    svc, repo = home
    statuses = set()
    for query in queries(svc, repo):
        for path in (f"{API}/recall", f"{API}/global/recall"):
            url = f"{path}?{query}"
            a, b = fast.get(url), slow.get(url)
            same(a, b, url)
            statuses.add(a.status_code)
    assert statuses == {200, 404, 422}  # hits, a missing store, refusals: each kind was compared


@pytest.mark.parametrize(
    "path",
    [
        f"{API}/recall/recall",  # a store named "recall"
        f"{API}/GLOBAL/recall",
        f"{API}/project-nope/recall",
        f"{API}/gl%6Fbal/recall",
        f"{API}//recall",
        f"{API}/recall/",
        f"{API}/global/recall/",
        f"{API}/a/b/recall",
    ],
)
def test_odd_paths_are_answered_as_the_routes_answer_them(
    pair: tuple[TestClient, TestClient], path: str
) -> None:
    fast, slow = pair
    url = f"{path}?query=deploy&store=global"
    same(fast.get(url), slow.get(url), url)


def test_other_methods_headers_and_origins_are_answered_as_before(
    pair: tuple[TestClient, TestClient],
) -> None:
    fast, slow = pair
    url = f"{API}/recall?query=deploy&store=global"
    for method in ("HEAD", "POST", "PUT", "DELETE", "OPTIONS"):
        same(fast.request(method, url), slow.request(method, url), method)
    preflight = {"Origin": ORIGIN, "Access-Control-Request-Method": "GET"}
    for headers in (
        {"Origin": ORIGIN},
        {"Origin": "https://evil.example"},
        {"Host": "attacker.example"},
        {"Authorization": "Bearer wrong"},
        {"Authorization": ""},
    ):
        same(fast.get(url, headers=headers), slow.get(url, headers=headers), str(headers))
    same(fast.options(url, headers=preflight), slow.options(url, headers=preflight), "preflight")


def scope(path: str, query: str, method: str = "GET", root_path: str = "") -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": query.encode(),
        "root_path": root_path,
    }


def test_plain_requests_take_the_shortcut_and_odd_ones_do_not() -> None:
    plain = recall_arguments(scope(f"{API}/recall", "query=deploy+docker&store=global&store=other&limit=7"))
    assert plain == ("deploy docker", None, ["global", "other"], None, 7, None, None, None, None)
    one = recall_arguments(scope(f"{API}/global/recall", "query=x&mode=grep&tag=a&tag=b"))
    assert one == ("x", None, None, "grep", 10, ["a", "b"], None, None, "global")
    for odd in (
        scope(f"{API}/recall", "query=x&store=global", method="HEAD"),
        scope(f"{API}/recall", "query=x&store=global", root_path="/mounted"),
        scope(f"{API}/recall/", "query=x&store=global"),
        scope(f"{API}/stores/recall/more", "query=x"),
        scope(f"{API}/recall", "store=global"),
        scope(f"{API}/recall", "query=x&query=y&store=global"),
        scope(f"{API}/recall", "query=x&store=global&limit=010"),
        scope(f"{API}/recall", "query=x&store=global&limit=201"),
        scope(f"{API}/recall", "query=x&store=global&mode=magic"),
        scope(f"{API}/global/recall", "query=x&cwd=/ignored"),  # FastAPI refuses what a route does not take
        scope(f"{API}/recall", "query=x&store=global&tags=a"),
    ):
        assert recall_arguments(odd) is None, odd


class Seen:
    """A pure ASGI middleware recording the paths of the requests that reach it."""

    paths: ClassVar[list[str]] = []

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            Seen.paths.append(scope["path"])
        await self.app(scope, receive, send)


def test_a_plain_recall_is_answered_in_front_of_the_middleware_stack(
    home: tuple[MemoryService, Path],
) -> None:
    # Starlette's error middleware, FastAPI's layers and the guard each wrapped every recall and
    # its sends; the shortcut now asks the guard itself and answers before all of them.
    svc, _ = home
    app = create_app(svc)
    app.add_middleware(Seen)  # the outermost middleware of the stack
    Seen.paths.clear()
    with TestClient(app) as client:
        plain = client.get(f"{API}/recall", params={"query": "deploy", "store": "global"})
        assert plain.status_code == 200 and plain.json()["hits"]
        assert Seen.paths == []
        client.get(f"{API}/recall", params={"query": "deploy", "store": "global", "limit": "010"})
        client.get(
            f"{API}/recall", params={"query": "deploy", "store": "global"}, headers={"Host": "evil.example"}
        )
        client.get(
            f"{API}/global/recall", params={"query": "deploy"}, headers={"Sec-Fetch-Site": "cross-site"}
        )
    assert Seen.paths == [f"{API}/recall", f"{API}/recall", f"{API}/global/recall"]


def test_an_unexpected_failure_of_a_recall_is_answered_as_the_routes_answer_it(
    pair: tuple[TestClient, TestClient], home: tuple[MemoryService, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, slow = pair
    svc, _ = home

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a fault that must not leak")

    monkeypatch.setattr(svc.facts, "recall", broken)  # the one way to make a real recall fail unexpectedly
    url = f"{API}/recall?query=deploy&store=global"
    a, b = fast.get(url), slow.get(url)
    same(a, b, url)
    assert a.status_code == 500 and a.json()["error"]["code"] == "INTERNAL" and "leak" not in a.text
