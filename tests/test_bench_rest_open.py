"""The open-loop load generator of the REST benches (``bench/rest_open.py``) against a real
loopback server: its schedule, and latency counted from each request's intended start."""

from __future__ import annotations

import itertools
import random
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from rest_open import figures, open_loop, schedule

SLOW_S = 0.02  # what the slow server sleeps before each answer


def _serve(listener: socket.socket, delay: float) -> None:
    """Answer every request on every connection with a small JSON body after ``delay`` seconds."""

    def one(conn: socket.socket) -> None:
        with conn:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                _, _, buf = buf.partition(b"\r\n\r\n")
                time.sleep(delay)
                body = b'{"hits":[]}'
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=one, args=(conn,), daemon=True).start()


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[str]:
    listener = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=_serve, args=(listener, request.param), daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def test_uniform_schedules_are_evenly_spaced_from_a_phase_within_one_interval() -> None:
    times = schedule(5, 0.01, "uniform", random.Random(1))
    assert 0 <= times[0] < 0.01
    assert [round(b - a, 9) for a, b in itertools.pairwise(times)] == [0.01] * 4


def test_poisson_schedules_rise_and_unknown_arrivals_are_refused() -> None:
    times = schedule(50, 0.01, "poisson", random.Random(1))
    assert times == sorted(times) and times[0] > 0
    with pytest.raises(ValueError, match="arrivals"):
        schedule(5, 0.01, "bursty", random.Random(1))


@pytest.mark.parametrize("server", [0.0], indirect=True)
def test_every_request_is_answered_and_its_latency_is_its_wait_plus_its_service(server: str) -> None:
    params = [{"query": f"q{i}"} for i in range(40)]
    out = open_loop(server, params, rate=400, concurrency=4)
    assert len(out["latency"]) == len(out["service"]) == len(out["behind"]) == 40
    assert out["non_200"] == 0
    assert all(b >= 0 for b in out["behind"])
    for lat, service, behind in zip(out["latency"], out["service"], out["behind"], strict=True):
        assert lat == pytest.approx(service + behind, abs=1e-4)
    fig = figures(out, 400)
    assert fig["n"] == 40 and fig["offered"] == 400


@pytest.mark.parametrize("server", [SLOW_S], indirect=True)
def test_a_server_slower_than_the_schedule_is_charged_the_wait(server: str) -> None:
    # One client, a request due every 1 ms, a server taking 20 ms each: the k-th request cannot be
    # sent before k answers came, so it is at least k * 19 ms behind its intended start, and a
    # closed-loop figure (send to answer) would hide all of it.
    out = open_loop(server, [{"query": "q"}] * 10, rate=1000, concurrency=1, timeline=True)
    behind = [b for _, _, b in sorted(out["timeline"])]
    for k, late in enumerate(behind):
        assert late >= k * (SLOW_S - 0.001)
    assert max(out["latency"]) >= 9 * (SLOW_S - 0.001) + SLOW_S
    assert not out["late_free"][1:]  # only the first send found its client free
