"""Open-loop load for the REST benches: requests sent on a schedule, latency from when each was due.

A closed loop (``bench/rest.py``'s clients: each sends its next request when the last answer
came) cannot state "p50 at 500 req/s": with ``c`` clients and no think time, Little's law ties
its throughput and latency, mean latency = ``c`` / throughput, so 4 clients at p50 <= 5 ms need
about 800 req/s, and a server that answers slower is simply offered less. Here the load is fixed
instead (wrk2's method): ``rate`` requests/s in total, split over ``concurrency`` clients, each a
keep-alive connection with its own schedule of intended start times:

- ``uniform``: evenly spaced, ``concurrency / rate`` seconds apart, from a random phase in the
  first interval (the clients' phases drawn independently, so they sometimes coincide);
- ``poisson``: exponential gaps of that mean (independent clients, as agents are).

Each request's latency is measured from its **intended** start, not its actual send: a client
whose previous answer is late sends at once when it comes, and the wait counts (no coordinated
omission). How far behind schedule the clients fell (send time - intended start) is reported
too, and of it the lateness of sends that found their client free (the client's own timer: what
this load generator adds by itself).

One thread runs every client (``select`` with microsecond timeouts, prebuilt request bytes,
answers read by Content-Length), so the client takes no GIL hand-overs and little CPU; it shares
the machine's cores with the server, so its CPU per request is printed beside the server's.
"""

from __future__ import annotations

import random
import re
import select
import socket
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from _common import ms, percentile, summary

CONTENT_LENGTH = re.compile(rb"(?im)^content-length:\s*(\d+)")
ARRIVALS = ("uniform", "poisson")


def schedule(count: int, interval: float, arrivals: str, r: random.Random) -> list[float]:
    """``count`` intended start times (s from the run's start) ``interval`` apart on average."""
    if arrivals == "uniform":
        phase = r.random() * interval
        return [phase + k * interval for k in range(count)]
    if arrivals != "poisson":
        raise ValueError(f"arrivals must be one of {ARRIVALS}, not {arrivals!r}")
    times, t = [], 0.0
    for _ in range(count):
        t += r.expovariate(1.0 / interval)
        times.append(t)
    return times


class _Client:
    """One keep-alive connection, its requests and their times (perf_counter seconds)."""

    def __init__(self, sock: socket.socket, requests: list[bytes], due: list[float]) -> None:
        self.sock = sock
        self.requests = requests
        self.due = due
        self.sent: list[float] = []
        self.done: list[float] = []
        self.free: list[bool] = []  # the previous answer had come before this request was due
        self.bad = 0
        self.buf = b""
        self.busy = False

    def send_due(self, now: float) -> float | None:
        """Send the next request if it is due and the connection is free; when the next is due."""
        k = len(self.sent)
        if self.busy or k == len(self.requests):
            return None
        if self.due[k] > now:
            return self.due[k]
        self.free.append(not self.done or self.done[-1] <= self.due[k])
        self.sent.append(time.perf_counter())
        self.sock.sendall(self.requests[k])
        self.busy = True
        return None

    def receive(self) -> bool:
        """Read what arrived; True once the answer in flight is complete."""
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the server closed a keep-alive connection")
        self.buf += data
        head, found, body = self.buf.partition(b"\r\n\r\n")
        if not found:
            return False
        length = CONTENT_LENGTH.search(head)
        size = int(length.group(1)) if length else 0
        if len(body) < size:
            return False
        self.done.append(time.perf_counter())
        self.bad += head[9:12] != b"200"
        self.buf = body[size:]
        self.busy = False
        return True


def request_bytes(host: str, port: str, params: dict[str, Any]) -> bytes:
    """One recall request as sent on the wire."""
    return (
        f"GET /api/v1/memory_stores/recall?{urlencode(params)} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n"
    ).encode()


def open_loop(
    base: str,
    params: list[dict[str, Any]],
    rate: float,
    concurrency: int,
    arrivals: str = "uniform",
    seed: int = 0,
    timeline: bool = False,
    connected: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Send one request per ``params`` at ``rate`` requests/s in total from ``concurrency`` clients;
    the times of each (lists of seconds: ``latency`` from the intended start, ``service`` from the
    send, ``behind`` send - intended, ``late_free`` behind for sends that found their client
    free), ``wall`` (first intended start to last answer), ``non_200``; with ``timeline`` also
    each request's (intended start, latency, behind) in seconds from the run's start; with
    ``connected``, what it answers once every client is connected (before the first send)."""
    host, _, port = base.removeprefix("http://").partition(":")
    r = random.Random(seed)
    interval = concurrency / rate
    clients = []
    for i in range(concurrency):
        mine = params[i::concurrency]
        sock = socket.create_connection((host, int(port)), timeout=30)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        due = schedule(len(mine), interval, arrivals, r)
        clients.append(_Client(sock, [request_bytes(host, port, p) for p in mine], due))
    # Every client's first request, so that each connection is accepted by a server process.
    for c in clients:
        c.sock.sendall(request_bytes(host, port, params[0]))
    for c in clients:
        while not c.receive():
            pass
        c.done.clear()
    seen = connected() if connected is not None else None
    start = time.perf_counter() + 0.01
    for c in clients:
        c.due = [start + t for t in c.due]
    by_sock = {c.sock: c for c in clients}
    left = len(params)
    try:
        while left:
            now = time.perf_counter()
            wake = [t for c in clients if (t := c.send_due(now)) is not None]
            busy = [c.sock for c in clients if c.busy]
            timeout = max(0.0, min(wake) - time.perf_counter()) if wake else None
            if not busy:
                if timeout:
                    time.sleep(timeout)
                continue
            for sock in select.select(busy, [], [], timeout)[0]:
                left -= by_sock[sock].receive()
    finally:
        for c in clients:
            c.sock.close()
    out: dict[str, Any] = {"latency": [], "service": [], "behind": [], "late_free": [], "non_200": 0}
    for c in clients:
        out["latency"] += [d - i for d, i in zip(c.done, c.due, strict=True)]
        out["service"] += [d - s for d, s in zip(c.done, c.sent, strict=True)]
        out["behind"] += [s - i for s, i in zip(c.sent, c.due, strict=True)]
        out["late_free"] += [s - i for s, i, f in zip(c.sent, c.due, c.free, strict=True) if f]
        out["non_200"] += c.bad
    out["wall"] = max(c.done[-1] for c in clients) - start
    out["connected"] = seen
    if timeline:  # (intended start from the run's start, latency, behind) of every request
        out["timeline"] = [
            (i - start, d - i, s - i) for c in clients for i, s, d in zip(c.due, c.sent, c.done, strict=True)
        ]
    return out


def figures(result: dict[str, Any], rate: float) -> dict[str, Any]:
    """The printed figures of one open-loop load (ms; ``rps`` the achieved rate)."""

    def pct(key: str, p: float) -> float:
        return ms(percentile(result[key], p))

    n = len(result["latency"])
    return {
        **summary([ms(x) for x in result["latency"]]),
        "offered": rate,
        "rps": n / result["wall"],
        "non_200": result["non_200"],
        "wall_s": result["wall"],
        "service_p50": pct("service", 50),
        "service_p99": pct("service", 99),
        "behind_p50": pct("behind", 50),
        "behind_p99": pct("behind", 99),
        "behind_max": ms(max(result["behind"])),
        "late_free_p99": pct("late_free", 99),
        "free_share": len(result["late_free"]) / n,
        "split": result.get("connected") or "",
    }
