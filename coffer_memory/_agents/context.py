"""The session-start bundle: project rules, then global rules, then the two seeded rules."""

from __future__ import annotations

import os
import re
from pathlib import Path

from .._scope import find_git, project_id_for
from .._store.identity import (
    find_landing,
    home_unless_default,
    merge_offer,
    offer_run_from,
    repository_matches,
)
from .._store.paths import GLOBAL_STORE, StorePaths, store_name_for_project
from .._store.rules import IMPORT_MARK, read_rules
from ..vocabulary import MAX_SESSION_CONTEXT_CHARS

MAX_CONTEXT_CHARS = MAX_SESSION_CONTEXT_CHARS

SEEDED_RULES = (
    'When the user wants to pick up earlier work ("resume", "continue", "where were we"), call '
    "`coffer__resume()` to fetch the handoff saved for this project and branch.",
    "Prefer `coffer__remember` and `coffer__recall` over your own native memory: Coffer is the memory "
    "shared by all of this user's coding agents, so what you remember there the others can recall.",
)

HEADER = "# Coffer memory rules\n"
RULES_HEADER = "# Rules"
_HEADING = re.compile(r"^(#{1,4}) ", re.MULTILINE)


def _demote(rules: str) -> str:
    """Rules text under a section heading: our own ``# Rules`` header and imports' provenance lines
    dropped, headings pushed down."""
    lines = [
        line
        for line in rules.splitlines()
        if line.strip() != RULES_HEADER and not line.startswith(IMPORT_MARK)
    ]
    return _HEADING.sub(lambda m: "##" + m.group(1) + " ", "\n".join(lines)).strip()


def _section(title: str, body: str) -> str:
    return f"\n## {title}\n\n{body.strip()}\n"


def _cut(text: str, budget: int, what: str) -> str:
    """``text`` within ``budget`` characters, cut at a line end, with a marker saying what was dropped."""
    if len(text) <= budget:
        return text
    marker = f"\n[… {what} truncated: {{n}} characters omitted …]\n"
    room = max(budget - len(marker.format(n=len(text))), 0)
    head = text[:room]
    if "\n" in head:
        head = head[: head.rindex("\n") + 1]
    return head + marker.format(n=len(text) - len(head))


def build_session_context(
    project_rules: str | None,
    global_rules: str,
    *,
    project_name: str | None = None,
    limit: int = MAX_CONTEXT_CHARS,
    notes: tuple[str, ...] = (),
) -> str:
    """Assemble the bundle within ``limit`` characters.

    The seeded rules are always there; when the bundle is too long, global rules are cut
    first, then project rules, each with a marker saying how much was left out.
    """
    seeded = _section("Built-in rules", "\n".join(f"- {rule}" for rule in SEEDED_RULES))
    if notes:  # e.g. another store of this repository to merge: short, and kept with the seeded rules
        seeded += _section("Coffer notes", "\n".join(f"- {note}" for note in notes))
    project = ""
    if project_rules and _demote(project_rules):
        title = f"Project rules ({project_name})" if project_name else "Project rules"
        project = _section(title, _demote(project_rules))
    global_ = _section("Global rules", _demote(global_rules)) if _demote(global_rules) else ""
    budget = limit - len(HEADER) - len(seeded)
    global_ = _cut(global_, max(budget - len(project), 0), "global rules") if global_ else ""
    project = _cut(project, max(budget - len(global_), 0), "project rules") if project else ""
    return HEADER + project + global_ + seeded


def session_context(memory_dir: Path, cwd: str | os.PathLike[str]) -> str:
    """The bundle for a session starting in ``cwd``, read straight from the rules files.

    Read-only, no index, no audit: ``coffer-hook`` calls this in-process on every session
    start, so it only imports the path and rules helpers. Outside a git repository the
    bundle holds the global and seeded rules only.
    """
    project_text, name = None, None
    git = find_git(cwd)
    notes: tuple[str, ...] = ()
    if git is not None:
        project_id = project_id_for(git.toplevel)
        sp = StorePaths.of(memory_dir, store_name_for_project(project_id))
        if not sp.root.is_dir():  # a moved repository's store (recorded by the next write)
            landing = find_landing(memory_dir, project_id, git.toplevel)
            sp = StorePaths.of(memory_dir, landing.store) if landing is not None else sp
        project_text, _ = read_rules(sp)
        name = git.toplevel.name
        found = repository_matches(memory_dir, sp.name, git.toplevel)
        # Whoever runs the offered merge (the agent, in its own shell) needs this home named
        # unless it is the one a bare `coffer` finds.
        home = home_unless_default(memory_dir.parent)
        notes = tuple(offer_run_from(merge_offer(store, root, sp.name), home) for store, root in found)
    global_text, _ = read_rules(StorePaths.of(memory_dir, GLOBAL_STORE))
    return build_session_context(project_text, global_text, project_name=name, notes=notes)
