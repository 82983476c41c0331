"""Reading the rules lane: kept apart from ``lanes`` so that ``coffer-hook`` can read rules
without importing the YAML and frontmatter stack."""

from __future__ import annotations

from pathlib import Path

from .paths import StorePaths

__all__ = ["read_rules", "rules_files"]


def rules_files(sp: StorePaths) -> list[Path]:
    """``rules/rules.md`` first, then the per-topic rules files by name."""
    if not sp.rules.is_dir():
        return []
    files = sorted(p for p in sp.rules.glob("*.md") if p.is_file() and not p.name.startswith("."))
    main = sp.rules_file()
    return ([main] if main in files else []) + [p for p in files if p != main]


def read_rules(sp: StorePaths) -> tuple[str, list[Path]]:
    """Every rules file's text, concatenated in reading order."""
    files = rules_files(sp)
    texts = []
    for path in files:
        try:
            texts.append(path.read_text(encoding="utf-8", errors="replace").strip())
        except OSError:
            continue
    return "\n\n".join(t for t in texts if t), files
