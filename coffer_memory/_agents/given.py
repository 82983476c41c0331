"""What ``coffer-hook`` gave each agent session, so a resumed session is not given its rules twice.

Checked with the real CLIs (``tests/test_agents_real_*.py``): the agents run SessionStart with a
``source`` of ``startup``, ``resume``, ``clear`` or ``compact``, and Claude Code 2.1.332 with
``fork`` for ``--fork-session``.

- ``resume`` (``claude --resume`` / ``--continue``, ``codex exec resume``, ``codex resume``): the
  conversation comes back whole, with the bundle given earlier still in it. Codex adds whatever
  the hook prints again, so every resume carried the rules once more; Claude Code drops a second
  copy only when it is identical, and added the whole bundle again when a rule had changed.
- ``compact`` (``/compact``, automatic compaction) and ``clear`` (``/clear``, a new session id):
  the earlier context is gone, and the rules must come back whole.

So each bundle given is recorded per (agent, session id) in ``<home>/cache/`` (the core's atomic
write, never in the agent's folders), and on ``resume`` the hook gives nothing when the rules are
unchanged, a short note of what changed when they differ, and the whole bundle when it has no
record of that session (or the note would be longer than the bundle).

A fork (``claude --resume <id> --fork-session``, ``--continue --fork-session``) copies the
conversation, the rules in it, under a new session id. Claude Code 2.1.332 starts it with ``fork``,
the fork's own id and a transcript it has not written yet: nothing says what the copy holds, so
``fork`` gets the whole bundle (Claude Code drops an identical copy itself), recorded under the
fork's id. Claude Code 2.1.197 ran its SessionStart as a ``resume`` of the *parent* (the parent's
id and transcript); only its SessionEnd named the fork. Such a fork resumed or forked again later
would find no record of its own and get the whole bundle again. So the bundle given on a start is
also recorded under the transcript's *root* (the id of its first message, which a resume and a
fork keep), and a SessionEnd whose session has no record of its own inherits the record of its
root: the fork then counts as holding what its start gave it, as a resumed session does.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

from .._jsontext import loads as json_loads
from .._store.scan import open_regular

RECORD_PREFIX = "hook-session-"
RECORD_MAX_AGE_SECONDS = 30 * 24 * 3600
"""A record unused this long is removed: a session resumed after that gets the whole bundle."""
MAX_RECORD_BYTES = 256 * 1024
MAX_ROOT_LINES = 64
"""The first message of a transcript is among its first lines (after mode and queue lines)."""
MAX_ROOT_BYTES = 1 << 20
"""Read no further looking for it: the hook has a deadline of a few seconds."""
ROOT_KEY = "root:"
RESUME = "resume"
NOTE_HEADER = "# Coffer memory rules: changed since they were given earlier in this session\n"
NOTE_INTRO = (
    "The rules below changed since the Coffer memory rules earlier in this conversation; "
    "where they differ, these win."
)


def record_name(agent: str, session_id: str) -> str:
    """The cache file name of one session's record (the id hashed: it is the agent's string)."""
    digest = hashlib.sha256(f"{agent}\0{session_id}".encode()).hexdigest()[:40]
    return f"{RECORD_PREFIX}{digest}.json"


def load_given(home: Path, agent: str, session_id: str) -> str | None:
    """The bundle last given to this session, or None when there is no readable record."""
    from .._store.durable import home_cache_path

    try:
        with home_cache_path(home, record_name(agent, session_id)).open("rb") as handle:
            record = json_loads(handle.read(MAX_RECORD_BYTES))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("session_id") != session_id:
        return None
    bundle = record.get("bundle")
    return bundle if isinstance(bundle, str) else None


def save_given(home: Path, agent: str, session_id: str, bundle: str, *, prune: bool) -> None:
    """Record ``bundle`` as what this session has now (atomic, 0600); with ``prune``, also remove
    records unused for ``RECORD_MAX_AGE_SECONDS``."""
    from .._store.durable import prune_home_cache, write_home_cache

    record = {"agent": agent, "session_id": session_id, "bundle": bundle}
    write_home_cache(home, record_name(agent, session_id), json.dumps(record, ensure_ascii=False).encode())
    if prune:
        prune_home_cache(home, RECORD_PREFIX, RECORD_MAX_AGE_SECONDS)


def transcript_root(path: str | None) -> str | None:
    """The id of a JSONL transcript's first message (``uuid`` with no ``parentUuid``), or None.

    A resumed session appends to its file and a forked one copies it: both keep this id."""
    if not path:
        return None
    try:
        # Only a regular file: a FIFO named in the payload blocked the hook on open until the
        # agent's deadline, and the session started without its rules.
        with open_regular(path) as handle:
            for _ in range(MAX_ROOT_LINES):
                line = handle.readline(MAX_RECORD_BYTES)
                if not line or handle.tell() > MAX_ROOT_BYTES:
                    return None
                if b'"uuid"' not in line:
                    continue
                try:
                    row = json_loads(line)
                except ValueError:  # a line longer than the read, or one being written
                    continue
                if isinstance(row, dict) and row.get("parentUuid") is None:
                    uuid = row.get("uuid")
                    return uuid if isinstance(uuid, str) and uuid else None
    except OSError:
        return None
    return None


def save_root_given(home: Path, agent: str, transcript: str | None, bundle: str) -> None:
    """Record ``bundle`` under the root of ``transcript`` too (for forks of it, see above)."""
    root = transcript_root(transcript)
    if root is not None:
        save_given(home, agent, ROOT_KEY + root, bundle, prune=False)


def inherit_given(home: Path, agent: str, session_id: str, transcript: str | None) -> bool:
    """At a session's end: a session with no record of its own (a fork) takes its root's record.
    True when a record was written."""
    if load_given(home, agent, session_id) is not None:
        return False
    root = transcript_root(transcript)
    bundle = None if root is None else load_given(home, agent, ROOT_KEY + root)
    if bundle is None:
        return False
    save_given(home, agent, session_id, bundle, prune=False)
    return True


def _lines(bundle: str) -> list[tuple[str, str]]:
    """Each non-blank line of a bundle below its top header, with the ``## `` section it is in."""
    section, out = "", []
    for line in bundle.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        elif line.strip() and not line.startswith("# "):
            out.append((section, line))
    return out


def _listing(title: str, lines: list[tuple[str, str]]) -> str:
    parts, section = [f"\n## {title}\n"], None
    for where, line in lines:
        if where != section:
            section = where
            parts.append(f"\n### {where}\n\n" if where else "\n")
        parts.append(line + "\n")
    return "".join(parts)


def changes_note(before: str, after: str) -> str:
    """A short note of the lines ``after`` adds to ``before`` and those it drops, by section."""
    old, new = _lines(before), _lines(after)
    kept = Counter(old) & Counter(new)
    added, removed = [], []
    for pair in new:
        if kept[pair]:
            kept[pair] -= 1
        else:
            added.append(pair)
    kept = Counter(old) & Counter(new)
    for pair in old:
        if kept[pair]:
            kept[pair] -= 1
        else:
            removed.append(pair)
    note = NOTE_HEADER + "\n" + NOTE_INTRO + "\n"
    if added:
        note += _listing("New or changed", added)
    if removed:
        note += _listing("No longer in force", removed)
    return note


def to_give(source: str | None, bundle: str, given: str | None) -> str:
    """What to print for a session starting from ``source`` that was last given ``given`` (None:
    no record): the bundle, a note of what changed, or "" (nothing)."""
    if source != RESUME or given is None:
        return bundle
    if given == bundle:
        return ""
    note = changes_note(given, bundle)
    return note if len(note) < len(bundle) else bundle
