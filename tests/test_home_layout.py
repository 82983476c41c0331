"""The home layout is named in one module, and the docs' home tree says the same."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import coffer_memory
from coffer_memory import _home as home

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(coffer_memory.__file__).parent


def docs_home_entries(markdown: str) -> set[str]:
    """The top-level entries of the home tree in the "On-disk layout" section."""
    section = markdown.split("## On-disk layout", 1)[1]
    tree = section.split("```text", 1)[1].split("```", 1)[0]
    entries = set()
    for line in tree.splitlines():
        top = re.match(r"^[├└]── (\S+)", line)
        if top:
            entries.add(top.group(1))
    return entries


def test_the_docs_home_tree_lists_every_entry_of_the_layout() -> None:
    documented = docs_home_entries((ROOT / "docs" / "concepts.md").read_text(encoding="utf-8"))
    assert documented == set(home.ENTRIES)


def test_the_tree_check_notices_a_missing_entry() -> None:
    text = "## On-disk layout\n\n```text\n~/.coffer/\n├── config.toml   x\n└── memory/   y\n```\n"
    assert docs_home_entries(text) == {"config.toml", "memory/"}


def test_no_other_module_spells_a_home_file_name() -> None:
    names = {home.CONFIG_TOML, home.INDEX_DB, home.LEDGER_DB, home.AGENTS_JSON, home.HOOK_LOG}
    names |= {home.LOCKS_DIR, home.LOGS_DIR}
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_home.py" or (
            path.relative_to(PACKAGE).parts[0] == "_agents" and path.name == "specs.py"
        ):
            continue  # specs.py names Codex's own config.toml, not coffer's
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in names:
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.value!r}")
    assert offenders == []
