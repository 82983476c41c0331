"""Reports of organize and reorg runs."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import attrs

from .._llm import TokenUsage

Status = Literal["ok", "no_model", "empty"]


def add_usage(a: TokenUsage, b: TokenUsage) -> TokenUsage:
    """The sum of two usages."""
    return TokenUsage(a.prompt_tokens + b.prompt_tokens, a.completion_tokens + b.completion_tokens)


@attrs.frozen
class PlannedChange:
    """One change a run made (or, with ``dry_run``, would make), as a unified diff."""

    action: str  # merged | created | rule | split | superseded | wrote | skipped
    source: Path | None
    target: Path | None
    diff: str = ""
    error: str | None = None


@attrs.frozen
class OrganizeReport:
    """What ``organize`` did to one store."""

    store: str
    status: Status
    dry_run: bool
    changes: tuple[PlannedChange, ...] = ()
    usage: TokenUsage = attrs.field(factory=lambda: TokenUsage(0, 0))

    def count(self, action: str) -> int:
        """How many changes had this action."""
        return sum(1 for c in self.changes if c.action == action)

    @property
    def rules_appended(self) -> int:
        """Inbox items classified as rules."""
        return self.count("rule")

    @property
    def skipped(self) -> int:
        """Inbox items left in the inbox (malformed LLM output, a conflicting edit...)."""
        return self.count("skipped")


@attrs.frozen
class ReorgReport:
    """What ``reorganize`` did to one store."""

    store: str
    status: Status
    dry_run: bool
    steps: int = 0
    changes: tuple[PlannedChange, ...] = ()
    summary: str = ""
    usage: TokenUsage = attrs.field(factory=lambda: TokenUsage(0, 0))
