"""``json.loads`` for text coffer did not write: nesting too deep for the parser is malformed JSON.

The parser recurses once per ``[`` or ``{``; a line of 100,000 of them (20 KB of JSON in a
transcript, an import file, an agent's settings) raised ``RecursionError``, which no caller
expects from a parse: an import ended in a raw traceback and a transcript listing stopped at that
file. Here it is a ``json.JSONDecodeError`` (a ``ValueError``), like any other broken JSON.
"""

from __future__ import annotations

import json
from typing import Any


def loads(data: str | bytes | bytearray) -> Any:
    """``json.loads(data)``; nesting deeper than the parser can follow is ``json.JSONDecodeError``."""
    try:
        return json.loads(data)
    except RecursionError:
        doc = data if isinstance(data, str) else ""
        raise json.JSONDecodeError("nested too deeply", doc, 0) from None
