"""``coffer-mcp``: serve coffer's MCP tools over stdio (default) or streamable HTTP.

On stdio, stdout carries the protocol only; every log line goes to stderr.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import queue
import sys
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.message import SessionMessage
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    TextContent,
)
from pydantic import ValidationError
from starlette.requests import Request

from coffer_memory import CofferError, KeyNamedTwice, MemoryService, keys_once_each, safe_echo
from coffer_memory._http_conns import RepeatedWarnings, connections_option
from coffer_memory._http_hosts import LOOPBACK_HOSTS, HostCheck, HostRule, forwarded_config, origins_option

from ._args import (
    CONNECTIONS_ENV,
    FORWARDED_ENV,
    HOSTS_ENV,
    MAX_SESSIONS,
    ORIGINS_ENV,
    SESSIONS_ENV,
    TOKEN_ENV,
    build_parser,
    sessions_option,
)
from ._debug import debug
from ._http_body import BoundedBody
from ._lines import LineSource, end, start_reader
from ._screen import Screened, named_twice, notification_named_twice
from ._sessions import MarkStreams, SessionRoom
from .refusals import HostGuard, TypedRefusals, send_envelope
from .server import build_server

__all__ = ["MAX_SESSIONS", "BearerTokenMiddleware", "build_parser", "main"]

DRAIN_SECONDS = 10.0
"""How long ``coffer-mcp`` on stdio still answers the calls in flight once its input has ended."""
DRAINED = (
    f"cancelled: coffer-mcp's input ended and this call was still running {DRAIN_SECONDS:g} s later "
    "(its drain at the end of input); what it was doing may still take effect"
)
"""The message of the JSON-RPC error a call still running after the drain is answered with."""
log = logging.getLogger("coffer_memory_mcp")


class BearerTokenMiddleware:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>`` (the
    scheme in any case, as HTTP has it and as ``coffer-api`` takes it; the value compared in
    constant time)."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = token.encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Refuse a request without the token with 401; pass everything else through."""
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            scheme, _, credentials = given.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(credentials.strip(), self._expected):
                challenge = [(b"www-authenticate", b'Bearer realm="coffer"')]
                await send_envelope(send, 401, "UNAUTHORIZED", "missing or wrong bearer token", challenge)
                return
        await self.app(scope, receive, send)


def _lone_surrogate_in(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class _HugeNumber:
    """A JSON integer longer than Python converts (``sys.get_int_max_str_digits``): pydantic
    refuses it (``number out of range``) and ``json.loads`` raises, so the request was dropped."""

    def __str__(self) -> str:
        return "a number"


def _int_or_huge(digits: str) -> int | _HugeNumber:
    try:
        return int(digits)
    except ValueError:  # more digits than int() converts
        return _HugeNumber()


def _huge_number_in(value: Any) -> bool:
    if isinstance(value, _HugeNumber):
        return True
    if isinstance(value, dict):
        return any(_huge_number_in(v) for v in value.values())
    return isinstance(value, list) and any(_huge_number_in(v) for v in value)


def _why_refused(value: Any) -> str | None:
    """What makes ``value`` no message the SDK reads, or None when it is only of the wrong shape."""
    if _lone_surrogate_in(value):
        return "contains a lone surrogate, which is not a character"
    if _huge_number_in(value):
        return f"holds a number of more than {sys.get_int_max_str_digits()} digits"
    return None


def answer_to_refused(line: str | dict[str, Any]) -> SessionMessage | None:
    """The answer to a request the SDK's parser refused (None when no request id can be read):
    ``line`` is the line as read, or the message as parsed.

    The SDK's stdio transport parses with pydantic, which refuses a lone surrogate escape
    (``"\\ud800"``) that Python's ``json`` reads, an integer of more digits than Python converts
    (``"limit": 111…`` of 5,000 digits, which ``json`` refuses too), and a message that is JSON but
    not JSON-RPC (``"params": "x"``, ``"jsonrpc": "1.0"``); the server then logs the line and never
    answers, so the client waits forever. A ``tools/call`` with such an argument gets an
    ``INVALID_INPUT`` tool error naming it, any other refused request a JSON-RPC error.
    """
    try:
        request = json.loads(line, parse_int=_int_or_huge) if isinstance(line, str) else line
    except (ValueError, RecursionError):  # ``[[[…`` deeper than the parser follows killed the server
        return None
    if not isinstance(request, dict):
        return None
    request_id = request.get("id")
    if not isinstance(request_id, (int, str)) or isinstance(request_id, bool):
        return None  # a notification or garbage: there is no one to answer
    why = _why_refused(request)
    if why is None:
        error = ErrorData(code=INVALID_REQUEST, message="the request is not valid JSON-RPC")
        return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
    params = request.get("params")
    arguments = params.get("arguments") if isinstance(params, dict) else None
    if request.get("method") != "tools/call" or not isinstance(arguments, dict):
        error = ErrorData(code=INVALID_PARAMS, message=f"INVALID_INPUT: the request {why}")
        return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
    where = next((k for k, v in arguments.items() if _why_refused([k, v])), "arguments")
    where = safe_echo(where.encode("utf-8", "backslashreplace").decode("utf-8"))
    text = f"INVALID_INPUT: {where} {why}"
    result = CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
    payload = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=request_id, result=payload))


def answer_over_http(body: bytes) -> tuple[int, bytes] | None:
    """The HTTP status and JSON of ``answer_to_refused``'s answer to a POST body holding a lone
    surrogate, which the SDK's HTTP transport refuses as JSON that does not parse, or of
    ``INVALID_INPUT`` to one naming a key twice in one object (as ``coffer-api`` answers it; the
    transport took the last value): ``200`` under a request's id, ``400`` with a null id for a
    notification (the streamable-HTTP rule for a notification the server cannot accept). None
    leaves the body to the transport. ``http_app`` asks it only for a request that passed the
    ``Host`` and ``Origin`` checks (``HostGuard``) and passes the transport's ``Content-Type`` check."""
    try:
        message = json.loads(body, parse_int=_int_or_huge, object_pairs_hook=keys_once_each)
    except KeyNamedTwice as twice:
        refused = named_twice(body, twice)  # the words and the id stdio answers with (``_screen``)
        if refused is None:
            notification = notification_named_twice(body, twice)
            return None if notification is None else (400, _compact(notification))
        return None if refused["id"] is None else (200, _compact(refused))
    except (ValueError, RecursionError):
        return None
    else:
        if not isinstance(message, dict) or not _lone_surrogate_in(message):
            return None
        answer = answer_to_refused(message)
    if answer is None:
        return None
    try:
        return 200, answer.message.model_dump_json(by_alias=True, exclude_unset=True).encode()
    except ValueError:  # the surrogate is in the id: no answer can name it, the transport's 400 stands
        return None


def _compact(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def _answer_to_error(error: ValidationError) -> SessionMessage | None:
    """``answer_to_refused`` for what the SDK's parser refused: a line that is not JSON is the
    input of an error at the root, a message of the wrong shape that of a missing field."""
    for err in error.errors():
        refused = err.get("input")
        if len(err["loc"]) <= 2 and isinstance(refused, (str, dict)):
            try:
                answer = answer_to_refused(refused)
            except RecursionError:  # nested deeper than Python's json reads: no id to answer
                continue  # (it reached the server's read loop, and one such line ended the server)
            if answer is not None:
                return answer
    return None


class _AnswerRefused:
    """The stdio read stream, with lines the SDK refused answered (``answer_to_refused``) instead
    of handed to the server, which would drop them; at the end of input it waits (up to
    ``DRAIN_SECONDS``) until every request read has been answered through ``writer``, and
    answers a call still running then with a JSON-RPC error (``DRAINED``).

    Requests are counted per id: a client may reuse an id while a call under it runs, and the
    SDK then runs and answers both (its in-flight table keyed by id, a reused id overwritten).

    The server cancels what is in flight when its input ends: a client that sent a
    ``coffer__remember`` and closed stdin (a shutdown) had the fact written and never heard so,
    and a client waiting for a call that outran the drain waited for an answer that never came.
    """

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner = inner
        self._write = write
        self._pending: Counter[int | str] = Counter()  # requests read and not yet answered, per id
        self.writer = _Answering(write, self._pending)

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item (the dispatcher restores it)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        """The next message or transport error the server should see."""
        while True:
            try:
                item: SessionMessage | Exception = await self._inner.receive()
            except anyio.EndOfStream:
                debug(f"end of input with {self._pending.total()} request(s) in flight: draining")
                with anyio.move_on_after(DRAIN_SECONDS):
                    while self._pending:
                        await anyio.sleep(0.01)
                await self.writer.give_up()
                raise
            if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
                self._pending[item.message.id] += 1
            if isinstance(item, ValidationError):
                answer = _answer_to_error(item)
                if answer is not None:
                    await self._write.send(answer)
                    continue
            return item

    def __aiter__(self) -> _AnswerRefused:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        """Close the underlying stream."""
        await self._inner.aclose()

    async def __aenter__(self) -> _AnswerRefused:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Answering:
    """The stdio write stream, crossing off each request it carries the answer to (one request
    of its id: ids are counted)."""

    def __init__(self, inner: Any, pending: Counter[int | str]) -> None:
        self._inner = inner
        self._pending = pending
        self._sending: Counter[int | str] = Counter()  # answers handed to the stream, not yet taken
        self._given_up: set[int | str] = set()  # answered by ``give_up``: a late answer is dropped

    async def send(self, item: SessionMessage) -> None:
        """Write ``item``; an answer settles its request."""
        message = item.message
        if not isinstance(message, (JSONRPCResponse, JSONRPCError)) or message.id is None:
            await self._inner.send(item)
            return
        if message.id in self._given_up:
            return
        self._sending[message.id] += 1
        try:
            await self._inner.send(item)
        finally:
            _cross_off(self._sending, message.id)
        _cross_off(self._pending, message.id)

    async def give_up(self) -> None:
        """Answer every request still waiting, and not being answered now, with the ``DRAINED``
        error (the server cancels them next); an answer of theirs that comes later is dropped."""
        late = self._pending - self._sending  # per id, the requests no answer is being written to
        self._given_up.update(late)
        for request_id in sorted(late.elements(), key=str):
            error = ErrorData(code=INTERNAL_ERROR, message=DRAINED)
            await self._inner.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error)))
            _cross_off(self._pending, request_id)

    async def aclose(self) -> None:
        """Close the underlying stream."""
        await self._inner.aclose()

    async def __aenter__(self) -> _Answering:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _cross_off(counts: Counter[int | str], request_id: int | str) -> None:
    """One fewer of ``request_id`` in ``counts`` (an id at zero is dropped: ``while pending``)."""
    if counts[request_id] > 1:
        counts[request_id] -= 1
    else:
        counts.pop(request_id, None)


async def _serve_stdio(server: MCPServer, stdin: Any = None, stdout: Any = None) -> None:
    """What ``server.run("stdio")`` does, with refused requests answered.

    ``stdin``/``stdout`` replace the process's streams (``_stdio`` hands over the wire this way)."""
    from mcp.server.stdio import stdio_server

    # A private attribute: the SDK's own in-memory client reaches the low-level server the same
    # way, and the SDK notes that it is meant to become public.
    lowlevel = server._lowlevel_server
    lines: queue.Queue[object] | None = None
    if stdin is None or stdout is None:
        lines = queue.Queue()
        stdin, stdout = _own_stdio(lines)
    try:
        # Batches and unreadable ids, which the SDK would drop unanswered (see ``_screen``).
        stdin = Screened(stdin, stdout)
        async with stdio_server(stdin, stdout) as (read, write):
            reading = _AnswerRefused(read, write)
            await lowlevel.run(reading, reading.writer, lowlevel.create_initialization_options())
    finally:
        if lines is not None:
            end(lines)  # Ctrl-C with the client connected: let go of the read waiting for its next line


class _LockedOut:
    """stdout for two writers (the SDK's writer task and ``Screened``): one whole line per write."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self._lock = threading.Lock()

    def _write(self, text: str) -> None:
        with self._lock:
            self._out.write(text)
            self._out.flush()

    async def write(self, text: str) -> None:
        """Write ``text`` and flush it, under the lock."""
        await anyio.to_thread.run_sync(self._write, text)

    async def flush(self) -> None:
        """Each write is flushed already."""


def _own_stdio(lines: queue.Queue[object]) -> tuple[LineSource, _LockedOut]:
    """The wire on private descriptors, as the SDK's ``stdio_server`` would claim it (fd 0 reads
    /dev/null and fd 1 writes stderr from now on), so ``Screened`` can answer on it too.

    Its lines come through ``lines`` from a daemon thread (``_lines``), not through
    ``anyio.wrap_file``, whose read a cancelled run waits for: one Ctrl-C left the plain path
    running until the client closed stdin."""
    import io

    from ._fds import claim_stdio

    wire_in, wire_out = claim_stdio()
    start_reader(wire_in, lines)
    return LineSource([], lines), _LockedOut(io.TextIOWrapper(wire_out, encoding="utf-8"))


_WILDCARDS = ("0.0.0.0", "::", "")
SESSION_IDLE_S = 30 * 60
"""An MCP session with no request for this long (and no open stream) is ended (the SDK's default
since 2.2, given here so that it does not drift)."""


def http_app(
    server: MCPServer,
    host: str,
    token: str | None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    *,
    max_sessions: int = MAX_SESSIONS,
) -> Any:
    """The ASGI app ``coffer-mcp --transport streamable-http`` serves (``Host`` and ``Origin`` judged
    as ``coffer-api`` does when bound to loopback or given ``allowed_hosts``, ``allowed_origins``
    served besides the server's own; the token when one is set, bounded body, typed refusals; at
    most ``max_sessions`` MCP sessions, ``_sessions.SessionRoom``); uvicorn serves it with
    ``_http_head.BoundedHead``. A malformed entry of ``allowed_hosts`` is a ``ValueError``."""
    # The SDK's transport checks only the Content-Type here: Host and Origin are HostGuard's.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    checks = TransportSecurityMiddleware(security)

    async def refused(scope: dict[str, Any], body: bytes) -> tuple[int, bytes] | None:
        if scope["method"] != "POST":
            return None
        answer = answer_over_http(body)
        if answer is None or await checks.validate_request(Request(scope), is_post=True) is not None:
            return None  # the transport answers it: a wrong Content-Type
        return answer

    sdk_app = server.streamable_http_app(
        host=host,
        transport_security=security,
        max_sessions=max_sessions,
        session_idle_timeout=SESSION_IDLE_S,
    )
    # Past max_sessions a new session takes the place of one never used, else of the one idle longest.
    room = SessionRoom.install(server.session_manager)
    app: Any = BoundedBody(TypedRefusals(sdk_app), refused=refused)
    app = BearerTokenMiddleware(app, token) if token else app
    # Bound to loopback, or told which names to serve, as coffer-api is (and in the same order:
    # before the token). Bound to another address without ``--allowed-host`` neither Host nor
    # Origin is checked, as the SDK chose (docs/security.md): ``_serve_http`` warns of it.
    if host in LOOPBACK_HOSTS or allowed_hosts:
        extra = [*allowed_hosts, host] if host not in _WILDCARDS else list(allowed_hosts)  # by its given name
        hint = "; allow it with --allowed-host"
        app = HostGuard(app, HostCheck(HostRule(extra), allowed_origins, hint=hint))
    # Outermost: uvicorn's own scope, which the connection bound reads an event stream's rank in.
    return MarkStreams(app, room)


def _serve_http(
    server: MCPServer,
    host: str,
    port: int,
    token: str | None,
    log_level: str,
    hosts: Sequence[str],
    limit: int | None = None,
    forwarded: dict[str, Any] | None = None,
    origins: Sequence[str] = (),
    max_sessions: int = MAX_SESSIONS,
) -> None:
    import uvicorn

    app = http_app(server, host, token, hosts, origins, max_sessions=max_sessions)
    if not token and host not in LOOPBACK_HOSTS:
        log.warning("serving on %s without a token: anyone who can reach it can read and write memory", host)
    if not hosts and host not in LOOPBACK_HOSTS:
        log.warning(
            "serving on %s without --allowed-host: Host and Origin are not checked, so a web page "
            "whose name is re-pointed at this address (DNS rebinding) can call it; name the hosts "
            "clients use with --allowed-host NAME[:PORT]",
            host,
        )
    from ._http_head import BoundedHead

    # ``limit_concurrency``: at most that many connections held, judged as each is made (BoundedHead);
    # X-Forwarded-* believed from the proxies named (``forwarded_config``), none by default.
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level.lower(),
        http=BoundedHead,
        limit_concurrency=limit,
        **(forwarded or {"proxy_headers": False}),
    )
    # After the Config set up uvicorn's logging: its warnings about one bad request each, and the
    # SDK's about each session refused past --max-sessions, once a minute.
    logging.getLogger("uvicorn.error").addFilter(RepeatedWarnings())
    logging.getLogger("mcp.server.streamable_http_manager").addFilter(RepeatedWarnings())
    # Bound and listening here (a taken port: uvicorn's one line and status 3), so that ``--port 0``
    # can say the port the kernel picked; a request sent meanwhile waits in the backlog.
    sock = config.bind_socket()
    sock.listen(config.backlog)
    if port == 0:
        name = f"[{host}]" if ":" in host else host
        bound = f"http://{name}:{sock.getsockname()[1]}/mcp"
        print(f"coffer-mcp: listening on {bound}", file=sys.stderr, flush=True)
    serving = uvicorn.Server(config)
    serving.run(sockets=[sock])
    if not serving.started:
        sys.exit(3)  # uvicorn's status for a server that could not start


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``coffer-mcp`` until the client disconnects (stdio) or it is interrupted (HTTP)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    hosts = [*args.allowed_host, *(h.strip() for h in os.environ.get(HOSTS_ENV, "").split(",") if h.strip())]
    try:
        HostRule(hosts)
    except ValueError as exc:
        parser.error(str(exc))  # before the home is opened: a typo is one line and status 2
    limit = connections_option(parser, args.max_connections, CONNECTIONS_ENV)
    forwarded = forwarded_config(parser, args.forwarded_allow_ips, FORWARDED_ENV)
    origins = origins_option(parser, args.allowed_origin, ORIGINS_ENV)
    sessions = sessions_option(parser, args.max_sessions, SESSIONS_ENV)
    logging.basicConfig(
        stream=sys.stderr, level=args.log_level, format="coffer-mcp %(levelname)s %(message)s"
    )
    try:
        service = MemoryService(args.home)
    except CofferError as exc:
        print(f"coffer-mcp: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    with service:
        # Index what was written while no server ran, without delaying the handshake.
        threading.Thread(target=service.startup_sweep, name="coffer-startup-sweep", daemon=True).start()
        server = build_server(service)
        try:
            if args.transport == "stdio":
                anyio.run(_serve_stdio, server)
            else:
                token = args.token or os.environ.get(TOKEN_ENV) or None
                _serve_http(
                    server,
                    args.host,
                    args.port,
                    token,
                    args.log_level,
                    hosts,
                    limit,
                    forwarded,
                    origins,
                    sessions,
                )
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
