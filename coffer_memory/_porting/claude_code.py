"""Claude Code's own memory: ``CLAUDE.md`` files and the auto-memory folders.

Where Claude Code keeps it (``$CLAUDE_CONFIG_DIR``, else ``~/.claude``):

- ``CLAUDE.md`` and ``rules/*.md``: the user's instructions for every project -> global rules lane;
- ``projects/<encoded>/memory/``: auto memory, written by Claude itself. ``MEMORY.md`` is an index
  of ``- [Title](file.md) — hook`` lines; each other ``*.md`` is one memory with ``name``,
  ``description`` and ``type`` (user | feedback | project | reference; top level or under
  ``metadata``) frontmatter -> one fact each in the project's store. ``<encoded>`` is the project's
  canonical git root with every character outside ``[A-Za-z0-9]`` replaced by ``-`` (lossy; longer
  than 200 characters it is cut and a hash added), so the project is found by encoding the roots
  coffer knows and the ``cwd`` of the transcripts beside the folder.

A project's instruction files in the repository itself (``./CLAUDE.md``...) are read by the
``rules`` source.
"""

from __future__ import annotations

import re
from pathlib import Path

from .._errors import InvalidImport
from .._store.files import FactParseError, clean_tag, split_frontmatter
from .._store.paths import GLOBAL_STORE
from .common import Plan, StoreResolver, content_sha, first_heading, read_source, source_text, walk
from .models import FactItem, Item, Provenance, RuleItem, Skipped
from .rules_files import rule_item

KIND = "claude-code"
INDEX = "MEMORY.md"
MAX_ENCODED = 200
_POINTER = re.compile(r"^\s*[-*]\s*\[[^\]]*\]\([^)]*\)")


def encode_path(path: str) -> str:
    """Claude Code's folder name for a project path (the hash tail of very long names is left out)."""
    return re.sub(r"[^A-Za-z0-9]", "-", path)[:MAX_ENCODED]


def looks_like(root: Path) -> bool:
    """Whether a folder is a Claude Code config folder, a project folder or a memory folder in it."""
    if _project_dir(root) is not None:
        return True
    projects = root / "projects"
    if not projects.is_dir():
        return False
    if root.name == ".claude" or (root / "settings.json").is_file():
        return True
    return any((p / "memory").is_dir() for p in projects.iterdir())


def _project_dir(root: Path) -> Path | None:
    """``projects/<encoded>`` for a path that is it or its ``memory/`` folder."""
    if root.name == "memory" and root.parent.parent.name == "projects":
        return root.parent
    if (root / "memory").is_dir() and root.parent.name == "projects":
        return root
    return None


def _memory_fact(path: Path, memory_dir: Path, store: str, max_bytes: int) -> FactItem | Skipped:
    data, mtime = read_source(path, max_bytes)
    text = source_text(data)
    # The project folder is part of the id: ``--store`` may send several projects to one store.
    rel = f"{memory_dir.parent.name}/{path.relative_to(memory_dir).as_posix()}"
    try:
        meta, body = split_frontmatter(text)
    except FactParseError as exc:
        return Skipped(source=str(path), reason=str(exc))
    if path.name == INDEX:  # the index: keep what is more than pointers to the other files
        body = "\n".join(line for line in body.splitlines() if not _POINTER.match(line))
        if not any(line.strip() and not line.lstrip().startswith("#") for line in body.splitlines()):
            return Skipped(source=str(path), reason="only pointers to the other memory files")
    body = body.strip("\n")
    if not body.strip():
        return Skipped(source=str(path), reason="empty memory")
    nested = meta.get("metadata")
    kind = meta.get("type") or (nested.get("type") if isinstance(nested, dict) else None)
    name = meta.get("name")
    title = first_heading(body) or (name if isinstance(name, str) and name.strip() else path.stem)
    if path.name == INDEX:
        title = "Claude Code memory notes"
    description = meta.get("description")
    tags = [t for t in (clean_tag(KIND), clean_tag(kind)) if t]
    return FactItem(
        store=store,
        title=" ".join(title.split())[:200],
        body=body,
        description=" ".join(description.split())[:200]
        if isinstance(description, str) and description.strip()
        else None,
        tags=tuple(tags),
        created_at=mtime,
        actor="agent",
        provenance=Provenance(source=KIND, path=str(path), original_id=rel, sha256=content_sha(data)),
    )


def _project(project: Path, resolver: StoreResolver, store: str | None, max_bytes: int) -> Plan:
    memory_dir = project / "memory"
    files = list(walk(memory_dir, (".md",))) if memory_dir.is_dir() else []
    if not files:
        return [], []
    target = store or resolver.claude_project_store(project.name, project)
    if target is None:
        reason = f"no project found for {project.name} (pass --store to choose one)"
        return [], [Skipped(source=str(memory_dir), reason=reason)]
    items: list[Item] = []
    skipped: list[Skipped] = []
    for path in files:
        item = _memory_fact(path, memory_dir, target, max_bytes)
        (items if isinstance(item, FactItem) else skipped).append(item)  # type: ignore[arg-type]
    return items, skipped


def plan(root: Path, resolver: StoreResolver, store: str | None, max_bytes: int) -> Plan:
    """Everything Claude Code remembers under ``root`` (its config folder, one project's folder or
    one memory folder); ``store`` sends it all to one store instead of the matching ones."""
    project = _project_dir(root)
    if project is not None:
        return _project(project, resolver, store, max_bytes)
    if not (root / "projects").is_dir() and not (root / "CLAUDE.md").is_file():
        raise InvalidImport("unknown_format", f"{root} is not a Claude Code folder", source=str(root))
    items: list[Item] = []
    skipped: list[Skipped] = []
    user_store = store or GLOBAL_STORE
    user_files = (
        [(root / "CLAUDE.md", "claude-code-user", "~/.claude/CLAUDE.md")]
        if (root / "CLAUDE.md").is_file()
        else []
    )
    if (root / "rules").is_dir():
        for path in walk(root / "rules", (".md",)):
            rel = path.relative_to(root / "rules").with_suffix("").as_posix()
            user_files.append((path, f"claude-code-user-{rel}", f"~/.claude/rules/{rel}.md"))
    for path, slug, heading in user_files:
        rule = rule_item(path, slug, heading, user_store, max_bytes, kind=KIND)
        (items if isinstance(rule, RuleItem) else skipped).append(rule)  # type: ignore[arg-type]
    projects = root / "projects"
    if projects.is_dir():
        for folder in sorted(p for p in projects.iterdir() if p.is_dir() and not p.is_symlink()):
            more, left = _project(folder, resolver, store, max_bytes)
            items += more
            skipped += left
    return items, skipped
