"""``reply(SHAPE, obj)``: a route's JSON answer, serialised once from the core's value object.

A route that returns a Pydantic model makes FastAPI validate it again against ``response_model``,
dump it to a dict and encode that with the standard ``json`` module; the core already validated
what it built, so routes over core types answer ``reply(SHAPE, obj)`` (``SHAPE.dump`` + one
``pydantic_core.to_json``, the same encoding as a model's) and keep declaring
``response_model=SHAPE.model``, which documents the response in the OpenAPI document.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic_core
from fastapi import Response

from coffer_memory import JsonShape


class JsonReply(Response):
    """A JSON response whose content is encoded by pydantic-core (datetimes as models write them)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        """The content as UTF-8 JSON."""
        return pydantic_core.to_json(content)


def reply(
    shape: JsonShape,
    obj: Any,
    *,
    status_code: int = 200,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> JsonReply:
    """``obj`` in ``shape`` as the response (``extra``: the shape's face-only fields)."""
    return JsonReply(shape.dump(obj, **extra), status_code=status_code, headers=headers)
