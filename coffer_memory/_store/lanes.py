"""File formats of the lanes beside the facts: journal, handoff, rules, log, INDEX.md, tombstones.

Only formats and raw file operations live here; paths come from ``paths.StorePaths`` and
locking, indexing and auditing from the lanes service.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from .._localtime import local_stamp
from .._models import HandoffScene, JournalEntry
from .files import atomic_write, format_time, parse_time, read_bytes, yaml_scalar
from .paths import INDEX_MD, StorePaths

RULES_HEADER = "# Rules\n"
LOG_HEADER = "# Consolidation log\n\nOne line per change to this store by the organizer, and per lane file deleted.\n\n"


def append_bytes(path: Path, data: bytes, *, header: bytes = b"") -> bool:
    """Append durably (``O_APPEND`` + fsync); a missing file is created atomically with ``header``.

    Returns True when the file was created. Callers hold the store lock.
    """
    if not os.path.lexists(path):
        try:
            atomic_write(path, header + data, overwrite=False)
            return True
        except FileExistsError:
            pass
    # O_NOFOLLOW: a symlink planted in a lane must not redirect the append outside the store.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
    try:
        st = os.fstat(fd)
        if st.st_nlink == 1:
            append_whole(fd, data, st.st_size)
            return False
    finally:
        os.close(fd)
    # A file with other names (a hard link: a ``cp -al`` backup, a sync tool's copy) is written
    # whole under a new name, as every other write is: appended in place, the backup changed too.
    atomic_write(path, read_bytes(path)[0] + data, overwrite=True)
    return False


def append_whole(fd: int, data: bytes, start: int) -> None:
    """Append all of ``data`` to ``fd`` (opened ``O_APPEND``, ``start`` bytes long) and fsync;
    on any failure the file is cut back to ``start``, so a full disk never leaves half an entry."""
    try:
        view = memoryview(data)
        while view:  # a short write is not an error: write the rest
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.ftruncate(fd, start)
        raise


def journal_header(period: str) -> bytes:
    """The frontmatter a journal day file starts with."""
    return (
        f"---\nkind: journal\ntitle: {yaml_scalar('Journal ' + period)}\n"
        f"description: {yaml_scalar('Episodes recorded on ' + period)}\n---\n"
    ).encode()


def journal_entry(
    text: str, *, at: datetime, actor: str, origin_session_id: str | None, part: str | None = None
) -> bytes:
    """One journal entry: a heading with time (local, with its offset: ``_localtime``), actor,
    session and part, then the text.

    ``part`` names a distilled entry for good (its session, the turns it came from and its place
    in the model's answer): a distillation run again after a kill finds it and writes it once."""
    parts = [local_stamp(at), actor]
    if origin_session_id:
        parts.append(f"session {origin_session_id}")
    if part:
        parts.append(f"part {part}")
    return f"\n## {' · '.join(parts)}\n\n{text.strip()}\n".encode()


_ENTRY_HEADING = re.compile(r"^## .*$", re.MULTILINE)
_SESSION_TAG = re.compile(r" · session (\S+)(?: · part \S+)?$")
# The heading journal_entry writes: time, actor, and the session and part when there are.
_COFFER_HEADING = re.compile(r"^## (\S+) · (\w+)(?: · session (\S+))?(?: · part \S+)?[ \t]*$", re.MULTILINE)
_PART_TAG = re.compile(r"^## \S+ · \w+(?: · session \S+)? · part (\S+)[ \t]*$", re.MULTILINE)


def journal_parts(text: str) -> set[str]:
    """The ``part`` names of the entries of a journal day file."""
    return set(_PART_TAG.findall(text))


def journal_entries(text: str) -> list[JournalEntry]:
    """The entries of a journal day file, in order, each with its time, actor and session.

    Only headings coffer writes start an entry; any other text (a hand-written ``##`` section)
    stays in the entry before it, and text before the first entry is not an entry.
    """
    found = []
    for match in _COFFER_HEADING.finditer(text):
        at = parse_time(match.group(1))
        if at is not None:
            found.append((match, at))
    entries = []
    for i, (match, at) in enumerate(found):
        end = found[i + 1][0].start() if i + 1 < len(found) else len(text)
        entries.append(
            JournalEntry(
                at=at,
                actor=match.group(2),
                origin_session_id=match.group(3),
                text=text[match.end() : end].strip(),
            )
        )
    return entries


def journal_sessions(text: str) -> list[str]:
    """The ``origin_session_id`` of every journal entry that has one, in order, without repeats."""
    return list(dict.fromkeys(e.origin_session_id for e in journal_entries(text) if e.origin_session_id))


def drop_session_entries(text: str, session_id: str) -> tuple[str, int]:
    """``text`` without the entries whose heading names ``session_id``, and how many went.

    An entry runs from its ``## `` heading to the next one; distilled entries demote their
    own headings (see ``demote_headings``) so an entry never contains a ``## `` line.
    """
    # Each entry starts at the blank line written before its heading.
    starts = [
        h.start() - 1 if text[max(h.start() - 2, 0) : h.start()] == "\n\n" else h.start()
        for h in _ENTRY_HEADING.finditer(text)
    ]
    headings = list(_ENTRY_HEADING.finditer(text))
    if not headings:
        return text, 0
    kept, removed = [text[: starts[0]]], 0
    for i, heading in enumerate(headings):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        tag = _SESSION_TAG.search(heading.group(0))
        if tag and tag.group(1) == session_id:
            removed += 1
        else:
            kept.append(text[starts[i] : end])
    return "".join(kept), removed


def demote_headings(markdown: str) -> str:
    """Level-1 and level-2 headings pushed down to level 3, so journal entries stay separable."""
    return re.sub(r"^#{1,2}(?=\s)", "###", markdown, flags=re.MULTILINE)


def render_handoff(branch: str, text: str, *, updated_at: datetime, head: str | None) -> bytes:
    """A handoff scene: frontmatter (branch, updated_at in local time with its offset, head) and
    free Markdown."""
    return (
        f"---\nbranch: {yaml_scalar(branch)}\nupdated_at: {local_stamp(updated_at)}\n"
        f"head: {yaml_scalar(head)}\n---\n\n{text.strip()}\n"
    ).encode()


def read_handoff(path: Path) -> HandoffScene | None:
    """Parse a handoff file; None when it is unreadable."""
    import frontmatter  # with PyYAML, loaded when a lane file is first parsed, not at start-up
    import yaml

    try:
        data, st = read_bytes(path)
        post = frontmatter.loads(data.decode("utf-8", errors="replace"))
    except (OSError, yaml.YAMLError, ValueError):
        return None
    meta: dict[str, Any] = post.metadata if isinstance(post.metadata, dict) else {}
    updated = parse_time(meta.get("updated_at")) or datetime.fromtimestamp(st.st_mtime).astimezone()
    head = meta.get("head")
    return HandoffScene(
        branch=str(meta.get("branch") or path.stem),
        text=str(post.content).strip(),
        updated_at=updated,
        head=str(head) if head else None,
        path=path,
    )


def rule_line(text: str) -> bytes:
    """A rule as a Markdown list item (continuation lines indented)."""
    lines = text.strip().splitlines()
    return ("- " + "\n  ".join(line.rstrip() for line in lines) + "\n").encode()


def log_line(at: datetime, action: str, detail: str) -> bytes:
    """One human-readable changelog line."""
    return f"- {format_time(at)} {action}: {' '.join(detail.split())}\n".encode()


def topic_files(sp: StorePaths) -> list[Path]:
    """Topic documents: ``knowledge/*.md`` outside the inbox, INDEX.md excluded."""
    if not sp.knowledge.is_dir():
        return []
    return sorted(
        p
        for p in sp.knowledge.glob("*.md")
        if p.is_file() and p.name != INDEX_MD and not p.name.startswith(".")
    )


def render_index(entries: Iterable[tuple[str, str, str]], inbox_count: int) -> bytes:
    """INDEX.md from (file name, title, description) of each topic document."""
    lines = [
        "# Index",
        "",
        "Generated by coffer from the topic documents of this folder; edits here are overwritten.",
        "",
    ]
    rows = [f"- [{title}]({name})" + (f": {desc}" if desc else "") for name, title, desc in entries]
    lines += rows or ["(no topic documents yet)"]
    if inbox_count:
        lines += ["", f"{inbox_count} item(s) in inbox/ wait to be organized."]
    return ("\n".join(lines) + "\n").encode()


def tombstone(data: bytes, *, replaced_by: str | None, at: datetime) -> bytes:
    """A retired version: the old file with ``superseded_by`` / ``superseded_at`` added to its frontmatter."""
    import frontmatter

    post = frontmatter.loads(data.decode("utf-8", errors="replace"))
    post.metadata["superseded_by"] = replaced_by
    post.metadata["superseded_at"] = format_time(at)
    return (frontmatter.dumps(post, sort_keys=False) + "\n").encode()
