"""``coffer-api --workers N`` shares connections out: ``balance.Tally`` and ``accept_in_turn`` on a
real event loop and a real listening socket (the end-to-end split is in test_rest_workers.py)."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from coffer_memory_fastapi import balance
from coffer_memory_fastapi.balance import Tally, accept_in_turn

STUCK = 30.0  # a bound on a loaded machine, not an assertion about speed


class Counting(asyncio.Protocol):
    """Counts the connections the loop accepted."""

    made: ClassVar[list[asyncio.BaseTransport]] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        Counting.made.append(transport)


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    Counting.made = []
    loop = asyncio.SelectorEventLoop()
    yield loop
    for transport in Counting.made:
        transport.close()
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()


def serve(loop: asyncio.AbstractEventLoop) -> tuple[asyncio.Server, tuple[str, int]]:
    server = loop.run_until_complete(loop.create_server(Counting, "127.0.0.1", 0))
    return server, server.sockets[0].getsockname()[:2]


def run_until(loop: asyncio.AbstractEventLoop, accepted: int) -> None:
    """Run ``loop`` until it has accepted ``accepted`` connections (or fail after STUCK)."""
    deadline = time.monotonic() + STUCK
    while len(Counting.made) < accepted:
        assert time.monotonic() < deadline, f"accepted {len(Counting.made)} of {accepted}"
        loop.run_until_complete(asyncio.sleep(0.005))


def test_excess_counts_only_live_siblings_and_a_closed_tally_leaves(tmp_path: Path) -> None:
    def alive(pid: int) -> bool:
        return pid in (1, 2)

    mine = Tally(tmp_path, name="1", alive=alive)
    assert mine.excess() == 0  # no sibling
    sibling = Tally(tmp_path, name="2", alive=alive)
    dead = Tally(tmp_path, name="3", alive=alive)
    for _ in range(3):
        mine.opened()
    sibling.opened()
    assert mine.excess() == 2  # 3 against the live sibling's 1; the dead one's 0 is not counted
    sibling.opened()
    sibling.opened()
    mine.closed()
    assert mine.excess() == 0 and sibling.excess() == 1
    assert (tmp_path / "2").read_bytes().strip() == b"3"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1", "2"]  # the dead one's file went
    dead.close()  # (a worker closing its own tally, as at the end of a test)
    mine.close()
    sibling.close()


def test_a_worker_holding_more_than_a_sibling_leaves_it_the_next_connection(
    tmp_path: Path, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(balance, "MOST_S", STUCK)  # a sibling is never given up on in this test
    mine = Tally(tmp_path, name="1", alive=lambda pid: True)
    sibling = Tally(tmp_path, name="2", alive=lambda pid: True)
    mine.opened()
    assert accept_in_turn(loop, mine)
    server, address = serve(loop)
    with socket.create_connection(address):
        loop.run_until_complete(asyncio.sleep(0.05))
        assert Counting.made == []  # left waiting for the sibling, which holds fewer
        sibling.opened()  # the sibling took another one: now this worker is not ahead
        run_until(loop, 1)
    server.close()
    mine.close()
    sibling.close()


def test_a_sibling_that_takes_nothing_holds_a_connection_up_only_so_long(
    tmp_path: Path, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(balance, "MOST_S", 0.01)
    mine = Tally(tmp_path, name="1", alive=lambda pid: True)
    sibling = Tally(tmp_path, name="2", alive=lambda pid: True)
    mine.opened()
    accept_in_turn(loop, mine)
    server, address = serve(loop)
    with socket.create_connection(address):
        run_until(loop, 1)
    server.close()
    mine.close()
    sibling.close()


def test_connections_arriving_together_are_taken_one_per_turn_and_all_of_them(
    tmp_path: Path, loop: asyncio.AbstractEventLoop
) -> None:
    mine = Tally(tmp_path, name=str(os.getpid()))
    accept_in_turn(loop, mine)
    server, address = serve(loop)
    clients = [socket.create_connection(address) for _ in range(3)]
    loop.run_until_complete(asyncio.sleep(0))  # one turn: asyncio alone takes all three in it
    assert len(Counting.made) == 1
    run_until(loop, 3)
    for client in clients:
        client.close()
    server.close()
    mine.close()


def test_a_loop_that_cannot_take_turns_is_left_as_it_is(tmp_path: Path) -> None:
    class Other(asyncio.AbstractEventLoop):
        pass

    assert not accept_in_turn(Other(), Tally(tmp_path))
