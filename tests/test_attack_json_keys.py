"""A JSON body naming one key twice (review28, session 28).

``{"text": "a", "text": "b"}`` was taken as its last value, silently: a proxy, a log or a
reviewer reading the first saw another request than the one that was served. The same key
spelled with an escape (``"\\u0074ext"``) is the same key. Each is now ``422 INVALID_INPUT`` and
nothing is written; checked against ``coffer-api`` on 127.0.0.1.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from served import Served

FACTS = "/api/v1/memory_stores/global/facts"
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def api(tmp_home: Path) -> Iterator[httpx.Client]:
    exe = Path(sys.executable).parent / "coffer-api"
    with (
        Served([str(exe), "--log-level", "warning"], {**os.environ, "COFFER_HOME": str(tmp_home)}) as server,
        httpx.Client(base_url=server.base, timeout=60) as client,
    ):
        yield client


def facts_on_disk(home: Path) -> list[Path]:
    return sorted((home / "memory").rglob("*.md")) if (home / "memory").exists() else []


@pytest.mark.parametrize(
    "body",
    [
        b'{"text": "shown first", "text": "served last"}',
        b'{"text": "shown first", "\\u0074ext": "served last"}',
        b'{"text": "a note", "tags": ["x"], "tags": ["y"]}',
    ],
)
def test_a_key_named_twice_is_refused_and_nothing_is_written(
    api: httpx.Client, tmp_home: Path, body: bytes
) -> None:
    r = api.post(FACTS, content=body, headers=JSON)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "INVALID_INPUT" and "twice" in error["message"], error
    assert facts_on_disk(tmp_home) == []


def test_a_key_named_twice_in_a_nested_object_is_refused(api: httpx.Client, tmp_home: Path) -> None:
    r = api.patch(
        "/api/v1/memory_stores/global/config",
        content=b'{"max_fact_chars": 100, "nested": {"a": 1, "a": 2}}',
        headers=JSON,
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "INVALID_INPUT", r.text
    assert "twice" in r.json()["error"]["message"]


def test_the_same_name_in_two_objects_is_no_duplicate(api: httpx.Client, tmp_home: Path) -> None:
    r = api.post(FACTS, json={"text": "one object", "tags": ["text", "t"]})
    assert r.status_code == 201, r.text
    assert len(facts_on_disk(tmp_home)) == 1
