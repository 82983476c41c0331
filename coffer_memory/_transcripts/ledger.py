"""The ``distilled_sessions`` ledger: which session contents were already distilled.

Keyed by ``(agent, session_id, content_sha256)``, so the same content is distilled once
whichever path asks (the session-end hook or a sweep), while a session that grew after it
was distilled is distilled again, for its new turns only: each row also keeps how many turns it
covered and a digest per turn (see ``increment``). The ledger lives in ``<home>/ledger.db``, not in
``index.db``: the index is disposable (delete it and it is rebuilt from the files), but
forgetting the ledger would distill every past session a second time into the journal.

A distillation first *claims* its key (a row with ``status = 'running'``) in an immediate
transaction; the claim becomes ``done`` after the journal writes, or is released when the model
fails. A claim holds the whole *session*, not only its content: two SessionEnds of one session
read the transcript at different lengths (different keys), and both would otherwise send the turns
neither has seen done. So no claim is taken while another live claim of the session is running,
and the turns to send are worked out only once the claim is held. The same holds for a *family*:
a fork repeats its parent's turns under a new session id (``distilled_elsewhere``), so a claim
also waits for a running claim of another session of the same agent and store that begins with
the same turn (its ``first_digest``); otherwise a fork ending while its parent is still asking the
model sends the parent's turns a second time. The family is told by the turns up to the first
answer (``increment.family_head``, kept in the running row's ``message_digests``): two runs of one
prompt share the prompt only, and neither waits for the other. A claim left by a process that died
holds nothing (the session's, or its family's): at once when that process ran on this machine
(``_owner_gone``), after ``STALE_CLAIM_SECONDS`` when it ran on another one sharing the home.

A session end that gave up waiting is noted in ``left_sessions``, for the next session start or end
of the agent to pick up (``Transcripts.pick_up_left``); ``logs/left-<agent>.mark`` says there are some,
so coffer-hook's session start looks for them without opening the ledger.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable, Sequence
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import apsw
import attrs

from .._agents.homes import AGENTS
from .._errors import LedgerUnavailable
from .._home import HomeLayout
from . import ledger_repair, ledger_schema
from .increment import Distilled
from .ledger_repair import DAMAGE
from .ledger_schema import ADDED, MAKE

log = logging.getLogger("coffer_memory._transcripts")
_T = TypeVar("_T")

STALE_CLAIM_SECONDS = 600


def _repair_lock(path: Path) -> Path:
    """``locks/ledger-repair.lock``: one process at a time moves a damaged ledger aside."""
    return HomeLayout(path.parent).locks / "ledger-repair.lock"


@attrs.frozen
class LedgerEntry:
    """One distilled (or being distilled) session content."""

    agent: str
    session_id: str
    content_sha256: str
    status: str
    distilled_at: str | None
    store: str | None
    insights: int
    prompt_tokens: int
    completion_tokens: int


def _owner_gone(owner: str) -> bool:
    """True when a claim's owner is a process of this machine that no longer runs (killed
    mid-distil: its claim would hold the session for ``STALE_CLAIM_SECONDS`` for no one)."""
    head, at, host = owner.rpartition("@")
    if not at or host != os.uname().nodename:
        return False  # another machine's process (a shared home), or a claim from before owners had one
    try:
        os.kill(int(head.split("-", 1)[0]), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError, ValueError):
        return False
    return False


def _now() -> datetime:
    return datetime.now(UTC)


def _family(first: str, head: Sequence[str] | None) -> tuple[str, str | None]:
    """The first digest a claim is filed under and the head it compares (None: any head): a session
    with no answer yet (an empty head) has no family."""
    if head is None:
        return first, None
    return (first, " ".join(head)) if head else ("", "")


def _holders(
    db: apsw.Connection,
    agent: str,
    session_id: str,
    store: str | None,
    first: str,
    head: str | None,
    stale: str,
) -> list[str]:
    """The sessions with a live running claim (claimed after ``stale``, its process not gone) that
    hold ``session_id``: itself, then the other sessions of ``agent`` in ``store`` that begin with
    the turn whose digest is ``first`` and, when ``head`` is given, with the same turns up to their
    first answer (a claim that recorded no head holds them all; see ``Ledger.claim``)."""
    rows = list(
        db.execute(
            "SELECT session_id, owner FROM distilled_sessions WHERE agent = ? AND session_id = ? "
            "AND status = 'running' AND claimed_at > ?",
            (agent, session_id, stale),
        )
    )
    if first and store is not None:
        rows += (
            (session, owner)
            for session, owner, theirs in db.execute(
                "SELECT session_id, owner, message_digests FROM distilled_sessions WHERE agent = ? "
                "AND store = ? AND first_digest = ? AND status = 'running' AND session_id != ? "
                "AND claimed_at > ?",
                (agent, store, first, session_id, stale),
            )
            if head is None or not theirs or theirs == head
        )
    return [str(session) for session, owner in rows if not _owner_gone(str(owner))]


class Ledger:
    """The ledger file of one coffer home (opened lazily, thread-safe). ``busy_timeout_ms``: how
    long a statement waits for another process's write (``busy_timeout_ms``, as the index's)."""

    def __init__(self, path: Path, busy_timeout_ms: int = 10_000) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self._conn: apsw.Connection | None = None
        self._ino = 0
        self._moved: tuple[str, Path, str] | None = None  # a damaged file moved aside: salvage it
        self._seen = (0, 0, 0)  # the file's size, mtime and ctime when last found sound (``_look``)
        self._stamped = False  # the file's header was last seen with the ledger's APPLICATION_ID
        self._kept: ledger_repair.Kept = {}  # rows read through the connection to a damaged file
        self._lock = threading.Lock()
        # Claims are released or finished only by the ledger (process) that took them. The pid and
        # machine say whether that process still runs (``_owner_gone``).
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex}@{os.uname().nodename}"

    def _db(self) -> apsw.Connection:
        if self._conn is not None:
            self._look()
        if self._conn is None:
            self._conn = self._open()
        return self._conn

    def _look(self) -> None:
        """Before a use of the open connection: close it when the file at the path is another one
        (another process moved a damaged file aside: use the new one), and take the file for
        damage when it changed since last seen and is no ledger any more (``ledger_repair.header``:
        garbage, or another program's SQLite file copied over it). Either went unseen: the
        connection answered from SQLite's cache and its -wal, and its close wrote the ledger's
        pages into the other program's file."""
        try:
            st = os.stat(self.path)
        except OSError:
            self._close_conn()
            return
        if st.st_ino != self._ino:
            self._close_conn()
            return
        seen = (st.st_size, st.st_mtime_ns, st.st_ctime_ns)  # a ctime is never set back
        if seen == self._seen:
            return
        wrong, self._stamped = ledger_repair.header(self.path, self._stamped)
        if wrong is None:  # a checkpoint (this process's or another's)
            self._seen = seen
            return
        self._damaged(f"the file was overwritten while in use: {wrong}")

    def _damaged(self, why: str) -> None:
        """The file under the open connection is damaged or another program's now: keep the rows the
        connection still reads (its cache and -wal), move the file aside and let the next open make
        a new one that carries them (``_make``)."""
        assert self._conn is not None
        self._kept = ledger_repair.readable_rows(self._conn)
        # Renamed before the close: SQLite then neither checkpoints the -wal into the moved file
        # nor deletes it (it sees the file moved), and the damaged file is kept as it was.
        moved = ledger_repair.move_damaged(self.path, self._ino, _repair_lock(self.path))
        if moved is not None:
            self._moved = (*moved, why)
        self._close_conn()

    def _close_conn(self) -> None:
        if self._conn is not None:
            with suppress(apsw.Error):
                self._conn.close()
            self._conn = None

    def _open(self) -> apsw.Connection:
        """Open the ledger, repaired first when another program changed or damaged it
        (``ledger_repair``)."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        for _attempt in range(3):
            if not self.path.exists():  # O_EXCL: a link to nothing is never made (outside the home)
                with suppress(FileExistsError):
                    os.close(os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600))
            fd = os.open(self.path, os.O_RDWR)
            self._ino = os.fstat(fd).st_ino
            os.close(fd)
            conn = apsw.Connection(str(self.path))
            try:
                conn.set_busy_timeout(self.busy_timeout_ms)
                foreign = ledger_repair.foreign(conn, ADDED)
                if foreign is not None:  # never written into: moved aside whole
                    raise ledger_repair.NotLedger(foreign)
                found = ledger_repair.problem(conn, ADDED, opening=True)
                if found is not None:
                    self._repaired(ledger_repair.repair_in_place(conn, MAKE, ADDED, opening=True))
                conn.execute("PRAGMA journal_mode=WAL")
                self._make(conn)
                ledger_schema.stamp(conn)
                st = os.stat(self.path)
                self._seen = (st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                self._stamped = ledger_repair.header(self.path, False)[1]
                return conn
            except DAMAGE as exc:
                with suppress(apsw.Error):
                    conn.close()
                moved = ledger_repair.move_damaged(self.path, self._ino, _repair_lock(self.path))
                if moved is not None:
                    self._moved = (*moved, ledger_repair.reason(exc))
            except BaseException:
                with suppress(apsw.Error):
                    conn.close()
                raise
        raise apsw.CantOpenError(f"{self.path} is damaged again after being replaced twice")

    def _make(self, conn: apsw.Connection) -> None:
        """Make (or bring up to date) the tables and the index; carry in what a damaged file kept."""
        ledger_schema.make(conn)
        kept, self._kept = self._kept, {}
        moved, self._moved = self._moved, None
        if moved is not None:
            at, damaged, why = moved
            carried = ledger_repair.salvage(conn, damaged) + ledger_repair.carry_rows(conn, kept)
            what = (
                f"ledger.db: {why}; the file is kept as {damaged.name}, "
                f"{carried} row{'' if carried == 1 else 's'} of it carried over"
                + (" (read through this process's open connection)" if kept else "")
            )
            ledger_repair.record(conn, at, what)
            self._repaired(what)
        elif kept:  # another process moved the damaged file aside first: its rows still count
            ledger_repair.carry_rows(conn, kept)
        if moved is not None or kept:  # the left sessions carried over wait for the next start
            self.mark_left(*(str(a) for (a,) in conn.execute("SELECT DISTINCT agent FROM left_sessions")))

    def left_mark(self, agent: str) -> Path:
        """The file that says ``agent`` has left sessions (``HomeLayout.left_mark``)."""
        return HomeLayout(self.path.parent).left_mark(agent)

    def mark_left(self, *agents: str) -> None:
        """Say that ``agents`` have left sessions, for their next session start to see without
        opening the ledger (coffer-hook starts no process for a start with nothing left)."""
        for agent in agents:
            if agent in AGENTS:  # a name read from a damaged file is no path to write
                with suppress(OSError):  # the mark is a hint: the next session end picks them up anyway
                    self.left_mark(agent).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                    self.left_mark(agent).touch(mode=0o600)

    def _repaired(self, what: str | None) -> None:
        if what is not None:
            log.warning("%s is damaged (%s)", self.path, what.removeprefix("ledger.db: "))

    def _run(self, op: Callable[[apsw.Connection], _T]) -> _T:
        """``op`` on the ledger's connection, under the lock. An error that comes of another
        program's change to the ledger (its shape checked then) or of damage repairs the ledger,
        and ``op`` runs once more on the repaired one. Any other (another process's write held
        past the busy timeout, a file that cannot be opened) is ``LedgerUnavailable``: it reached
        ``coffer distill`` as "unexpected BusyError: database is locked", REST as INTERNAL."""
        with self._lock:
            try:
                return self._attempts(op)
            except (apsw.Error, OSError) as exc:
                raise ledger_repair.unusable(self.path, self.busy_timeout_ms, exc) from exc

    def _attempts(self, op: Callable[[apsw.Connection], _T]) -> _T:
        for attempt in range(2):
            conn = self._db()
            try:
                return op(conn)
            except DAMAGE as exc:
                if attempt:
                    raise
                # Damage past what the open reads (its first page): moved aside as the open moves
                # it, with the rows that still read, and a new ledger made below.
                self._damaged(ledger_repair.reason(exc))
            except apsw.Error:
                if attempt or not self._reshaped(conn):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _reshaped(self, conn: apsw.Connection) -> bool:
        """After an error on ``conn``: True when the ledger's shape was wrong and is repaired now."""
        try:
            found = ledger_repair.problem(conn, (), opening=False)
        except apsw.Error:
            return False
        if found is None:
            return False
        self._repaired(ledger_repair.repair_in_place(conn, MAKE, (), opening=False))
        return True

    def _rows(self, sql: str, params: Sequence[object]) -> list[tuple[Any, ...]]:
        return self._run(lambda db: db.execute(sql, params).fetchall())

    def check(self) -> list[str]:
        """``coffer doctor``'s look at the ledger: repaired first when its shape is wrong or a page of
        it is damaged (a long-lived process may have met nothing since another program changed it;
        a use meets damage only in the pages it reads); every repair noted, one line each. Nothing
        (and no file made) in a home that never distilled."""
        if not self.path.exists():
            return []

        def look(conn: apsw.Connection) -> list[str]:
            # Every page read (doctor's time only: about as long as reading the file).
            first = conn.execute("PRAGMA quick_check(1)").fetchall()[0][0]
            if first != "ok":
                raise apsw.CorruptError(f"quick_check: {str(first).splitlines()[-1]}")
            if ledger_repair.problem(conn, (), opening=False) is not None:
                self._repaired(ledger_repair.repair_in_place(conn, MAKE, (), opening=False))
            return ledger_repair.repairs(conn)

        try:
            return self._run(look)
        except LedgerUnavailable as exc:  # a folder in its place, a home only readable: distill says it
            log.warning("could not check %s: %s", self.path, exc)
            return []

    def is_done(self, agent: str, session_id: str, content_sha256: str) -> bool:
        """True when this exact content was distilled."""
        row = self._run(
            lambda db: db.execute(
                "SELECT status FROM distilled_sessions WHERE agent = ? AND session_id = ? AND content_sha256 = ?",
                (agent, session_id, content_sha256),
            ).fetchone()
        )
        return row is not None and row[0] == "done"

    def distilled(self, agent: str, session_id: str) -> list[Distilled]:
        """Every distilled content of one session, with the turns it covered."""
        rows = self._rows(
            "SELECT content_sha256, message_count, message_digests FROM distilled_sessions "
            "WHERE agent = ? AND session_id = ? AND status = 'done'",
            (agent, session_id),
        )
        return [Distilled(str(r[0]), int(r[1] or 0), tuple(str(r[2] or "").split())) for r in rows]

    def distilled_elsewhere(self, agent: str, session_id: str, store: str, first: str) -> list[Distilled]:
        """The distilled contents of the agent's *other* sessions in ``store`` whose first turn has
        the digest ``first``: the sessions this one may share its first turns with.

        A fork (``claude --resume <id> --fork-session``) copies its parent's turns into a file of its
        own under a new session id; without this its first distillation sent every one of the
        parent's turns to the model again and wrote the parent's insights into the journal twice
        (``increment.undistilled`` works out how many turns each row shares). Only the same store:
        a session that begins word for word as another one of the project did adds nothing by
        those turns either. Rows written before turns were tracked (no digests) all come back."""
        rows = self._rows(
            # The digests are joined by spaces, the first one starts the text: only rows that
            # match come back (23 ms p50 over 10,000 rows of 200 turns each, a 41 MB ledger;
            # once per distillation, which then waits seconds for its model).
            "SELECT session_id, content_sha256, message_count, message_digests FROM distilled_sessions "
            "WHERE agent = ? AND store = ? AND session_id != ? AND status = 'done' "
            "AND (message_digests IN ('', ?) OR substr(message_digests, 1, ?) = ?) ORDER BY session_id",
            (agent, store, session_id, first, len(first) + 1, f"{first} "),
        )
        return [
            Distilled(str(r[1]), int(r[2] or 0), tuple(str(r[3]).split()), elsewhere=str(r[0])) for r in rows
        ]

    def claim(
        self,
        agent: str,
        session_id: str,
        content_sha256: str,
        *,
        store: str | None = None,
        first: str = "",
        head: Sequence[str] | None = None,
    ) -> bool:
        """Take the session for distilling this content; False when the content is done or a
        live claim of the session (any content, any process or thread) is running, or one of
        another session of ``agent`` in ``store`` whose first turn's digest is ``first`` and whose
        turns up to the first answer have the digests ``head`` (a fork and its parent: the later one
        must see what the earlier one covered). ``head`` None holds and waits for every session
        beginning with ``first``; an empty ``head`` (no answer yet) none."""
        now = _now()
        stale = (now - timedelta(seconds=STALE_CLAIM_SECONDS)).isoformat()
        first, joined = _family(first, head)

        def take(db: apsw.Connection) -> bool:
            # IMMEDIATE: take the write lock before reading, so two processes cannot both see
            # the session free (a deferred transaction would fail to upgrade instead of waiting).
            db.execute("BEGIN IMMEDIATE")
            try:
                done = db.execute(
                    "SELECT 1 FROM distilled_sessions WHERE agent = ? AND session_id = ? "
                    "AND content_sha256 = ? AND status = 'done'",
                    (agent, session_id, content_sha256),
                ).fetchone()
                if done is not None or _holders(db, agent, session_id, store, first, joined, stale):
                    db.execute("ROLLBACK")
                    return False
                # Claims of dead processes go: they would keep the session busy for no one.
                db.execute(
                    "DELETE FROM distilled_sessions WHERE agent = ? AND session_id = ? AND status = 'running'",
                    (agent, session_id),
                )
                db.execute(
                    "INSERT INTO distilled_sessions (agent, session_id, content_sha256, status, claimed_at, "
                    "owner, store, first_digest, message_digests) VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?)",
                    (
                        agent,
                        session_id,
                        content_sha256,
                        now.isoformat(),
                        self.owner,
                        store,
                        first,
                        joined or "",
                    ),
                )
                db.execute("COMMIT")
            except BaseException:
                if not db.getautocommit():
                    db.execute("ROLLBACK")
                raise
            return True

        return self._run(take)

    def holder(
        self,
        agent: str,
        session_id: str,
        *,
        store: str | None = None,
        first: str = "",
        head: Sequence[str] | None = None,
    ) -> str | None:
        """The session whose live running claim keeps ``claim`` from taking this one (this session
        itself, or another of its family), or None when none does."""
        stale = (_now() - timedelta(seconds=STALE_CLAIM_SECONDS)).isoformat()
        first, joined = _family(first, head)
        found = self._run(lambda db: _holders(db, agent, session_id, store, first, joined, stale))
        return found[0] if found else None

    def leave(self, agent: str, session_id: str, cwd: str | None) -> None:
        """Note a session end that answered ``in_progress`` (its family or its earlier end still
        running): the next session start or end of ``agent`` distils it (``left``); a later note replaces it."""
        self._rows(
            "INSERT OR REPLACE INTO left_sessions (agent, session_id, cwd, left_at) VALUES (?, ?, ?, ?)",
            (agent, session_id, cwd, _now().isoformat()),
        )
        self.mark_left(agent)  # after the row: a pick-up that took the mark away reads it

    def left(self, agent: str, limit: int = 100) -> list[tuple[str, str | None]]:
        """The sessions of ``agent`` whose end was left ``in_progress``, oldest first: (id, cwd)."""
        rows = self._rows(
            "SELECT session_id, cwd FROM left_sessions WHERE agent = ? ORDER BY left_at LIMIT ?",
            (agent, limit),
        )
        return [(str(r[0]), None if r[1] is None else str(r[1])) for r in rows]

    def picked(self, agent: str, session_id: str) -> None:
        """Forget a left session (distilled now, or no longer there)."""
        self._rows("DELETE FROM left_sessions WHERE agent = ? AND session_id = ?", (agent, session_id))

    def release(self, agent: str, session_id: str, content_sha256: str) -> None:
        """Drop a claim that did not finish (the model failed): the next attempt retries.
        A no-op once the claim is finished (``done``) or when another owner holds it."""
        self._rows(
            "DELETE FROM distilled_sessions WHERE agent = ? AND session_id = ? AND content_sha256 = ? "
            "AND status = 'running' AND owner = ?",
            (agent, session_id, content_sha256, self.owner),
        )

    def finish(
        self,
        agent: str,
        session_id: str,
        content_sha256: str,
        *,
        store: str | None,
        insights: int,
        prompt_tokens: int,
        completion_tokens: int,
        message_digests: Sequence[str] = (),
    ) -> None:
        """Mark the content distilled, with what it produced and what it cost, and the digest
        of each turn it covered (so the next distillation of a grown session can skip them)."""
        self._rows(
            "UPDATE distilled_sessions SET status = 'done', distilled_at = ?, store = ?, insights = ?, "
            "prompt_tokens = ?, completion_tokens = ?, message_count = ?, message_digests = ? "
            "WHERE agent = ? AND session_id = ? AND content_sha256 = ? AND owner = ?",
            (
                _now().isoformat(),
                store,
                insights,
                prompt_tokens,
                completion_tokens,
                len(message_digests),
                " ".join(message_digests),
                agent,
                session_id,
                content_sha256,
                self.owner,
            ),
        )

    def entries(self, agent: str | None = None, session_id: str | None = None) -> list[LedgerEntry]:
        """Ledger rows, newest first, optionally of one agent and/or session."""
        where, params = [], []
        if agent is not None:
            where.append("agent = ?")
            params.append(agent)
        if session_id is not None:
            where.append("session_id = ?")
            params.append(session_id)
        clause = ("WHERE " + " AND ".join(where)) if where else ""
        rows = self._rows(
            "SELECT agent, session_id, content_sha256, status, distilled_at, store, insights, "
            f"prompt_tokens, completion_tokens FROM distilled_sessions {clause} ORDER BY claimed_at DESC",
            params,
        )
        return [
            LedgerEntry(
                agent=str(r[0]),
                session_id=str(r[1]),
                content_sha256=str(r[2]),
                status=str(r[3]),
                distilled_at=None if r[4] is None else str(r[4]),
                store=None if r[5] is None else str(r[5]),
                insights=int(r[6] or 0),
                prompt_tokens=int(r[7] or 0),
                completion_tokens=int(r[8] or 0),
            )
            for r in rows
        ]

    def close(self) -> None:
        """Close the file (reopened on next use)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
