"""OpenCode sessions: ``<data>/opencode.db`` (v1.2+) and the legacy ``<data>/storage/`` JSON tree.

OpenCode 1.2 migrated the JSON tree into SQLite once and left the files behind; some sessions
were skipped by that migration. Both are read, the database first, so a session present in both
lists once, from the database.

Prose is the ``text`` parts that are neither ``synthetic`` (OpenCode's own "Called the Read tool
with..." and pasted file bodies) nor ``ignored``. Reasoning, file, tool, step, patch and other
parts are dropped and counted. Messages are ordered by ``(time.created, id)``, parts by ``id``.

Child sessions (``parent_id`` set: the sessions OpenCode's task tool spawns for a subagent) are
not listed, like Claude Code's subagent transcripts: what they found comes back to the parent
as a tool result. Archived sessions (``time_archived`` set) are not listed either, like
Codex's ``archived_sessions/``. A default title (``New session - <ISO>``, ``Child session -
<ISO>``) counts as no title; the first real prompt is used instead.

The database is never written: see ``connect_readonly``.
"""

from __future__ import annotations

import os
import re
import sqlite3
import urllib.parse
from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import Any

import attrs

from .._agents.homes import OPENCODE
from .._jsontext import loads as json_loads
from .._store.scan import open_regular
from .models import Message, Role, SessionSummary, Transcript
from .readers import (
    BaseReader,
    ScannedSession,
    SourceScan,
    SourceUnavailable,
    TimeSpan,
    bump,
    file_signature,
    from_epoch_ms,
    read_json,
    title_from_text,
)

DB_NAME = "opencode.db"
_DEFAULT_TITLE = re.compile(r"^(New session|Child session) - \d{4}-\d{2}-\d{2}T")

# Listing needs only the text parts; filtering them in SQL keeps large tool outputs out of Python.
_LIST_SQL = """
SELECT m.session_id AS session_id, m.id AS message_id, m.time_created AS created,
       m.time_updated AS updated,
       CASE WHEN json_valid(m.data) THEN json_extract(m.data, '$.role') END AS role,
       json_extract(p.data, '$.text') AS text, json_extract(p.data, '$.synthetic') AS synthetic,
       json_extract(p.data, '$.ignored') AS ignored
FROM message AS m
LEFT JOIN part AS p
  ON p.message_id = m.id AND CASE WHEN json_valid(p.data) THEN json_extract(p.data, '$.type') END = 'text'
ORDER BY m.session_id, m.time_created, m.id, p.id
"""
# json_valid guards: one malformed row must not make json_extract fail the whole query.


def is_default_title(title: str | None) -> bool:
    """Whether ``title`` is missing or one OpenCode gives every session before naming it."""
    return not title or not title.strip() or bool(_DEFAULT_TITLE.match(title))


def _is_wal(path: Path) -> bool:
    """Whether the database file's header says WAL mode (bytes 18 and 19 are 2)."""
    with open_regular(path) as handle:
        header = handle.read(20)
    return len(header) == 20 and header[18] == 2 and header[19] == 2


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open an SQLite database without writing anything next to it.

    ``mode=ro`` alone is not enough: on a WAL database whose ``-wal``/``-shm`` files are absent
    (OpenCode closed cleanly), SQLite creates them and, being read-only, cannot remove them
    again. So:

    - WAL database without both side files: ``immutable=1`` (nothing to merge, no locks, no
      files created);
    - otherwise (a live OpenCode, or a rollback-journal database): ``mode=ro``, which reads the
      pending WAL through SQLite's shared-memory protocol and never writes the database or WAL;
      if that open fails (a read-only folder, a hot journal) ``immutable=1`` is the fallback.
    """
    target = urllib.parse.quote(str(path.absolute()))
    try:
        side_files = all(os.path.exists(f"{path}{suffix}") for suffix in ("-wal", "-shm"))
        modes = ["mode=ro", "immutable=1"] if side_files or not _is_wal(path) else ["immutable=1"]
    except OSError as exc:
        raise SourceUnavailable(f"cannot read {path}: {exc}") from exc
    error: sqlite3.Error | None = None
    for mode in modes:
        connection = sqlite3.connect(f"file:{target}?{mode}", uri=True, check_same_thread=False)
        try:
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()  # really opens it
        except sqlite3.Error as exc:
            connection.close()
            error = exc
            continue
        return connection
    raise SourceUnavailable(f"cannot open {path} read-only: {error}")


@attrs.frozen
class _Info:
    """A session's own record, from either storage generation."""

    id: str
    parent_id: str | None
    directory: str | None
    title: str | None
    created: Any
    updated: Any
    archived: bool = False

    @property
    def hidden(self) -> bool:
        """Child and archived sessions are not listed."""
        return bool(self.parent_id) or self.archived


@attrs.define
class _Msg:
    id: str
    role: str | None
    created: Any
    updated: Any
    parts: list[dict[str, Any]] = attrs.field(factory=list)


def _prose(parts: Iterable[dict[str, Any]], dropped: dict[str, int]) -> list[str]:
    texts: list[str] = []
    for part in parts:
        kind = part.get("type")
        text = part.get("text")
        if kind != "text":
            bump(dropped, kind)
        elif part.get("synthetic"):
            bump(dropped, "synthetic_text")
        elif part.get("ignored"):
            bump(dropped, "ignored_text")
        elif isinstance(text, str) and text.strip():
            texts.append(text.strip())
    return texts


def _messages(msgs: Iterable[_Msg], dropped: dict[str, int]) -> list[Message]:
    out: list[Message] = []
    for msg in sorted(msgs, key=lambda m: (m.created if isinstance(m.created, int | float) else 0, m.id)):
        texts = _prose(sorted(msg.parts, key=lambda p: str(p.get("id", ""))), dropped)
        if not texts or msg.role not in ("user", "assistant"):
            continue
        role: Role = "user" if msg.role == "user" else "assistant"
        out.append(Message(role=role, text="\n\n".join(texts), timestamp=from_epoch_ms(msg.created)))
    return out


class OpenCodeReader(BaseReader):
    """Sessions in ``opencode.db`` and under ``storage/``."""

    agent = OPENCODE

    def __init__(self, data_dir: Path) -> None:
        self.db = data_dir / DB_NAME
        self.storage = data_dir / "storage"

    # -- sources ---------------------------------------------------------------------------------

    def sources(self) -> list[Path]:
        """The database first (it wins on duplicates), then each legacy session file."""
        found = [self.db] if self.db.is_file() else []
        session_root = self.storage / "session"
        if session_root.is_dir():
            found.extend(sorted(session_root.glob("*/*.json")))
        return found

    def signature(self, source: Path) -> Hashable | None:
        """The database with its WAL (writes land there first); a legacy session with its folders."""
        if source == self.db:
            main = file_signature(source)
            return None if main is None else (main, file_signature(Path(f"{source}-wal")))
        return self._legacy_signature(source)

    def _legacy_signature(self, source: Path) -> Hashable | None:
        own = file_signature(source)
        if own is None:
            return None
        # A message or part added changes its folder's mtime; the session file alone would not.
        parts: list[Hashable] = [own]
        try:
            entries = sorted(os.scandir(self.storage / "message" / source.stem), key=lambda e: e.name)
        except OSError:
            return tuple(parts)
        for entry in entries:
            try:
                st = entry.stat()
            except OSError:
                continue
            parts.append((entry.name, st.st_mtime_ns, st.st_size))
            parts.append(file_signature(self.storage / "part" / entry.name.removesuffix(".json")))
        return tuple(parts)

    # -- scanning --------------------------------------------------------------------------------

    def scan(self, source: Path) -> SourceScan:
        """Every top-level session of the database, or the one legacy session file."""
        if source == self.db:
            return SourceScan(sessions=tuple(self._scan_db(source)))
        info = self._legacy_info(source)
        if info is None or info.hidden:
            return SourceScan()
        return SourceScan(sessions=(self._scanned(info, self._legacy_messages(info.id), source),))

    def _scanned(self, info: _Info, msgs: list[_Msg], source: Path) -> ScannedSession:
        messages = _messages(msgs, {})
        span = TimeSpan()
        for moment in (info.created, info.updated, *(t for m in msgs for t in (m.created, m.updated))):
            span.add(from_epoch_ms(moment))
        first_prompt = next((m.text for m in messages if m.role == "user"), None)
        summary = SessionSummary(
            agent=self.agent,
            session_id=info.id,
            title=None if is_default_title(info.title) else info.title,
            project_path=info.directory,
            message_count=len(messages),
            started_at=span.first,
            last_activity_at=span.last,
            source_path=str(source.absolute()),
        )
        return ScannedSession(summary=summary, fallback_title=title_from_text(first_prompt))

    def _scan_db(self, db: Path) -> list[ScannedSession]:
        connection = connect_readonly(db)
        try:
            connection.row_factory = sqlite3.Row
            infos = [_db_info(row) for row in connection.execute("SELECT * FROM session")]
            rows = connection.execute(_LIST_SQL).fetchall()
        except sqlite3.Error as exc:
            raise SourceUnavailable(f"cannot read {db}: {exc}") from exc
        finally:
            connection.close()
        by_session: dict[str, dict[str, _Msg]] = {}
        for row in rows:
            msgs = by_session.setdefault(row["session_id"], {})
            msg = msgs.get(row["message_id"])
            if msg is None:
                msg = msgs[row["message_id"]] = _Msg(
                    row["message_id"], row["role"], row["created"], row["updated"]
                )
            if row["text"] is not None:
                msg.parts.append(
                    {
                        "type": "text",
                        "text": row["text"],
                        "synthetic": row["synthetic"],
                        "ignored": row["ignored"],
                    }
                )
        return [
            self._scanned(info, list(by_session.get(info.id, {}).values()), db)
            for info in infos
            if not info.hidden
        ]

    # -- legacy JSON tree ------------------------------------------------------------------------

    def _legacy_info(self, source: Path) -> _Info | None:
        data = read_json(source)
        if data is None:
            return None
        times = _as_dict(data.get("time"))
        return _Info(
            id=str(data.get("id") or source.stem),
            parent_id=data.get("parentID") or None,
            directory=data.get("directory") if isinstance(data.get("directory"), str) else None,
            title=data.get("title") if isinstance(data.get("title"), str) else None,
            created=times.get("created"),
            updated=times.get("updated"),
            archived=bool(times.get("archived")),
        )

    def _legacy_messages(self, session_id: str) -> list[_Msg]:
        msgs: list[_Msg] = []
        message_dir = self.storage / "message" / session_id
        if not message_dir.is_dir():
            return msgs
        for path in sorted(message_dir.glob("*.json")):
            data = read_json(path)
            if data is None:
                continue
            times = _as_dict(data.get("time"))
            msg = _Msg(
                id=str(data.get("id") or path.stem),
                role=data.get("role"),
                created=times.get("created"),
                updated=times.get("completed") or times.get("created"),
            )
            part_dir = self.storage / "part" / msg.id
            if part_dir.is_dir():
                msg.parts = [p for p in map(read_json, sorted(part_dir.glob("*.json"))) if p is not None]
            msgs.append(msg)
        return msgs

    # -- loading ---------------------------------------------------------------------------------

    def load(self, summary: SessionSummary) -> Transcript:
        """The session's prose turns, from wherever it was listed from."""
        source = Path(summary.source_path)
        dropped: dict[str, int] = {}
        if source == self.db.absolute() or source.name == DB_NAME:
            msgs = self._db_messages(source, summary.session_id)
        else:
            if not source.is_file():
                raise FileNotFoundError(source)
            msgs = self._legacy_messages(summary.session_id)
        return Transcript(summary=summary, messages=tuple(_messages(msgs, dropped)), dropped=dropped)

    def _db_messages(self, db: Path, session_id: str) -> list[_Msg]:
        if not db.is_file():
            raise FileNotFoundError(db)
        connection = connect_readonly(db)
        try:
            message_rows = connection.execute(
                "SELECT id, time_created, time_updated, data FROM message WHERE session_id = ?", (session_id,)
            ).fetchall()
            part_rows = connection.execute(
                "SELECT message_id, id, data FROM part"
                " WHERE message_id IN (SELECT id FROM message WHERE session_id = ?)",
                (session_id,),
            ).fetchall()
        except sqlite3.Error as exc:
            raise SourceUnavailable(f"cannot read {db}: {exc}") from exc
        finally:
            connection.close()
        msgs: dict[str, _Msg] = {}
        for message_id, created, updated, data in message_rows:
            role = _json_object(data).get("role")
            msgs[message_id] = _Msg(message_id, role if isinstance(role, str) else None, created, updated)
        for message_id, part_id, data in part_rows:
            if message_id in msgs:
                msgs[message_id].parts.append({**_json_object(data), "id": part_id})
        return list(msgs.values())


def _as_dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _json_object(data: object) -> dict[str, Any]:
    try:
        value = json_loads(data) if isinstance(data, str | bytes) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _db_info(row: sqlite3.Row) -> _Info:
    # ``SELECT *`` and lookups by name: columns come and go between OpenCode versions.
    keys = set(row.keys())

    def col(name: str) -> Any:
        return row[name] if name in keys else None

    return _Info(
        id=str(col("id")),
        parent_id=col("parent_id") or None,
        directory=col("directory"),
        title=col("title"),
        created=col("time_created"),
        updated=col("time_updated"),
        archived=col("time_archived") is not None,
    )
