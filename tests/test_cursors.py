"""Pagination cursors that cannot lie: signed per home, bound to query, store and store version."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest

from coffer_memory import InvalidCursor, MemoryService
from coffer_memory._home import HomeLayout


def _fill(svc: MemoryService, n: int = 3) -> str:
    for i in range(n):
        svc.remember(f"fact number {i}", title=f"fact {i}", scope="global")
    cursor = svc.list_facts(store="global", limit=1).next_cursor
    assert cursor
    return cursor


def test_the_key_is_a_0600_file_under_the_home(svc: MemoryService) -> None:
    _fill(svc)
    key = HomeLayout(svc.home).cursor_key
    assert key.is_file() and stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 32


def test_a_cursor_pages_while_nothing_changes(svc: MemoryService) -> None:
    cursor = _fill(svc)
    second = svc.list_facts(store="global", limit=1, cursor=cursor)
    assert [r.fact.title for r in second.items] == ["fact 1"]


def test_a_cursor_from_before_a_change_is_stale(svc: MemoryService) -> None:
    cursor = _fill(svc)
    svc.remember("a later fact", scope="global")
    with pytest.raises(InvalidCursor) as err:
        svc.list_facts(store="global", limit=1, cursor=cursor)
    assert err.value.code == "INVALID_CURSOR" and err.value.reason == "stale"


def test_a_cursor_from_before_a_delete_is_stale(svc: MemoryService) -> None:
    cursor = _fill(svc)
    victim = svc.list_facts(store="global", limit=1).items[0]
    svc.delete_fact(victim.fact.id, store="global")
    with pytest.raises(InvalidCursor, match="changed"):
        svc.list_facts(store="global", limit=1, cursor=cursor)


def test_a_hand_made_cursor_is_forged(svc: MemoryService) -> None:
    cursor = _fill(svc)
    payload, mac = cursor.split(".")
    data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    data["p"][0] = "9999-01-01T00:00:00+00:00"
    forged = base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")
    for bad in (f"{forged}.{mac}", "not-a-cursor", "e30", "a.b"):
        with pytest.raises(InvalidCursor):
            svc.list_facts(store="global", limit=1, cursor=bad)


def test_a_cursor_of_another_home_is_forged(svc: MemoryService, tmp_path: Path) -> None:
    with MemoryService(tmp_path / "other") as other:
        cursor = _fill(other)
    _fill(svc)
    with pytest.raises(InvalidCursor) as err:
        svc.list_facts(store="global", limit=1, cursor=cursor)
    assert err.value.reason == "forged"


def test_a_cursor_of_another_store_is_refused(svc: MemoryService, repo: Path) -> None:
    cursor = _fill(svc)
    svc.remember("project fact", cwd=repo)
    with pytest.raises(InvalidCursor) as err:
        svc.list_facts(cwd=repo, limit=1, cursor=cursor)
    assert err.value.reason == "other_query"


def test_every_write_transaction_advances_the_version(svc: MemoryService) -> None:
    before = svc.writer.version("global")
    svc.remember("one", scope="global")
    assert svc.writer.version("global") == before + 1
    svc.clear(store="global")
    assert svc.writer.version("global") == before + 2


def test_threads_making_the_key_at_once_agree_on_one(tmp_path: Path) -> None:
    """Threads of one process racing to create the key: one wins, all read its key, none fails
    (they used to share one temp name, so one unlinked it while another linked it into place)."""
    import threading

    from coffer_memory._cursor import cursor_key

    for attempt in range(20):
        home = tmp_path / f"home-{attempt}"
        home.mkdir()
        start = threading.Barrier(8)
        keys: list[bytes] = []
        errors: list[BaseException] = []

        def make(
            home: Path, start: threading.Barrier, keys: list[bytes], errors: list[BaseException]
        ) -> None:
            try:
                start.wait(30)
                keys.append(cursor_key(home))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=make, args=(home, start, keys, errors)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors, errors
        assert len(set(keys)) == 1 and len(keys) == 8
        assert [p.name for p in home.iterdir()] == ["cursor.key"]  # no temp file left behind
