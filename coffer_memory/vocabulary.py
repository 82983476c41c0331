"""One vocabulary for every face: limits, mode names, lane names, scopes, actors and error codes.

The core validates against these numbers and names; the REST and MCP adapters derive their
constraints and descriptions from them (a test fails when a face restates one as a literal).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, Literal


# -- names ---------------------------------------------------------------------------------------
class MemoryScope(StrEnum):
    """Where a fact lives: the global store or the store of the current git project."""

    GLOBAL = "global"
    PROJECT = "project"


Scope = Literal["global", "project"]
SCOPES: Final = ("global", "project")
Actor = Literal["agent", "user"]
ACTORS: Final = ("agent", "user")
RetrievalMode = Literal["grep", "keyword", "vector", "hybrid"]
RETRIEVAL_MODES: Final[tuple[RetrievalMode, ...]] = ("grep", "keyword", "vector", "hybrid")
LANES: Final = ("knowledge", "journal", "handoff", "rules", "superseded", "consolidation-log")
SECRET_POLICIES: Final = ("redact", "reject", "allow")

CLAUDE_CODE: Final = "claude-code"
CODEX: Final = "codex"
OPENCODE: Final = "opencode"
AGENTS: Final[tuple[str, ...]] = (CLAUDE_CODE, CODEX, OPENCODE)
DistillStatus = Literal[
    "distilled",
    "dry_run",
    "already_distilled",
    "in_progress",
    "no_model",
    "not_git",
    "opted_out",
    "empty",
    "invalid_output",
]

WHEN_FORMS: Final = (
    "an ISO 8601 date or time (UTC if no zone) in the years 1 to 9999, or a duration ago: "
    "a whole number of s, m, h, d or w, such as 30m, 12h, 7d or 2w (-7d reads as 7d)"
)
"""What every ``since``/``until`` takes, in the words of every face (help, descriptions, errors)."""

# -- limits --------------------------------------------------------------------------------------
MCP_PROBE_TIMEOUT_SECONDS: Final = 20.0
"""Long enough for ``coffer-mcp`` on a loaded machine (it starts in ~1-2 s); Claude Code waits 30 s."""
MAX_LIST_LIMIT: Final = 500
"""Facts per page of ``list_facts`` (and the REST and MCP listings)."""
MAX_TITLE_CHARS: Final = 200
MAX_DESCRIPTION_CHARS: Final = 500
MAX_LABEL_CHARS: Final = 200
MAX_HANDOFF_CHARS: Final = 64_000
MAX_RULE_CHARS: Final = 4_000
MAX_JOURNAL_DAYS: Final = 3660
"""Day files one ``journal`` call returns at most (ten years)."""
MAX_TRANSCRIPT_LIST_LIMIT: Final = 1000
"""Sessions per page of a transcript listing (core, REST and CLI alike)."""
MAX_SWEEP_LIMIT: Final = 1000
MAX_AUDIT_LIMIT: Final = 1000
"""Audit events per page (core, REST and CLI alike)."""
MAX_AUDIT_FILTER_CHARS: Final = 64
"""A store name, event name or time bound in an audit query."""
MAX_SESSION_ID_CHARS: Final = 200
MAX_SEARCH_CHARS: Final = 500
MAX_SESSION_CONTEXT_CHARS: Final = 10_000
MAX_RECALL_LIMIT: Final = 200
MAX_QUERY_CHARS: Final = 4096
MAX_CURSOR_CHARS: Final = 4096
MAX_PATH_CHARS: Final = 4096
DEFAULT_RECALL_LIMIT: Final = 10
DEFAULT_LIST_LIMIT: Final = 50
MAX_TAGS: Final = 20
"""Tags one fact carries at most (and a filter names at most)."""
MAX_TAG_CHARS: Final = 40
"""Characters of one tag (stored lowercased; no comma, no line break)."""
MAX_REQUEST_BODY_BYTES: Final = 12 * MAX_HANDOFF_CHARS + 256 * 1024
"""Bytes of one HTTP request body to ``coffer-api`` or ``coffer-mcp`` (an import upload has its own
bound): the longest text any request carries, a handoff (longer than any store lets a fact be),
every character written as a JSON escape pair (``\\ud83d\\ude00``, 12 bytes), with room for the
other fields. About 1 MiB; past it the answer is ``413 REQUEST_TOO_LARGE``, the rest unread."""

# -- error codes (the seed's names, plus ours) ---------------------------------------------------
ERROR_CODES: Final = (
    "MEMORY_STORE_NOT_FOUND",
    "MEMORY_NOT_FOUND",
    "MEMORY_REJECTED",
    "SCOPE_UNRESOLVED",
    "MEMORY_CONFLICT",
    "INVALID_INPUT",
    "SESSION_NOT_FOUND",
    "AGENT_CONFIG_INVALID",
    "EMBEDDING_UNAVAILABLE",
    "STORAGE_FULL",
    "STORAGE_NOT_WRITABLE",
    "INVALID_CURSOR",
    "INDEX_UNAVAILABLE",
)
REJECT_REASONS: Final = ("empty", "too_long", "secret")


def require_agent(name: str) -> str:
    """``name`` if it is a supported agent; ``InvalidInput`` naming the known agents otherwise."""
    if name not in AGENTS:
        from ._errors import InvalidInput, safe_echo

        raise InvalidInput(
            f"unknown agent {safe_echo(name)!r}; known agents: {', '.join(AGENTS)}", field="agent"
        )
    return name
