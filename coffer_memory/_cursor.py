"""Opaque pagination cursors that cannot lie.

A cursor is ``<payload>.<mac>``: the payload (base64url JSON) holds the position (the last row's
sort keys), the query it belongs to, the store and the store's version; the mac is an HMAC-SHA256
over the payload with a per-home key (``HomeLayout.cursor_key``, a 0600 file made on first use).
Decoding checks all four, so a hand-made cursor, one from another query or store, and one from
before the store changed (every Writer transaction advances the version) is ``InvalidCursor``,
never a silent restart from the first page.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._errors import InvalidCursor
from ._home import HomeLayout

VERSION = 2
_KEY_BYTES = 32
_MAC_BYTES = 16  # 128 bits: forging one is as hard as guessing the key


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def cursor_key(home: Path) -> bytes:
    """The home's cursor-signing key, made (0600, exclusive create) on first use."""
    path = HomeLayout(home).cursor_key
    try:
        with open(path, "rb") as fh:
            key = fh.read()
        if len(key) == _KEY_BYTES:
            return key
    except FileNotFoundError:
        pass
    key = secrets.token_bytes(_KEY_BYTES)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A temp name of its own per call (mkstemp, 0600): threads of one process must not share one,
    # or one unlinks it while another is linking it into place.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # first writer wins; a concurrent second one reads the winner's key
    except FileExistsError:
        return cursor_key(home)
    finally:
        os.unlink(tmp)
    return key


def _mac(key: bytes, payload: str) -> str:
    return _b64(hmac.new(key, payload.encode(), hashlib.sha256).digest()[:_MAC_BYTES])


def encode_cursor(home: Path, query: Sequence[Any], store: str, version: int, position: Sequence[Any]) -> str:
    """A signed, URL-safe token for ``position`` within ``query`` on ``store`` at ``version``."""
    raw = json.dumps(
        {"v": VERSION, "q": list(query), "s": store, "n": version, "p": list(position)},
        separators=(",", ":"),
        ensure_ascii=True,
    )
    payload = _b64(raw.encode())
    return f"{payload}.{_mac(cursor_key(home), payload)}"


def decode_cursor(home: Path, cursor: str, query: Sequence[Any], store: str, version: int) -> list[Any]:
    """The position inside ``cursor``; ``InvalidCursor`` unless it is ours, for this query, store and version."""
    if not isinstance(cursor, str) or cursor.count(".") != 1:
        raise InvalidCursor("malformed", "cursor is malformed")
    payload, mac = cursor.split(".")
    if not hmac.compare_digest(mac, _mac(cursor_key(home), payload)):
        raise InvalidCursor("forged", "cursor was not made by this coffer home")
    try:
        data = json.loads(_unb64(payload))
        if not isinstance(data, dict) or data.get("v") != VERSION or not isinstance(data.get("p"), list):
            raise ValueError("bad cursor")
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidCursor("malformed", "cursor is malformed") from exc
    if data.get("q") != json.loads(json.dumps(list(query))) or data.get("s") != store:
        raise InvalidCursor("other_query", "cursor belongs to another query or store")
    if data.get("n") != version:
        raise InvalidCursor(
            "stale", "the store changed since this cursor was made; start from the first page"
        )
    position: list[Any] = data["p"]
    return position
