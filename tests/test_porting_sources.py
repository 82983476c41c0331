"""Imports from other tools, with fixtures built here in their real formats: Claude Code's memory,
CLAUDE.md / AGENTS.md / Cursor rules, the MCP memory server's memory.jsonl, a basic-memory folder."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from coffer_memory import InvalidImport, MemoryRejected, MemoryService, Settings
from coffer_memory._cli import main
from coffer_memory._porting.claude_code import encode_path
from coffer_memory._store.files import parse_fact
from coffer_memory._store.paths import GLOBAL_STORE
from tests.conftest import make_repo
from tests.test_porting import TOKEN, tree_hash

# -- Claude Code -------------------------------------------------------------------------------
DEBUGGING = """---
name: flaky-integration-tests
description: The integration suite needs the fake clock; without it two tests flake
metadata:
  type: feedback
---

Run the integration tests with `FAKE_CLOCK=1`.

**Why:** two tests read the wall clock.
**How to apply:** always export it in CI.
"""
USER_PREFS = """---
name: prefers-pnpm
description: The user uses pnpm, never npm
type: user
---

Use pnpm for every install.
"""
INDEX = """# Memory index

- [Flaky integration tests](debugging.md) — the fake clock
- [Prefers pnpm](user_prefs.md) — package manager
"""


def claude_dir() -> Path:
    return Path(os.environ["CLAUDE_CONFIG_DIR"])


def write_claude(repo: Path, *, transcript: bool = True) -> Path:
    """Claude Code's folder with user instructions and one project's auto memory (and a transcript)."""
    root = claude_dir()
    (root / "rules").mkdir(parents=True, exist_ok=True)
    (root / "CLAUDE.md").write_text("# My preferences\n\nAnswer briefly.\n")
    (root / "rules" / "style.md").write_text("Prefer small functions.\n")
    project = root / "projects" / encode_path(str(repo.resolve()))
    memory = project / "memory"
    memory.mkdir(parents=True)
    (memory / "MEMORY.md").write_text(INDEX)
    (memory / "debugging.md").write_text(DEBUGGING)
    (memory / "user_prefs.md").write_text(USER_PREFS)
    if transcript:
        line = {"type": "user", "cwd": str(repo / "src"), "sessionId": "s1", "message": {"role": "user"}}
        (repo / "src").mkdir(exist_ok=True)
        (project / "0b7e-session.jsonl").write_text(json.dumps(line) + "\n")
    return memory


def imported_meta(svc: MemoryService, store: str) -> dict[str, dict[str, object]]:
    out = {}
    for record in svc.list_facts(store=store, limit=500).items:
        parsed = parse_fact(record.path.read_bytes(), store=store, relpath="knowledge/x.md", mtime=0)
        out[record.fact.title] = dict(parsed.extra["imported"])
    return out


def test_claude_code_memory_lands_in_the_project_store(svc: MemoryService, repo: Path) -> None:
    write_claude(repo)
    report = svc.import_memory(kind="claude-code")
    store = svc.resolve_store(cwd=repo)
    facts = {r.fact.title: r.fact for r in svc.list_facts(store=store).items}
    assert set(facts) == {"flaky-integration-tests", "prefers-pnpm"}
    assert facts["flaky-integration-tests"].tags == ("claude-code", "feedback")
    assert facts["prefers-pnpm"].tags == ("claude-code", "user")
    assert "FAKE_CLOCK=1" in facts["flaky-integration-tests"].body
    assert facts["flaky-integration-tests"].description.startswith("The integration suite")
    meta = imported_meta(svc, store)["flaky-integration-tests"]
    assert meta["source"] == "claude-code" and str(meta["original_id"]).endswith("/debugging.md")
    assert str(meta["path"]).endswith("memory/debugging.md")
    skipped = [e for e in report.entries if e.action == "skipped"]
    assert [e.source.endswith("MEMORY.md") for e in skipped] == [True]
    rules = svc.rules(store=GLOBAL_STORE).text
    assert "Answer briefly." in rules and "Prefer small functions." in rules
    assert svc.recall("fake clock", cwd=repo).hits[0].title == "flaky-integration-tests"
    assert svc.store_info(store).project_root == str(repo.resolve())  # the checkout is recorded


def test_a_linked_claude_folder_is_followed(svc: MemoryService, repo: Path, tmp_path: Path) -> None:
    write_claude(repo)
    link = tmp_path / "dotfiles-claude"
    link.symlink_to(claude_dir())
    assert svc.import_memory(link).kind == "claude-code"
    assert len(svc.list_facts(cwd=repo).items) == 2


def test_claude_code_project_is_found_from_a_root_coffer_knows(svc: MemoryService, repo: Path) -> None:
    svc.remember("known project", cwd=repo)  # records the root
    write_claude(repo, transcript=False)
    svc.import_memory(kind="claude-code")
    titles = {r.fact.title for r in svc.list_facts(cwd=repo).items}
    assert {"flaky-integration-tests", "prefers-pnpm"} <= titles


def test_claude_code_memory_of_an_unknown_project_is_skipped_with_a_reason(
    svc: MemoryService, tmp_path: Path
) -> None:
    memory = claude_dir() / "projects" / "-somewhere-gone" / "memory"
    memory.mkdir(parents=True)
    (memory / "note.md").write_text(USER_PREFS)
    report = svc.import_memory(kind="claude-code")
    assert [e.action for e in report.entries] == ["skipped"]
    assert "--store" in (report.entries[0].reason or "")
    forced = svc.import_memory(memory, kind="claude-code", store=GLOBAL_STORE)
    assert forced.counts == {"created": 1}


def test_claude_code_reimport_writes_nothing_then_follows_a_changed_source(
    svc: MemoryService, repo: Path
) -> None:
    memory = write_claude(repo)
    svc.import_memory(kind="claude-code")
    before = tree_hash(svc.settings.memory_dir)
    again = svc.import_memory(kind="claude-code")
    assert again.written == 0 and tree_hash(svc.settings.memory_dir) == before
    (memory / "user_prefs.md").write_text(USER_PREFS.replace("every install", "every install and script"))
    changed = svc.import_memory(kind="claude-code")
    assert changed.counts.get("updated") == 1 and changed.written == 1
    store = svc.resolve_store(cwd=repo)
    prefs = next(r for r in svc.list_facts(store=store).items if r.fact.title == "prefers-pnpm")
    assert "and script" in prefs.fact.body
    # a copy edited here is never overwritten by a later import
    svc.edit_fact(prefs.fact.id, body="Use pnpm; yarn in the legacy app.", store=store)
    (memory / "user_prefs.md").write_text(USER_PREFS.replace("every install", "all installs"))
    conflict = svc.import_memory(kind="claude-code")
    assert [e.action for e in conflict.entries if str(e.original_id).endswith("/user_prefs.md")] == [
        "conflict"
    ]
    assert "legacy app" in svc.get_fact(prefs.fact.id, store=store).fact.body


# -- CLAUDE.md / AGENTS.md / Cursor rules ------------------------------------------------------
CURSOR_RULE = """---
description: Python style for this repository
globs: "**/*.py"
alwaysApply: false
---

# Python

- Use type hints everywhere.
"""


def write_rules(repo: Path) -> None:
    (repo / "CLAUDE.md").write_text("# Project\n\nBuild with `make`.\n")
    (repo / "AGENTS.md").write_text("# Agents\n\nNever push to main.\n")
    (repo / ".cursorrules").write_text("Prefer composition over inheritance.\n")
    (repo / ".cursor" / "rules").mkdir(parents=True)
    (repo / ".cursor" / "rules" / "python.mdc").write_text(CURSOR_RULE)
    (repo / ".claude" / "rules").mkdir(parents=True)
    (repo / ".claude" / "rules" / "testing.md").write_text("Tests use real temp folders.\n")


def test_rules_files_of_a_repository_go_to_its_rules_lane(svc: MemoryService, repo: Path) -> None:
    write_rules(repo)
    report = svc.import_memory(repo)
    assert report.kind == "rules" and report.counts == {"created": 5}
    view = svc.rules(cwd=repo)
    names = sorted(p.name for p in view.files)
    assert names == [
        "agents-md.md",
        "claude-md.md",
        "claude-rules-testing.md",
        "cursor-python.md",
        "cursorrules.md",
    ]
    assert "Never push to main." in view.text and "Build with `make`." in view.text
    assert "applies to **/*.py; Python style for this repository" in view.text
    assert "### Python" in view.text  # headings pushed under the file's own
    head = (view.folder / "cursor-python.md").read_text().splitlines()[0]
    meta = json.loads(re.fullmatch(r"<!-- coffer-import (\{.*\}) -->", head).group(1))  # type: ignore[union-attr]
    assert meta["source"] == "rules" and meta["path"].endswith(".cursor/rules/python.mdc")
    bundle = svc.assemble_session_context(repo)
    assert "Build with" in bundle and "coffer-import" not in bundle  # provenance is not for the agent
    assert svc.import_memory(repo).written == 0


def test_a_single_rules_file_and_an_edited_copy(svc: MemoryService, repo: Path) -> None:
    write_rules(repo)
    report = svc.import_memory(repo / "AGENTS.md", dry_run=True)
    assert report.counts == {"created": 1} and not svc.paths(svc.resolve_store(cwd=repo)).rules.exists()
    svc.import_memory(repo / "AGENTS.md")
    copy = svc.paths(svc.resolve_store(cwd=repo)).rules_file("agents-md")
    copy.write_text(copy.read_text() + "- and one more\n")
    (repo / "AGENTS.md").write_text("# Agents\n\nNever force-push.\n")
    again = svc.import_memory(repo / "AGENTS.md")
    assert again.counts == {"conflict": 1} and "one more" in copy.read_text()


def test_rules_of_two_repositories_sent_to_one_store_do_not_overwrite_each_other(
    svc: MemoryService, repo: Path, tmp_path: Path
) -> None:
    other = make_repo(tmp_path / "other")
    (repo / "AGENTS.md").write_text("First repository.\n")
    (other / "AGENTS.md").write_text("Second repository.\n")
    svc.import_memory(repo, store=GLOBAL_STORE)
    second = svc.import_memory(other, store=GLOBAL_STORE)
    assert second.counts == {"conflict": 1} and "imported from" in (second.entries[0].reason or "")
    assert "First repository." in svc.rules(store=GLOBAL_STORE).text


def test_rules_outside_a_repository_need_a_store(svc: MemoryService, tmp_path: Path) -> None:
    folder = tmp_path / "loose"
    folder.mkdir()
    (folder / "AGENTS.md").write_text("Be kind.\n")
    with pytest.raises(Exception) as info:
        svc.import_memory(folder, kind="rules")
    assert getattr(info.value, "code", None) == "SCOPE_UNRESOLVED"
    assert svc.import_memory(folder, kind="rules", store=GLOBAL_STORE).written == 1


# -- the MCP memory server's knowledge graph ---------------------------------------------------
GRAPH = [
    {
        "type": "entity",
        "name": "Ada",
        "entityType": "person",
        "observations": ["Leads the API team", "Likes Rust"],
    },
    {"type": "entity", "name": "Payments", "entityType": "service", "observations": ["Runs on port 8443"]},
    {"type": "relation", "from": "Ada", "to": "Payments", "relationType": "owns"},
]


def write_graph(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_mcp_memory_entities_become_facts_with_relations(svc: MemoryService, tmp_path: Path) -> None:
    source = write_graph(tmp_path / "memory.jsonl", GRAPH)
    report = svc.import_memory(source)
    assert report.kind == "mcp-memory" and report.counts == {"created": 2}
    facts = {r.fact.title: r.fact for r in svc.list_facts(store=GLOBAL_STORE).items}
    assert facts["Ada"].tags == ("person",)
    assert "- Leads the API team" in facts["Ada"].body and "- owns [[Payments]]" in facts["Ada"].body
    assert "- [[Ada]] owns this" in facts["Payments"].body
    assert imported_meta(svc, GLOBAL_STORE)["Ada"]["original_id"] == "Ada"
    assert svc.import_memory(source).written == 0
    grown = [*GRAPH[:2], {**GRAPH[1], "name": "Ledger"}, GRAPH[2]]
    assert svc.import_memory(write_graph(source, grown)).counts == {"unchanged": 2, "created": 1}


def test_mcp_memory_broken_line_is_refused_with_its_number(svc: MemoryService, tmp_path: Path) -> None:
    source = tmp_path / "memory.json"
    source.write_text(json.dumps(GRAPH[0]) + "\n{not json\n")
    with pytest.raises(InvalidImport) as info:
        svc.import_memory(source, kind="mcp-memory")
    assert (info.value.reason, info.value.line) == ("bad_json", 2)
    write_graph(source, [{"type": "entity", "name": "x"}])
    with pytest.raises(InvalidImport) as info:
        svc.import_memory(source, kind="mcp-memory")
    assert (info.value.reason, info.value.line) == ("bad_json", 1)
    assert not (svc.settings.memory_dir / "global").exists()


def test_mcp_memory_secrets_are_redacted_or_reject_the_whole_import(tmp_path: Path) -> None:
    records = [
        *GRAPH,
        {"type": "entity", "name": "CI", "entityType": "system", "observations": [f"token {TOKEN}"]},
    ]
    source = write_graph(tmp_path / "memory.jsonl", records)
    with MemoryService(tmp_path / "a") as svc:
        report = svc.import_memory(source)
        ci = next(e for e in report.entries if e.original_id == "CI")
        assert ci.findings and TOKEN not in ci.path.read_text()  # type: ignore[union-attr]
    settings = Settings.load(tmp_path / "b", security={"secrets": "reject"})
    with MemoryService(tmp_path / "b", settings=settings) as svc:
        with pytest.raises(MemoryRejected):
            svc.import_memory(source)
        assert not (svc.settings.memory_dir / "global").exists()  # not the two clean entities either


# -- basic-memory ------------------------------------------------------------------------------
NOTE = """---
title: Authentication Design
type: decision
tags: [auth, security]
permalink: authentication-design
---

# Authentication Design

## Observations
- [decision] Using JWT tokens for stateless authentication #security
- [constraint] Tokens expire after 15 minutes

## Relations
- implements [[API Security Requirements]]
"""


def test_basic_memory_notes_become_facts(svc: MemoryService, tmp_path: Path) -> None:
    folder = tmp_path / "basic-memory"
    (folder / "specs").mkdir(parents=True)
    (folder / "specs" / "auth.md").write_text(NOTE)
    (folder / "plain.md").write_text("# Plain note\n\nNo frontmatter here.\n")
    (folder / ".basic-memory").mkdir()
    (folder / ".basic-memory" / "state.md").write_text("internal")
    report = svc.import_memory(folder, store=GLOBAL_STORE)
    assert report.kind == "basic-memory" and report.counts == {"created": 2}
    facts = {r.fact.title: r.fact for r in svc.list_facts(store=GLOBAL_STORE).items}
    assert facts["Authentication Design"].tags == ("auth", "security", "decision")
    assert "- implements [[API Security Requirements]]" in facts["Authentication Design"].body
    meta = imported_meta(svc, GLOBAL_STORE)
    assert meta["Authentication Design"]["original_id"] == "authentication-design"
    assert meta["Plain note"]["original_id"] == "plain.md"
    assert svc.import_memory(folder).written == 0


def test_a_notes_folder_with_a_projects_folder_is_not_taken_for_claude_code(
    svc: MemoryService, tmp_path: Path
) -> None:
    folder = tmp_path / "notes"
    (folder / "projects").mkdir(parents=True)
    (folder / "projects" / "auth.md").write_text(NOTE)
    assert svc.import_memory(folder).kind == "basic-memory"


def test_cli_import_of_an_mcp_graph_shows_a_dry_run(
    svc: MemoryService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_graph(tmp_path / "memory.jsonl", GRAPH)
    assert main(["--home", str(svc.home), "import", str(source), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "created (dry run)" in out and "mcp-memory import" in out and "would write 2 file(s)" in out
    assert not (svc.settings.memory_dir / "global").exists()


def test_two_imports_of_one_folder_at_once_write_each_note_once(tmp_home: Path, tmp_path: Path) -> None:
    """An import holds the store's lock for 128 entries at a time (reads go on between): a second
    import of the same folder running meanwhile must still find what the first wrote, and write
    each note once between them (both in one process here, as two requests of a server)."""
    import threading

    from coffer_memory import Settings

    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(300):
        (folder / f"note{i:03d}.md").write_text(f"# Heron {i}\n\nthe heron {i} stands in the shallows\n")
    reports: list[object] = []
    with (
        MemoryService(settings=Settings.load(tmp_home)) as first,
        MemoryService(settings=Settings.load(tmp_home)) as second,
    ):

        def run(svc: MemoryService) -> None:
            try:
                reports.append(svc.import_memory(folder, kind="basic-memory", store=GLOBAL_STORE))
            except BaseException as exc:
                reports.append(exc)

        threads = [threading.Thread(target=run, args=(svc,)) for svc in (first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not any(t.is_alive() for t in threads)
        assert not any(isinstance(r, BaseException) for r in reports), reports
        titles = [r.fact.title for r in first.list_facts(store=GLOBAL_STORE, limit=500).items]
    assert sorted(titles) == sorted(f"Heron {i}" for i in range(300))
