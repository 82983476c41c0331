"""Agents' instruction files into the rules lane: CLAUDE.md, AGENTS.md and Cursor rules.

From a repository folder: ``CLAUDE.md``, ``.claude/CLAUDE.md``, ``CLAUDE.local.md``,
``.claude/rules/**/*.md``, ``AGENTS.md``, ``.cursorrules`` and ``.cursor/rules/**/*.mdc`` (their
``description``/``globs``/``alwaysApply`` frontmatter becomes a line under the heading). Each
file becomes ``rules/<kind>-<name>.md`` of the store, headed by its provenance (an HTML comment,
so the rules bundle an agent reads stays plain Markdown).
"""

from __future__ import annotations

from pathlib import Path

from .._store.files import FactParseError, split_frontmatter
from .._store.lanes import demote_headings
from .._store.paths import slugify
from .common import Plan, content_sha, read_source, source_text, walk
from .models import Item, Provenance, RuleItem, Skipped

KIND = "rules"
# (path in the repository, slug, heading): the files read from the top of a repository.
TOP_FILES = (
    ("CLAUDE.md", "claude-md", "CLAUDE.md"),
    (".claude/CLAUDE.md", "claude-dir-md", ".claude/CLAUDE.md"),
    ("CLAUDE.local.md", "claude-local-md", "CLAUDE.local.md"),
    ("AGENTS.md", "agents-md", "AGENTS.md"),
    (".cursorrules", "cursorrules", ".cursorrules"),
)
RULE_DIRS = ((".claude/rules", (".md",), "claude-rules"), (".cursor/rules", (".mdc", ".md"), "cursor"))


def looks_like(root: Path) -> bool:
    """Whether a folder holds any of the instruction files this reader knows."""
    return any((root / rel).is_file() for rel, _, _ in TOP_FILES) or any(
        (root / d).is_dir() for d, _, _ in RULE_DIRS
    )


def is_rules_file(path: Path) -> bool:
    """Whether a single file is one this reader knows (by name)."""
    return path.name in {Path(rel).name for rel, _, _ in TOP_FILES} or path.suffix == ".mdc"


def _cursor_text(path: Path, text: str) -> str:
    """A Cursor rule's body under a heading that says when it applies (from its frontmatter)."""
    try:
        meta, body = split_frontmatter(text)
    except FactParseError:
        meta, body = {}, text
    when = []
    if meta.get("alwaysApply") is True:
        when.append("always applied")
    globs = meta.get("globs")
    if isinstance(globs, list):
        globs = ", ".join(str(g) for g in globs)
    if isinstance(globs, str) and globs.strip():
        when.append(f"applies to {globs.strip()}")
    if isinstance(meta.get("description"), str) and meta["description"].strip():
        when.append(str(meta["description"]).strip())
    head = f"## {path.stem} (Cursor rule)"
    return head + ("\n\n" + "; ".join(when) if when else "") + "\n\n" + demote_headings(body.strip())


def rule_item(
    path: Path, slug: str, heading: str, store: str, max_bytes: int, *, kind: str = KIND
) -> RuleItem | Skipped:
    """One instruction file as a rules file of ``store`` (or why it is skipped)."""
    data, _ = read_source(path, max_bytes)
    text = source_text(data)
    if not text.strip():
        return Skipped(source=str(path), reason="empty file")
    if path.suffix == ".mdc":
        rendered = _cursor_text(path, text)
    else:
        rendered = f"## {heading} (imported)\n\n" + demote_headings(text.strip())
    return RuleItem(
        store=store,
        slug=slugify(slug),
        text=rendered,
        provenance=Provenance(source=kind, path=str(path), original_id=heading, sha256=content_sha(data)),
    )


def plan(root: Path, store: str, max_bytes: int) -> Plan:
    """The instruction files of a repository folder (or one such file) as rules files of ``store``."""
    found: list[tuple[Path, str, str]] = []
    if root.is_file():
        name = root.name
        slug = next((s for rel, s, _ in TOP_FILES if Path(rel).name == name), f"cursor-{root.stem}")
        found.append((root, slug, name))
    else:
        for rel, slug, heading in TOP_FILES:
            if (root / rel).is_file() and not (root / rel).is_symlink():
                found.append((root / rel, slug, heading))
        for folder, suffixes, prefix in RULE_DIRS:
            if (root / folder).is_dir():
                for path in walk(root / folder, suffixes):
                    rel = path.relative_to(root / folder).with_suffix("").as_posix()
                    found.append(
                        (path, f"{prefix}-{rel}", f"{folder}/{path.relative_to(root / folder).as_posix()}")
                    )
    items: list[Item] = []
    skipped: list[Skipped] = []
    for path, slug, heading in found:
        item = rule_item(path, slug, heading, store, max_bytes)
        (items if isinstance(item, RuleItem) else skipped).append(item)  # type: ignore[arg-type]
    return items, skipped
