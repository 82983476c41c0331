"""Opaque pagination cursors bound to the query that made them."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any

from .errors import InvalidInput

VERSION = 1


def encode_cursor(query: Sequence[str], position: Sequence[Any]) -> str:
    """A URL-safe token for ``position`` (the last row's sort keys) within ``query``."""
    raw = json.dumps({"v": VERSION, "q": list(query), "p": list(position)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, query: Sequence[str]) -> list[Any]:
    """The position inside ``cursor``; InvalidInput if malformed or made by another query or store."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("v") != VERSION or not isinstance(data.get("p"), list):
            raise ValueError("bad cursor")
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidInput("cursor is malformed", field="cursor") from exc
    if data.get("q") != list(query):
        raise InvalidInput("cursor belongs to another query or store", field="cursor")
    position: list[Any] = data["p"]
    return position
