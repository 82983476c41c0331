"""What the REST adapter costs per recall request besides the recall itself, measured in-process.

Each figure is the minimum over ``--n`` single requests (the uncontended cost: on a shared machine
a mean mostly measures the neighbours), in one process over one store:

- HTTP/1.1 protocol: uvicorn's ``H11Protocol`` and ``HttpToolsProtocol`` parsing a recall request
  and writing a 2 KB JSON response, fed through a fake transport (no socket, trivial ASGI app);
- response encoding of a 10-hit ``RecallResult``: a returned model (built from the shape's dict,
  FastAPI's ``serialize_response``, ``JSONResponse``), which is what a route returning a Pydantic
  model costs, beside ``reply(RECALL, result)`` (the shape's dump and one ``pydantic_core.to_json``);
- the whole app: ``GET /api/v1/memory_stores/recall`` through the ASGI app (middleware, parameter
  parsing, the thread hop, the recall, the response) beside ``svc.recall`` alone, with and without
  ``RecallShortcut`` (without it, FastAPI's route answers: its parameters, dependencies, middleware);
- the limit's answer to the same query (``bench/rest_limit.py``: ``bench/limit.py``'s FTS5 query over
  the same facts, then its JSON), which is all the limit server does besides HTTP;
- the mean CPU of ``svc.recall`` (and with ``reply``) and of the limit's answer over ``bench/rest.py``'s
  queries, interleaved in ``--rounds`` rounds: what a server pays on average. A minimum is the
  best case of one query with warm caches; served figures are means over many queries, so set
  them beside these (session 9 read a served request as 2 ms dearer than the in-process minimum;
  session 10 found it 0.4-1.2 ms dearer than this mean).

    .venv/bin/python bench/rest_path.py --home DIR [--n 2000] [--rounds 2]   (DIR: bench/rest.py --home)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import environment, print_environment, table
from rest_limit import LimitApp, limit_db

from coffer_memory import MemoryService
from coffer_memory_fastapi import create_app

QUERY = "deploy docker"
PATH = "/api/v1/memory_stores/recall"
REQUEST = (
    f"GET {PATH}?{urlencode({'query': QUERY, 'store': 'global', 'limit': 10})} HTTP/1.1\r\n"
    "Host: 127.0.0.1:8765\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate\r\nConnection: keep-alive\r\n"
    "User-Agent: python-httpx/0.28.1\r\n\r\n"
).encode()
BODY = b'{"hits":[' + b",".join([b'{"id":"x","text":"' + b"a" * 200 + b'"}'] * 10) + b"]}"


def best_of(n: int, fn: Callable[[], Any]) -> tuple[float, float]:
    """Minimum wall and CPU (all threads of this process) seconds of ``fn()`` over ``n`` calls."""
    wall = cpu = float("inf")
    for _ in range(n):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
    return wall, cpu


async def abest_of(n: int, fn: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """``best_of`` for a coroutine function."""
    wall = cpu = float("inf")
    for _ in range(n):
        t0, c0 = time.perf_counter(), time.process_time()
        await fn()
        wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
    return wall, cpu


def us(figures: tuple[float, float]) -> list[float]:
    """Wall and CPU seconds as microseconds."""
    return [figures[0] * 1e6, figures[1] * 1e6]


async def protocol_cost(http: str, n: int) -> tuple[float, float]:
    """One request through uvicorn's ``http`` protocol class and a trivial app."""
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    async def app(scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": BODY})

    class Transport(asyncio.Transport):
        written = 0

        def get_extra_info(self, name: str, default: Any = None) -> Any:
            return {"sockname": ("127.0.0.1", 8765), "peername": ("127.0.0.1", 5555)}.get(name, default)

        def write(self, data: Any) -> None:
            self.written += len(data)

        def is_closing(self) -> bool:
            return False

        def close(self) -> None:
            """Nothing to close: no socket."""

    config = Config(app=app, http=http, access_log=False, log_level="warning", lifespan="off")
    config.load()
    proto = config.http_protocol_class(  # type: ignore[call-arg]
        config=config, server_state=ServerState(), app_state={}, _loop=asyncio.get_running_loop()
    )
    transport = Transport()
    proto.connection_made(transport)

    async def one() -> None:
        before = transport.written
        proto.data_received(REQUEST)
        while transport.written == before or not proto.cycle.response_complete:
            await asyncio.sleep(0)

    return await abest_of(n, one)


def scope() -> dict[str, Any]:
    """The ASGI scope of the recall request."""
    query = urlencode({"query": QUERY, "store": "global", "limit": 10}).encode()
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": PATH, "raw_path": PATH.encode(), "query_string": query, "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8765"), (b"accept", b"*/*")],
        "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8765), "state": {},
    }  # fmt: skip


async def run(home: str, n: int) -> list[list[Any]]:
    """Every figure, as table rows (microseconds)."""
    from fastapi.responses import JSONResponse
    from fastapi.routing import serialize_response
    from fastapi.utils import create_model_field

    from coffer_memory_fastapi.reply import reply
    from coffer_memory_fastapi.schemas import RECALL

    rows: list[list[Any]] = []
    for http in ("h11", "httptools"):
        rows.append([f"uvicorn {http} protocol, one request", *us(await protocol_cost(http, n))])

    svc = MemoryService(home)
    result = svc.recall(QUERY, stores=["global"], limit=10)
    field = create_model_field(name="Response_recall", type_=RECALL.model, mode="serialization")

    async def as_model() -> None:
        out = RECALL.model.model_validate(RECALL.dump(result))
        JSONResponse(await serialize_response(field=field, response_content=out, is_coroutine=True))

    rows.append(["encode the recall answer: returned model", *us(await abest_of(n, as_model))])
    rows.append(
        ["encode the recall answer: reply(RECALL, result)", *us(best_of(n, lambda: reply(RECALL, result)))]
    )

    app = create_app(svc)
    routed = create_app(svc)
    routed.state.recall_shortcut = False

    def through(asgi: Any) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            sent: list[dict[str, Any]] = []

            async def receive() -> dict[str, Any]:
                return {"type": "http.request", "body": b"", "more_body": False}

            async def send(message: dict[str, Any]) -> None:
                sent.append(message)

            await asgi(scope(), receive, send)
            assert sent[0]["status"] == 200

        return call

    async with app.router.lifespan_context(app), routed.router.lifespan_context(routed):
        await through(app)()
        await through(routed)()
        whole = await abest_of(n, through(app))
        slow = await abest_of(n, through(routed))
        alone = best_of(n, lambda: svc.recall(QUERY, stores=["global"], limit=10))
    svc.close()
    rows.append(["recall through the ASGI app (RecallShortcut)", *us(whole)])
    rows.append(["recall through the ASGI app without the shortcut (FastAPI's route)", *us(slow)])
    rows.append(["svc.recall alone", *us(alone)])
    rows.append(["the app beyond the recall (difference)", *us((whole[0] - alone[0], whole[1] - alone[1]))])
    with tempfile.TemporaryDirectory() as tmp:
        limit = LimitApp(str(limit_db(Path(home), Path(tmp) / "limit.db")), threaded=False)
        rows.append(
            [
                "the limit's answer (bench/rest_limit.py: FTS5 query + JSON)",
                *us(best_of(n, lambda: limit.answer(QUERY))),
            ]
        )
    rows.append(["the same without the shortcut", *us((slow[0] - alone[0], slow[1] - alone[1]))])
    return rows


def means(home: str, rounds: int) -> list[list[Any]]:
    """Mean wall and CPU per call over ``bench/rest.py``'s queries, the three steps interleaved
    in each round (rows: step, round, microseconds)."""
    from rest import queries

    from coffer_memory_fastapi.reply import reply
    from coffer_memory_fastapi.schemas import RECALL

    qs = queries(2000)
    rows: list[list[Any]] = []
    with MemoryService(home) as svc, tempfile.TemporaryDirectory() as tmp:
        limit = LimitApp(str(limit_db(Path(home), Path(tmp) / "limit.db")), threaded=False)
        steps: list[tuple[str, Callable[[str], Any]]] = [
            ("svc.recall", lambda q: svc.recall(q, stores=["global"], limit=10)),
            (
                "reply(RECALL, svc.recall(...))",
                lambda q: reply(RECALL, svc.recall(q, stores=["global"], limit=10)),
            ),
            ("the limit's answer", limit.answer),
        ]
        for _, step in steps:  # warm-up: pages, statements, connections
            for q in qs[:200]:
                step(q)
        for i in range(rounds):
            for name, step in steps:
                t0, c0 = time.perf_counter(), time.process_time()
                for q in qs:
                    step(q)
                wall, cpu = (time.perf_counter() - t0) / len(qs), (time.process_time() - c0) / len(qs)
                rows.append([name, i + 1, wall * 1e6, cpu * 1e6, os.getloadavg()[0]])
    return rows


def main(argv: list[str] | None = None) -> int:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--home", required=True, help="a coffer home with a global store (bench/rest.py --home)"
    )
    parser.add_argument(
        "--n", type=int, default=2000, help="single requests per figure (the minimum is kept)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the mean figures")
    args = parser.parse_args(argv)
    print_environment(environment(args.home))
    rows = asyncio.run(run(args.home, args.n))
    headers = ["step", f"min wall us (of {args.n})", "min CPU us"]
    print(table(headers, rows, title="REST recall request, in process"))
    headers = ["step", "round", "mean wall us", "mean CPU us", "load avg"]
    print(table(headers, means(args.home, args.rounds), title="mean over 2,000 queries, interleaved"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
