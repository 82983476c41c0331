"""What coffer gives agents at session start (and, later, hook install and native-memory toggles)."""

from .context import MAX_CONTEXT_CHARS, SEEDED_RULES, build_session_context

__all__ = ["MAX_CONTEXT_CHARS", "SEEDED_RULES", "build_session_context"]
