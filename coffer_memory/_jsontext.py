"""``json.loads`` for text coffer did not write: nesting too deep for the parser is malformed JSON.

The parser recurses once per ``[`` or ``{``; a line of 100,000 of them (20 KB of JSON in a
transcript, an import file, an agent's settings) raised ``RecursionError``, which no caller
expects from a parse: an import ended in a raw traceback and a transcript listing stopped at that
file. Here it is a ``json.JSONDecodeError`` (a ``ValueError``), like any other broken JSON.

So is an integer of more digits than Python converts (``sys.get_int_max_str_digits()``, 4,300):
``json.loads`` raises a plain ``ValueError`` for it, which callers that catch
``json.JSONDecodeError`` let through (``coffer agents list`` with such a number in Claude Code's
``settings.json`` was an ``unexpected ValueError``, a REST ``500``).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Any


def loads(data: str | bytes | bytearray, *, parse_int: Callable[[str], Any] | None = None) -> Any:
    """``json.loads(data)``; nesting deeper than the parser can follow is ``json.JSONDecodeError``.

    ``parse_int`` is ``json.loads``'s: one that keeps a long digit run lets such a document parse."""
    try:
        return json.loads(data, parse_int=parse_int)
    except RecursionError:
        doc = data if isinstance(data, str) else ""
        raise json.JSONDecodeError("nested too deeply", doc, 0) from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # an integer past int()'s digit limit: json raises no JSONDecodeError for it
        doc = data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
        limit = sys.get_int_max_str_digits()
        found = re.search(rf"\d{{{limit + 1},}}", doc)
        message = f"a number of more than {limit} digits"
        raise json.JSONDecodeError(message, doc, found.start() if found else 0) from None
