"""Tool errors as a model and a program can read them.

Every failed tool call returns ``is_error=True`` with two forms of the same error:

- ``content``: one line of text, ``CODE: message`` (plus a hint where there is one);
- ``structured_content``: ``{"error": {"code", "message", "details"}}``, the envelope the REST
  adapter uses, so a client can branch on the code without parsing text.

Arguments that do not fit a tool's input schema get ``INVALID_INPUT`` with one plain sentence per
argument (``'text' is required``), never pydantic's report with its documentation URL.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from mcp_types import CallToolResult, TextContent
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from coffer_memory import CofferError, ScopeUnresolved

__all__ = ["error_result", "invalid_arguments"]

log = logging.getLogger("coffer_memory_mcp")

SCOPE_HINT = (
    ". Pass cwd= with a directory inside the project, or use scope='global' for a fact that is "
    "not about one project."
)
BRANCH_HINT = (
    ". Pass cwd= with a directory inside the project: a handoff belongs to one branch of one project."
)
RECALL_HINT = (
    ". Nothing was searched: recall does not fall back to the global store alone from a checkout it "
    "cannot read. Repair the checkout as said, or pass cwd= with a directory of another project."
)
SCOPED_TOOLS = frozenset({"coffer__remember", "coffer__list_memory"})
"""The tools with a ``scope`` argument: only their SCOPE_UNRESOLVED may suggest scope='global'."""


def error_result(code: str, message: str, details: dict[str, Any] | None = None) -> CallToolResult:
    """An error result carrying ``code`` in its text and in its structured content."""
    # default=str: details may hold paths; the wire wants plain JSON.
    plain = json.loads(json.dumps(details or {}, default=str))
    return CallToolResult(
        content=[TextContent(type="text", text=f"{code}: {message}")],
        structured_content={"error": {"code": code, "message": message, "details": plain}},
        is_error=True,
    )


def core_error(tool: str, exc: CofferError) -> CallToolResult:
    """A core error as a tool error (``SCOPE_UNRESOLVED`` says how to get out of it)."""
    hint = SCOPE_HINT if tool in SCOPED_TOOLS else RECALL_HINT if tool == "coffer__recall" else BRANCH_HINT
    message = exc.message + (hint if isinstance(exc, ScopeUnresolved) else "")
    log.info("%s failed: %s: %s", tool, exc.code, message)
    return error_result(exc.code, message, exc.details)


def _field(err: ErrorDetails) -> str:
    return ".".join(str(part) for part in err["loc"]) or "arguments"


def _sentence(err: ErrorDetails) -> str:
    """One plain sentence for one validation error (pydantic's ``msg`` reworded where it is terse)."""
    field, kind = _field(err), err["type"]
    if kind == "missing":
        return f"'{field}' is required"
    if kind == "string_unicode":  # a length limit makes pydantic decode first: the surrogate guard's words
        return f"{field} contains a lone surrogate, which is not a character"
    if kind in ("string_type", "int_type", "int_parsing", "bool_type", "bool_parsing"):
        wanted = {"s": "text", "i": "a whole number", "b": "true or false"}[kind[0]]
        return f"'{field}' must be {wanted}"
    return f"'{field}': {err['msg'][:1].lower()}{err['msg'][1:]}"


def invalid_arguments(tool: str, exc: ValidationError) -> CallToolResult:
    """``INVALID_INPUT`` naming each argument that does not fit, in plain words."""
    errors = exc.errors(include_url=False, include_input=False)
    fields = sorted({_field(e) for e in errors})
    message = "; ".join(_sentence(e) for e in errors) + f" (calling {tool})"
    log.info("%s rejected arguments: %r", tool, fields)
    return error_result("INVALID_INPUT", message, {"fields": fields})
