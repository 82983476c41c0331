"""What ``coffer-mcp --transport streamable-http`` does when it holds as many MCP sessions as it may
(``--max-sessions``): a new session takes the place of one opened and never used, else of the one
idle longest.

The SDK refuses a new session past ``max_sessions`` (``503``, "Too many open sessions"), and a
session lives until it is deleted or idle for ``SESSION_IDLE_S`` (30 minutes). One client opening
sessions and leaving them filled the 1,000 in about three seconds, after which every agent that
came was turned away, for as long as the client kept the table full. On loopback every client is
127.0.0.1, so a bound per client means nothing; what tells a flood from an agent is use: an agent
initializes, says so, lists the tools and calls them; a flood's sessions are opened and left.

So when the table is full, the session that is ended is, among those with no request in flight (a
call being answered, an open event stream), first one that served nothing past its opening
(``initialize`` and the ``initialized`` notification: ``OPENING`` requests), then the one idle
longest: the least recently used, as one expects of a bounded table. A flood ends its own
sessions first, and of the sessions in use the one left longest goes. (Session 27 ranked by the
requests served, fewest first: an agent's session used a minute ago was ended before one used a
hundred times and left for half an hour.) It is ended as the idle timeout ends one (its
``idle_scope`` cancelled): its id answers ``404`` from then on, and an MCP client opens a new
session on a ``404`` (the spec says it must). Only when every session has a request in flight is a
new one refused, by the SDK, as before. One ``WARNING`` line at most once a minute says sessions
were ended this way.

This reaches into the SDK's session manager (``_admit_session``, ``_server_instances``,
``_session_owners``: mcp 2.2 to 2.3), which has no public way to choose what is ended; when they
are missing the SDK's own behaviour (refusal) stays, and the tests of this rule fail.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any
from weakref import WeakKeyDictionary

from coffer_memory._http_conns import STREAM_RANK, OnceAMinute

log = logging.getLogger("coffer_memory_mcp")
OPENING = 2
"""The requests of a session's opening (``initialize``, then the ``initialized`` notification): a
session that served no more was opened and never used."""


class SessionRoom:
    """Installed on the SDK's ``StreamableHTTPSessionManager`` (``install``): counts the requests
    each session serves and, when the table is full, ends an idle session (one never used, else the
    least recently used) to make room for a new one (this module's docstring)."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.requests: WeakKeyDictionary[Any, int] = WeakKeyDictionary()  # per transport
        self.ended = OnceAMinute()

    @classmethod
    def install(cls, manager: Any) -> SessionRoom | None:
        """Make room in ``manager`` this way; None (the SDK's refusal stays) when its parts differ."""
        if not all(
            hasattr(manager, name) for name in ("_admit_session", "_server_instances", "max_sessions")
        ):
            return None
        room = cls(manager)
        admit = manager._admit_session

        def admitting(requestor: Any) -> Any:
            room.make_room()
            transport = admit(requestor)
            if transport is not None:
                room.count(transport)
            return transport

        manager._admit_session = admitting
        return room

    def stream_rank(self, session_id: str, opened: float) -> tuple[bool, float]:
        """The rank of an event stream of ``session_id`` opened at ``opened`` (lowest first given up
        at the connection bound): a session never used past its opening first, then the stream
        open longest. Not the requests served: a client that pinged each of its sessions a few
        times outranked every agent, and held its streams for ever while the agents' were closed
        at each new connection; a count buys nothing now, and streams take turns."""
        transport = self.manager._server_instances.get(session_id)
        return (transport is not None and self.requests.get(transport, 0) > OPENING, opened)

    def count(self, transport: Any) -> None:
        """Count the requests ``transport`` (a new session's) serves, the opening one included."""
        self.requests[transport] = 0
        handle = transport.handle_request

        async def counted(scope: Any, receive: Any, send: Any) -> None:
            self.requests[transport] = self.requests.get(transport, 0) + 1
            await handle(scope, receive, send)

        transport.handle_request = counted

    def make_room(self) -> None:
        """End an idle session when the table is full: one opened and never used, else the one idle
        longest (none idle: the SDK then refuses the new one)."""
        most = self.manager.max_sessions
        sessions: dict[str, Any] = self.manager._server_instances
        if most is None or len(sessions) < most:
            return
        chosen: tuple[tuple[bool, float], str, Any] | None = None
        for session_id, transport in sessions.items():
            idle = getattr(transport, "idle_scope", None)
            # A request in flight holds the deadline at infinity; a cancelled scope is ending.
            if idle is None or idle.cancel_called or idle.deadline == math.inf:
                continue
            # Opened and never used first, then the least recently used (the earliest deadline).
            rank = (self.requests.get(transport, 0) > OPENING, idle.deadline)
            if chosen is None or rank < chosen[0]:
                chosen = (rank, session_id, transport)
        if chosen is None:
            return
        _, session_id, transport = chosen
        # Forgotten at once (its id answers 404, its place is free); its server task ends as on
        # the idle timeout, and the SDK terminates the transport then.
        sessions.pop(session_id, None)
        getattr(self.manager, "_session_owners", {}).pop(session_id, None)
        transport.idle_scope.cancel()
        self._said()

    def _said(self) -> None:
        count = self.ended.due()
        if count is None:
            return
        log.warning(
            "%d MCP sessions are open, its --max-sessions: ended an idle session (one never used "
            "past its opening, else the one idle longest) to open a new one (%d since this was "
            "last said, at most once a minute)",
            self.manager.max_sessions,
            count,
        )


class MarkStreams:
    """ASGI middleware, outermost: marks a ``GET`` of a session (its event stream, open without end)
    with its rank (``STREAM_RANK``), so that at the connection bound the stream of a session never
    used, else the stream open longest, gives its connection to a new one (``coffer_memory._http_conns``). A stream is a
    request in flight, never idle: one client's silent streams held every connection, and the
    agents' POSTs were ``503 TOO_MANY_CONNECTIONS``."""

    def __init__(self, app: Any, room: SessionRoom | None) -> None:
        self.app = app
        self.room = room

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Mark a session's GET, pass every request on."""
        if scope["type"] == "http" and scope["method"] == "GET" and self.room is not None:
            session = next((v for k, v in scope["headers"] if k == b"mcp-session-id"), None)
            if session is not None:
                room, session_id, opened = self.room, session.decode("latin-1"), time.monotonic()
                scope[STREAM_RANK] = lambda: room.stream_rank(session_id, opened)
        await self.app(scope, receive, send)
