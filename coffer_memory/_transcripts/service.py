"""``Transcripts``: past agent sessions: list, show (scrubbed), distill into the journal, sweep, forget.

A component of ``MemoryService`` (also reachable as ``svc.transcripts``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from .._agents.homes import AGENTS, require_agent
from .._config import Settings
from .._errors import CofferError, IndexUnavailable, InvalidInput, SessionNotFound, check_limit
from .._home import HomeLayout
from .._indexing import Models
from .._lanes import Lanes
from .._llm import LLMOutputInvalid, LLMUnavailable
from .._models import LaneWrite, Target
from .._optout import optout_for, optout_for_roots
from .._scope import find_git
from .._store.lanes import drop_session_entries
from .._store.paths import GLOBAL_STORE
from .._store.writer import Writer
from .._targets import Targets
from ..vocabulary import MAX_SESSION_ID_CHARS, MAX_SWEEP_LIMIT
from .distill import INSIGHTS_SCHEMA, Insight, build_prompt, content_sha256, parse_insights
from .increment import family_head, message_digest, undistilled
from .ledger import STALE_CLAIM_SECONDS, Ledger, LedgerEntry
from .models import DistillResult, SweepResult, Transcript
from .reading import SessionReader

if TYPE_CHECKING:
    from ..plugins.hookspecs import LLM

log = logging.getLogger("coffer_memory._transcripts")

DEFAULT_SWEEP_LIMIT = 20
DEFAULT_MIN_IDLE_SECONDS = 600
# A session end waits for the session's running distillation (the previous end of a continued
# session) rather than skipping its own turns; past the stale age a dead claim is taken over.
END_WAIT_SECONDS = STALE_CLAIM_SECONDS + 30.0
CLAIM_POLL_SECONDS = 0.25
# Sessions an earlier end left in_progress that one session end distils after its own (at most).
LEFT_PER_END = 5

Progress = Callable[[DistillResult], None]


class Transcripts(SessionReader):
    """Read past sessions of Claude Code, Codex and OpenCode (``SessionReader``), and distill them
    into the journal.

    Agent directories come from the environment at call time (``CLAUDE_CONFIG_DIR``,
    ``CODEX_HOME``, ``XDG_DATA_HOME``); nothing under them is ever written.
    """

    def __init__(
        self, settings: Settings, models: Models, writer: Writer, targets: Targets, lanes: Lanes
    ) -> None:
        self.settings = settings
        self.models = models
        self.writer = writer
        self.targets = targets
        self.lanes = lanes
        super().__init__()
        self._ledger: Ledger | None = None

    # -- plumbing -----------------------------------------------------------------------------
    @property
    def ledger(self) -> Ledger:
        """The ``distilled_sessions`` ledger of this home (``<home>/ledger.db``)."""
        with self._guard:
            if self._ledger is None:
                self._ledger = Ledger(HomeLayout(self.settings.home).ledger_db, self.settings.busy_timeout_ms)
            return self._ledger

    def close(self) -> None:
        """Close the ledger (the next use opens it again)."""
        with self._guard:
            if self._ledger is not None:
                self._ledger.close()
                self._ledger = None

    # -- distilling ---------------------------------------------------------------------------
    def distill_session(
        self,
        agent: str,
        session_id: str,
        *,
        cwd: str | os.PathLike[str] | None = None,
        dry_run: bool = False,
    ) -> DistillResult:
        """Distill one session into its project's journal (one LLM call; idempotent by content).

        A session distilled before and grown since (a continued or resumed session) sends only
        its new turns, with the two before them as context; ``detail`` says which turns.

        ``cwd`` overrides the session's recorded working directory. No-ops (nothing written,
        a status saying why): the project opted out (``opted_out``), no model configured, the
        directory is not in a git repository,
        no prose left after scrubbing, this content already distilled. A malformed answer
        writes nothing (``invalid_output``) and leaves the session for a later attempt.
        ``dry_run`` calls the model and returns the insights without writing or recording.
        """
        transcript = self._load(agent, session_id)
        return self._distill(transcript, cwd=cwd, dry_run=dry_run)

    def _distill(
        self,
        transcript: Transcript,
        *,
        cwd: str | os.PathLike[str] | None,
        dry_run: bool,
        wait_seconds: float = 0.0,
    ) -> DistillResult:
        summary = transcript.summary
        key = (summary.agent, summary.session_id, content_sha256(transcript))

        def result(status: Any, **kw: Any) -> DistillResult:
            return DistillResult(summary.agent, summary.session_id, status, **kw)

        workdir = cwd if cwd is not None else summary.project_path
        git = find_git(workdir) if workdir else None
        if git is None:
            return result("not_git", detail=f"{workdir or 'no working directory'} is not in a git repository")
        # The store the journal entries go to, which is not the path's own once that checkout's
        # store was merged into another's or the repository moved: the ledger keys a session's
        # family by it, and the result names it.
        store = self.targets.store_of(git)
        optout = optout_for_roots((git.toplevel, git.worktree), self.settings.projects.exclude)
        if optout is not None:  # checked before the model: an opted-out project is never sent anywhere
            return result("opted_out", store=store, detail=optout.describe())
        llm = self.models.llm()
        if llm is None:  # checked first: without a model nothing is written, not even ledger.db
            return result("no_model", store=store, detail="no LLM is configured ([llm] provider)")
        if not dry_run:
            first = message_digest(transcript.messages[0]) if transcript.messages else ""
            head = family_head(transcript.messages)
            busy = self._claim(key, wait_seconds, store=store, first=first, head=head)
            if busy is not None:
                detail = self._held_by(key, store=store, first=first, head=head, status=busy)
                return result(busy, store=store, detail=detail)
        try:
            # Worked out under the claim: a claim of the same session that finished while this
            # one waited has covered turns this one must not send again.
            return self._distill_claimed(transcript, key, git.toplevel, store, llm, dry_run=dry_run)
        finally:
            if not dry_run:  # a no-op once finished: a failure leaves the turns for the next attempt
                self.ledger.release(*key)

    def _claim(
        self, key: tuple[str, str, str], wait_seconds: float, *, store: str, first: str, head: tuple[str, ...]
    ) -> str | None:
        """Claim the session for ``key`` (and its family: ``Ledger.claim``); None when claimed,
        else the status to return."""
        deadline = time.monotonic() + max(wait_seconds, 0.0)
        while True:
            if self.ledger.is_done(*key):
                return "already_distilled"
            if self.ledger.claim(*key, store=store, first=first, head=head):
                return None
            if time.monotonic() >= deadline:
                return "in_progress"
            time.sleep(CLAIM_POLL_SECONDS)

    def _held_by(
        self, key: tuple[str, str, str], *, store: str, first: str, head: tuple[str, ...], status: str
    ) -> str | None:
        """What holds a session that could not be claimed: a fork's claim may be held by its parent
        (``Ledger.claim``), and ``in_progress`` alone read as if this session were being distilled."""
        if status != "in_progress":
            return None
        holder = self.ledger.holder(key[0], key[1], store=store, first=first, head=head)
        if holder is None:
            return None
        if holder == key[1]:
            return "another distillation of this session is running; it is left for the next attempt"
        return (
            f"session {holder}, which begins with the same turns up to its first answer (a fork and "
            "its parent), is being distilled; this one is left for the next attempt, to send only the "
            "turns that one does not cover"
        )

    def _distill_claimed(
        self,
        transcript: Transcript,
        key: tuple[str, str, str],
        toplevel: Path,
        store: str,
        llm: LLM,
        *,
        dry_run: bool,
    ) -> DistillResult:
        summary = transcript.summary

        def result(status: Any, **kw: Any) -> DistillResult:
            return DistillResult(summary.agent, summary.session_id, status, store=store, **kw)

        done = self.ledger.distilled(summary.agent, summary.session_id)
        digests = [message_digest(m) for m in transcript.messages]
        shared = (
            self.ledger.distilled_elsewhere(summary.agent, summary.session_id, store, digests[0])
            if digests
            else []
        )
        increment = undistilled(transcript.messages, [*done, *shared])
        detail = increment.describe()
        if not increment.new:  # rewritten to turns all distilled before: nothing to ask the model
            if not dry_run:
                self.ledger.finish(
                    *key,
                    store=store,
                    insights=0,
                    prompt_tokens=0,
                    completion_tokens=0,
                    message_digests=digests,
                )
            return result("already_distilled", detail=detail)
        # The name of this run's entries: the session and the turns sent. A run killed after its
        # journal write and before the ledger recorded it wrote them already: record it now, ask
        # the model nothing and write nothing again (a distillation is exactly once).
        run = _run_name(summary.agent, summary.session_id, [message_digest(m) for m in increment.new])
        written = 0 if dry_run else self.lanes.journal_has_parts(f"{run}-", cwd=toplevel)
        if written:
            self.ledger.finish(
                *key,
                store=store,
                insights=written,
                prompt_tokens=0,
                completion_tokens=0,
                message_digests=digests,
            )
            return result(
                "already_distilled", detail=f"{detail}; its {written} journal entries were written before"
            )
        from .scrub import scrub_transcript

        # Only the new turns are scrubbed and sent; the context turns were distilled already.
        scrubbed = scrub_transcript(attrs.evolve(transcript, messages=increment.new))
        context = scrub_transcript(attrs.evolve(transcript, messages=increment.context, dropped={}))
        counts = dict(scrubbed.report.counts)
        if not scrubbed.messages:
            return result("empty", scrubbed=counts, detail=detail)
        try:
            completion = llm.complete(
                build_prompt(scrubbed.messages, project=toplevel.name, context=context.messages),
                json_schema=INSIGHTS_SCHEMA,
                max_tokens=max(self.settings.llm.max_tokens, 2000),
            )
            insights = parse_insights(completion.text)
        except (LLMOutputInvalid, LLMUnavailable) as exc:
            status = "invalid_output" if isinstance(exc, LLMOutputInvalid) else "no_model"
            return result(status, scrubbed=counts, detail=exc.message)
        usage: dict[str, Any] = {
            "prompt_tokens": completion.usage.prompt_tokens,
            "completion_tokens": completion.usage.completion_tokens,
        }
        # The model's answer is scrubbed too: a secret it echoed must not reach the journal.
        insights = [_rescrub(i) for i in insights]
        # One write for all (a kill leaves all or none), each entry named by the turns it came
        # from; a dry run goes through the same transaction, writing nothing.
        write = self.lanes.journal_append_parts(
            [(f"{run}-{n}", insight.journal_text()) for n, insight in enumerate(insights, 1)],
            cwd=toplevel,
            actor="agent",
            origin_session_id=summary.session_id,
            dry_run=dry_run,
        )
        paths = [str(write.path)] if write is not None else []
        if dry_run:  # checked like a write (a linked journal fails here too); paths stay empty
            return result("dry_run", insights=tuple(insights), scrubbed=counts, detail=detail, **usage)
        self.ledger.finish(
            *key,
            store=store,
            insights=len(insights),
            prompt_tokens=completion.usage.prompt_tokens,
            completion_tokens=completion.usage.completion_tokens,
            message_digests=digests,
        )
        return result(
            "distilled", insights=tuple(insights), paths=tuple(paths), scrubbed=counts, detail=detail, **usage
        )

    def end_session(
        self,
        agent: str,
        session_id: str,
        *,
        cwd: str | os.PathLike[str] | None = None,
        wait_seconds: float = END_WAIT_SECONDS,
    ) -> DistillResult:
        """What the SessionEnd hook and REST route run: distill the session that just ended.

        Another distillation of the same session still running (the previous SessionEnd of a
        continued session), or of its fork or parent, is waited for, up to ``wait_seconds``, so this
        one sends only the turns that one did not cover; ``in_progress`` when it is still running
        then, and the session is noted as left (``Ledger.leave``). Each end then distils, without
        waiting, up to ``LEFT_PER_END`` sessions of the agent that earlier ends left so
        (``pick_up_left``; coffer-hook's session start does the same in a detached process).
        """
        transcript = self._load(agent, session_id)
        outcome = self._distill(transcript, cwd=cwd, dry_run=False, wait_seconds=wait_seconds)
        if outcome.status == "in_progress":
            self.ledger.leave(agent, session_id, None if cwd is None else os.fspath(cwd))
        else:
            self.ledger.picked(agent, session_id)
        self.pick_up_left(agent, session_id)
        return outcome

    def has_left(self, agent: str) -> bool:
        """Whether ``agent`` may have sessions an earlier end left (its ``left_mark``: no ledger read)."""
        return self.ledger.left_mark(agent).exists()

    def pick_up_left(self, agent: str, going_on: str | None = None) -> list[DistillResult]:
        """Distil, without waiting, up to ``LEFT_PER_END`` sessions of ``agent`` an earlier end left
        ``in_progress`` (not ``going_on``, the session ending or starting): each is forgotten once it
        got any other answer (a failure leaves it to the sweeps, as any failed distillation), kept
        while its family is still busy. The agent's ``left_mark`` goes before the ledger is read and
        comes back while any is left (a ``leave`` after the read marks it again). What each
        distillation answered (none for a session that is gone)."""
        with contextlib.suppress(OSError):  # the mark is a hint: a session end must not fail on it
            self.ledger.left_mark(agent).unlink(missing_ok=True)
        left = [(s, cwd) for s, cwd in self.ledger.left(agent, LEFT_PER_END + 1) if s != going_on]
        outcomes: list[DistillResult] = []
        for session_id, cwd in left[:LEFT_PER_END]:
            try:
                outcome = self._distill(self._load(agent, session_id), cwd=cwd, dry_run=False)
            except CofferError as exc:  # gone, or no longer readable: nothing to pick up again
                log.info("left session %s of %s not distilled: %s", session_id, agent, exc)
                outcome = None
            if outcome is None or outcome.status != "in_progress":
                self.ledger.picked(agent, session_id)
            if outcome is not None:
                outcomes.append(outcome)
        if self.ledger.left(agent, 1):
            self.ledger.mark_left(agent)
        return outcomes

    def sweep(
        self,
        agent: str | None = None,
        *,
        limit: int = DEFAULT_SWEEP_LIMIT,
        min_idle_seconds: int = DEFAULT_MIN_IDLE_SECONDS,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> SweepResult:
        """Distill every session (of ``agent``, or of all agents) not yet in the ledger.

        At most ``limit`` sessions are sent to the model per run, oldest first; sessions active in
        the last ``min_idle_seconds`` are left for later (they are probably still going on, and
        distilling them now would distill most of their content twice).
        """
        check_limit(limit, MAX_SWEEP_LIMIT)
        agents = [require_agent(agent)] if agent is not None else list(AGENTS)
        cutoff = datetime.now(UTC) - timedelta(seconds=max(min_idle_seconds, 0))
        lister = self._lister()
        todo: list[tuple[Transcript, str]] = []
        considered = active = opted_out = 0
        for name in agents:
            for summary in lister.all_sessions(name):
                considered += 1
                if summary.last_activity_at is not None and summary.last_activity_at > cutoff:
                    active += 1
                    continue
                if optout_for(summary.project_path, self.settings.projects.exclude) is not None:
                    opted_out += 1  # never read, never counted against the limit
                    continue
                transcript = lister.load(name, summary.session_id)
                sha = content_sha256(transcript)
                if not self.ledger.is_done(name, summary.session_id, sha):
                    todo.append((transcript, sha))
        todo.sort(key=lambda item: item[0].summary.started_at or datetime.min.replace(tzinfo=UTC))
        results: list[DistillResult] = []
        for transcript, _ in todo[:limit]:
            outcome = self._distill(transcript, cwd=None, dry_run=dry_run)
            results.append(outcome)
            if progress is not None:
                progress(outcome)
        return SweepResult(
            agent=agent,
            considered=considered,
            results=tuple(results),
            skipped_active=active,
            remaining=max(len(todo) - limit, 0),
            skipped_opted_out=opted_out,
        )

    def forget_session(
        self, session_id: str, *, cwd: str | os.PathLike[str] | None = None, store: str | None = None
    ) -> list[LaneWrite]:
        """Delete every journal entry distilled from ``session_id`` in a project store.

        Each changed day file is rewritten atomically and re-indexed; the consolidation log and
        the audit (``memory_deleted`` with the ``origin_session_id``) say what went. The ledger
        keeps its rows, so a sweep does not distill the session again.

        ``SessionNotFound`` when nothing was removed and nothing names the session: no ledger row,
        no fact remembered in it (in this project's store or the global one), no agent's session
        of that id. A mistyped id said "no journal entries" and passed for done.
        """
        check_session_id(session_id)
        target = self.targets.project(store=store, cwd=cwd)
        writes = self._forget(session_id, target)
        if not writes and not self._named(session_id, target.store):
            raise SessionNotFound(None, session_id)
        return writes

    def _named(self, session_id: str, store: str) -> bool:
        """Whether anything coffer or an agent keeps names ``session_id`` (see ``forget_session``)."""
        try:
            if self.distilled_sessions(None, session_id):
                return True
        except IndexUnavailable:  # a ledger that cannot be read proves nothing either way
            return True
        if self.lanes.facts.session_facts(session_id, dict.fromkeys([store, GLOBAL_STORE])):
            return True
        try:
            self.find_session(session_id)
        except SessionNotFound:
            return False
        return True

    def _forget(self, session_id: str, target: Target) -> list[LaneWrite]:
        sp = self.targets.paths(target.store)
        writes: list[LaneWrite] = []
        if not sp.journal.is_dir():
            return writes

        def kept(read: Callable[[Path], bytes | None]) -> Iterator[tuple[Path, bytes, int]]:
            """Each day file holding entries of the session: its bytes without them, how many went."""
            for path in sorted(sp.journal.glob("*.md")):
                data = read(path)  # None for a symlink: never followed
                if data is None:
                    continue
                text, removed = drop_session_entries(
                    data.decode("utf-8", errors="surrogateescape"), session_id
                )
                if removed:
                    yield path, text.encode("utf-8", errors="surrogateescape"), removed

        def planned() -> list[tuple[Path, bytes]]:  # read before the lock too, to embed ahead
            return [(path, data) for path, data, _ in kept(self.writer.dry_run(target.store).read)]

        with (
            self.lanes.index.embedding_ahead(target.store, planned),
            self.writer.transaction(target.store) as tx,
        ):
            for path, data, removed in kept(tx.read):
                receipt = tx.write(path, data)
                tx.log("forgot", f"{removed} journal entries of session {session_id} in {path.name}")
                tx.audit("memory_deleted", None, lane="journal", path=str(path), origin_session_id=session_id)
                writes.append(
                    LaneWrite(
                        target.store, path, receipt.before_sha256, receipt.after_sha256, target, receipt
                    )
                )
        return writes

    def distilled_sessions(
        self, agent: str | None = None, session_id: str | None = None
    ) -> list[LedgerEntry]:
        """The ledger: what was distilled, when, into which store, with how many tokens."""
        return self.ledger.entries(agent, session_id)


def _rescrub(insight: Insight) -> Insight:
    # Secrets only: the insight's own code blocks and length limits are the model's to choose.
    from .scrub import redact_secrets

    return attrs.evolve(
        insight,
        name=redact_secrets(insight.name),
        description=redact_secrets(insight.description),
        body=redact_secrets(insight.body),
    )


def check_session_id(session_id: object) -> None:
    """``InvalidInput`` unless ``session_id`` is 1 to ``MAX_SESSION_ID_CHARS`` characters."""
    if not isinstance(session_id, str) or not session_id.strip() or len(session_id) > MAX_SESSION_ID_CHARS:
        raise InvalidInput(f"session_id must be 1-{MAX_SESSION_ID_CHARS} characters", field="session_id")


def _run_name(agent: str, session_id: str, digests: list[str]) -> str:
    """A distillation's name, the same whenever the same turns of the same session are sent."""
    return hashlib.sha256("\0".join([agent, session_id, *digests]).encode()).hexdigest()[:16]
