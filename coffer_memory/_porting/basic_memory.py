"""A basic-memory project folder: Markdown notes with ``title``/``type``/``tags``/``permalink`` frontmatter.

Observations (``- [category] text #tag``) and relations (``- relates_to [[Other]]``) are kept as
they are written: they read well as Markdown. Each note becomes one fact; its ``permalink`` (else
its path in the folder) is the original id; its tags and a ``type`` other than ``note`` become tags.
"""

from __future__ import annotations

from pathlib import Path

from .._store.files import FactParseError, clean_tag, file_tags, parse_time, split_frontmatter
from .common import Plan, content_sha, first_heading, read_source, source_text, walk
from .models import FactItem, Item, Provenance, Skipped

KIND = "basic-memory"


def looks_like(root: Path) -> bool:
    """Whether a folder holds basic-memory notes (a note with a ``permalink`` in its frontmatter)."""
    for count, path in enumerate(walk(root, (".md",))):
        if count >= 50:
            break
        try:
            head = path.read_bytes()[:4096].decode("utf-8", "replace")
        except OSError:
            continue
        if head.startswith("---") and "\npermalink:" in head:
            return True
    return False


def plan(root: Path, store: str, max_bytes: int) -> Plan:
    """One fact per note of the folder, for ``store``."""
    items: list[Item] = []
    skipped: list[Skipped] = []
    for path in walk(root, (".md",)):
        rel = path.relative_to(root).as_posix()
        data, mtime = read_source(path, max_bytes)
        try:
            meta, body = split_frontmatter(source_text(data))
        except FactParseError as exc:
            skipped.append(Skipped(source=str(path), reason=str(exc)))
            continue
        body = body.strip("\n")
        if not body.strip():
            skipped.append(Skipped(source=str(path), reason="empty note"))
            continue
        title = meta.get("title")
        if not isinstance(title, str) or not title.strip():
            title = first_heading(body) or path.stem
        tags = list(file_tags(meta.get("tags")))
        note_type = clean_tag(meta.get("type"))
        if note_type and note_type != "note" and note_type not in tags:
            tags.append(note_type)
        permalink = meta.get("permalink")
        original = permalink if isinstance(permalink, str) and permalink.strip() else rel
        items.append(
            FactItem(
                store=store,
                title=" ".join(title.split())[:200],
                body=body,
                tags=tuple(tags),
                created_at=parse_time(meta.get("created")) or mtime,
                provenance=Provenance(
                    source=KIND, path=str(path), original_id=original, sha256=content_sha(data)
                ),
            )
        )
    return items, skipped
