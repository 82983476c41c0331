"""``SessionReader``: past agent sessions, read only (list, find, show scrubbed), with no coffer home.

The agents' session files live in their own homes (``~/.claude``, ``~/.codex``, OpenCode's data
folder), not in coffer's: reading them needs no memory, no index and no ``~/.coffer``. So
``coffer transcripts list|show`` read them through this on a machine where nothing was
remembered yet; ``Transcripts`` (the service's component) reads through it too, and adds
distilling.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any

from .._agents.homes import AGENTS, AgentHomes, require_agent
from .._errors import InvalidInput, SessionNotFound, safe_echo
from .models import SessionSummary, Transcript

if TYPE_CHECKING:
    from .listing import SessionLister, SessionPage
    from .scrub import ScrubbedTranscript

__all__ = ["LIST_FILTERS", "SessionReader"]

LIST_FILTERS = ("search", "project", "started_after", "started_before", "sort", "order", "limit", "offset")
"""The keyword arguments of ``list_transcripts`` (``SessionLister.list_sessions``'s)."""
MAX_LISTED = 10  # unknown arguments named in the error at most


class SessionReader:
    """Read past sessions of Claude Code, Codex and OpenCode; nothing under their homes is written.

    Agent directories come from the environment at call time (``CLAUDE_CONFIG_DIR``,
    ``CODEX_HOME``, ``XDG_DATA_HOME``).
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._lister_cache: SessionLister | None = None

    def _lister(self) -> SessionLister:
        # The readers and the scrubber are imported on first use: most processes that open a
        # MemoryService (the CLI, the MCP server) never read a transcript.
        from .listing import SessionLister

        homes = AgentHomes.from_env()
        with self._guard:
            lister = self._lister_cache
            if lister is None or lister.homes != homes:
                # A new environment (tests, or a changed CODEX_HOME) gets a fresh parse cache.
                lister = self._lister_cache = SessionLister(homes)
            return lister

    def list_transcripts(self, agent: str, **filters: Any) -> SessionPage:
        """Past sessions of ``agent``: ``search``, ``project``, ``started_after``/``started_before``,
        ``sort`` (started_at | last_activity_at | message_count), ``order``, ``limit``, ``offset``;
        any other keyword is ``InvalidInput`` (it was a bare ``TypeError``)."""
        unknown = sorted(set(filters) - set(LIST_FILTERS))
        if unknown:
            listed = ", ".join(repr(safe_echo(u)) for u in unknown[:MAX_LISTED])
            raise InvalidInput(
                f"list_transcripts takes no argument {listed}; it takes {', '.join(LIST_FILTERS)}",
                field=safe_echo(unknown[0]),
            )
        return self._lister().list_sessions(require_agent(agent), **filters)

    def transcript_summary(self, agent: str, session_id: str) -> SessionSummary:
        """One session's summary (``SessionNotFound`` when there is no such session)."""
        return self._lister().find(require_agent(agent), session_id)

    def show_transcript(self, agent: str, session_id: str) -> ScrubbedTranscript:
        """A session as distillation would send it: prose only, outputs dropped, secrets redacted."""
        from .scrub import scrub_transcript

        return scrub_transcript(self._load(agent, session_id))

    def find_session(self, session_id: str, agent: str | None = None) -> SessionSummary:
        """A session by id, looked up in every agent's files unless ``agent`` is given."""
        agents = [require_agent(agent)] if agent is not None else list(AGENTS)
        lister = self._lister()
        for name in agents:
            with contextlib.suppress(SessionNotFound):
                return lister.find(name, session_id)
        raise SessionNotFound(agent, session_id)  # agent None: "not found in any agent's sessions"

    def _load(self, agent: str, session_id: str) -> Transcript:
        return self._lister().load(require_agent(agent), session_id)
