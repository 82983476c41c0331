"""Lines on ``coffer-mcp``'s stdio that the SDK would drop without a word, answered as JSON-RPC 2.0 asks.

- A batch (a JSON array): the SDK's parser refuses it, and the server logs the line and answers
  nothing, so a client that sent ``[{"id": 1, ...}, {"id": 2, ...}]`` waited for ever. MCP has no
  batches since protocol 2025-06-18, so each request in it gets an Invalid Request error under its
  own id, all in one array (a batch's answer); an empty array gets one error with id null.
- A request whose id is no string or integer (an object, a fraction, null, true, an integer of
  more digits than Python converts): the SDK's parser reads it as a notification, which is never
  answered. It gets Invalid Request with id null (JSON-RPC 2.0: the id could not be read). So does
  a string id holding a lone surrogate (``"\\ud800"``): the SDK refuses the line, and the answer
  under that id could not be written (the SDK's writer raised, and coffer-mcp died).

- A line that is not JSON (cut short, a log line, a typo): the SDK logged it and answered nothing.
  It gets Parse error (-32700) with id null, as JSON-RPC 2.0 asks. MCP allows it: its stdio
  transport only forbids the client to send such a line, and an error response may go without the
  request's id "where the ID could not be read due to a malformed request" (protocol 2025-11-25;
  the SDK's own HTTP transport answers a body that is not JSON the same way). A line of JSON that
  is no object or array (``42``, ``"ping"``) is no request: Invalid Request with id null.

- A message naming one key twice in one object (``{"text": "a", "text": "b"}``, the envelope's
  ``"method"`` too): the SDK's parser (pydantic) kept the last value, where a log or a proxy that
  keeps the first read another request than the one served; ``coffer-mcp`` over HTTP and
  ``coffer-api`` refuse it. It gets ``INVALID_INPUT`` (-32602, ``KeyNamedTwice``'s words) under
  its id, read by the last value as the SDK would; a notification naming a key twice (no id, no
  one to answer) is dropped, not acted on.

An empty (or blank) line carries no message and is passed on (the SDK ignores it, as before). A line
nested deeper than Python's parser follows passes on unchanged: it is JSON, and the SDK may read it
(``cli.answer_to_refused`` answers what the SDK refuses).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from coffer_memory import KeyNamedTwice, keys_once_each

__all__ = ["Screened", "named_twice", "notification_named_twice", "screen"]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
BATCH = (
    "JSON-RPC batches are not supported (MCP has none since protocol 2025-06-18): "
    "send each request as its own line"
)
EMPTY_BATCH = "an empty batch (a JSON array with nothing in it) is not a request"
BAD_ID = "the request id must be a string or an integer (not null, a fraction, a boolean or an object)"
HUGE_ID = f"the request id is a number of more than {sys.get_int_max_str_digits()} digits"
SURROGATE_ID = "the request id holds a lone surrogate, which is not a character"
NOT_JSON = "Parse error: the line is not JSON (each line must be one JSON-RPC message)"
NOT_A_REQUEST = "the line is JSON but no JSON-RPC message (an object, one a line)"


class _Huge:
    """An integer of more digits than ``int()`` converts (``json.loads`` would raise)."""


def _int(digits: str) -> int | _Huge:
    try:
        return int(digits)
    except ValueError:
        return _Huge()


def _error(request_id: int | str | None, message: str, code: int = INVALID_REQUEST) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _readable_id(value: Any) -> bool:
    if isinstance(value, str):
        return _encodable(value)
    return isinstance(value, int) and not isinstance(value, bool)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def _odd_request(message: Any) -> dict[str, Any] | None:
    """The error for a request (it has a method and an id) whose id no client could match."""
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    request_id = message["id"]
    if _readable_id(request_id):
        return None
    if isinstance(request_id, str):
        return _error(None, SURROGATE_ID)
    return _error(None, HUGE_ID if isinstance(request_id, _Huge) else BAD_ID)


def _batch(messages: list[Any]) -> Any:
    if not messages:
        return _error(None, EMPTY_BATCH)
    answers = []
    for message in messages:
        if not isinstance(message, dict):
            answers.append(_error(None, BATCH))
        elif "id" in message:
            answers.append(_error(message["id"] if _readable_id(message["id"]) else None, BATCH))
        # A notification in a batch: no answer (JSON-RPC 2.0), and it is not run either.
    return answers or None


def named_twice(text: str | bytes, twice: KeyNamedTwice) -> dict[str, Any] | None:
    """``INVALID_INPUT`` for a message naming a key twice in one object (``twice``, raised by
    ``keys_once_each``), under the message's id as the SDK reads it (the last value; null when no
    client could match it); None for a notification (no id: there is no one to answer) or what is
    no single message (a batch). Over HTTP too (``cli.answer_over_http``)."""
    try:
        message = json.loads(text, parse_int=_int)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "id" not in message:
        return None
    request_id = message["id"] if _readable_id(message["id"]) else None
    return _error(request_id, f"{twice.code}: {twice.message}", INVALID_PARAMS)


def notification_named_twice(text: str | bytes, twice: KeyNamedTwice) -> dict[str, Any] | None:
    """``INVALID_INPUT`` with a null id for a notification (one message with no ``id``) naming a
    key twice (``twice``); None for anything else. Over stdio such a line is dropped (no one to
    answer); over HTTP the transport's rule for a notification the server cannot accept is an HTTP
    error status whose body MAY be a JSON-RPC error with no id (``cli.answer_over_http``)."""
    try:
        message = json.loads(text, parse_int=_int)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "id" in message:
        return None
    return _error(None, f"{twice.code}: {twice.message}", INVALID_PARAMS)


DROPPED = ""
"""What ``screen`` says of a line neither answered nor passed on (a notification naming a key twice)."""


def screen(line: str) -> str | None:
    """The answer (one line, newline included) to ``line`` when the SDK would drop it unanswered
    or read it otherwise than a client meant (a key named twice); ``DROPPED`` (empty) for a line
    to drop without an answer; None when the line should go on to the SDK."""
    if not line.strip():
        return None
    try:
        message = json.loads(line, parse_int=_int, object_pairs_hook=keys_once_each)
    except KeyNamedTwice as twice:
        message = _whole(line)
        answer: Any = (
            _error(None, NOT_JSON, PARSE_ERROR)
            if message is _NOT_JSON
            else _batch(message)
            if isinstance(message, list)
            else named_twice(line, twice)
        )
        if answer is None:
            return DROPPED
    except RecursionError:
        return None
    except ValueError:
        answer = _error(None, NOT_JSON, PARSE_ERROR)
    else:
        if isinstance(message, list):
            answer = _batch(message)
        elif isinstance(message, dict):
            answer = _odd_request(message)
        else:
            answer = _error(None, NOT_A_REQUEST)
    if answer is None:
        return None
    return json.dumps(answer, separators=(",", ":")) + "\n"


_NOT_JSON = object()


def _whole(line: str) -> Any:
    """``line`` parsed as the SDK reads it (a repeated key by its last value), or ``_NOT_JSON``:
    ``keys_once_each`` stopped the parse at the repeated key, before the rest was read."""
    try:
        return json.loads(line, parse_int=_int)
    except (ValueError, RecursionError):
        return _NOT_JSON


class Screened:
    """The stdio line source, with the lines ``screen`` answers written to ``stdout`` instead of
    passed to the SDK (which writes each of its answers with one ``write`` too)."""

    def __init__(self, lines: Any, stdout: Any) -> None:
        self._lines = lines.__aiter__()
        self._stdout = stdout

    def __aiter__(self) -> Screened:
        return self

    async def __anext__(self) -> str:
        while True:
            line: str = await self._lines.__anext__()
            answer = screen(line)
            if answer is None:
                return line
            if answer != DROPPED:
                await self._stdout.write(answer)
                await self._stdout.flush()
