"""What the REST guard repeats of a refused request (attack6, session 14): a Host, an Origin, a
Content-Type or a path is echoed bounded, with no terminal escape in it. Header values may carry
bytes 0x80-0xff (HTTP's obs-text): decoded as latin-1, 0x9b is the one-byte CSI that starts a
terminal escape, and a refused Content-Type came back whole, raw, twice."""

from __future__ import annotations

from typing import Any

CSI = "\x9b"
API = "/api/v1/memory_stores"


def assert_clean(body: bytes) -> None:
    text = body.decode("utf-8")
    assert len(body) < 1500, len(body)
    assert CSI not in text and "\x1b" not in text and "\\u001b" not in text


def test_a_refused_host_or_origin_is_echoed_bounded_and_clean(client: Any) -> None:
    r = client.get(API, headers={"Host": b"evil\x9b2J" + b"a" * 8000})
    assert r.status_code == 421
    assert_clean(r.content)
    r = client.get(API, headers={"Origin": b"http://x\x9b2J" + b"a" * 8000})
    assert r.status_code == 403
    assert_clean(r.content)


def test_a_refused_content_type_is_echoed_bounded_and_clean(client: Any) -> None:
    r = client.post(
        f"{API}/global/facts", headers={"Content-Type": b"text/\x9b2J" + b"a" * 8000}, content=b"{}"
    )
    assert r.status_code == 415
    assert_clean(r.content)


def test_a_refused_path_is_echoed_bounded_and_clean(client: Any) -> None:
    r = client.delete(f"{API}/global/facts/%1b%5b2J%c2%9b" + "a" * 8000 + "/")
    assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND"
    assert_clean(r.content)
