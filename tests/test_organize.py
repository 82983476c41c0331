"""The organizer, reorg and auto-organize, driven by a scripted LLM plugin."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import frontmatter
import pytest
from scripted_llm import ScriptedLLM, candidates_of, installed, item_of

from coffer_memory import MemoryService, Settings
from coffer_memory._llm import ChatMessage

LLM = {"provider": "scripted"}


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def filing_script(messages: Sequence[ChatMessage]) -> dict[str, Any]:
    name, text = item_of(messages)
    if "never" in text.lower():
        return {
            "action": "rule",
            "target": "",
            "slug": "",
            "title": "",
            "description": "",
            "body": "",
            "rule": text,
        }
    if "deploy" in text.lower() and "deploy.md" in candidates_of(messages):
        return {
            "action": "merge",
            "target": "deploy.md",
            "slug": "",
            "title": "Deploying",
            "description": "How releases go out.",
            "body": "Use make release.\n\n" + text,
            "rule": "",
        }
    return {
        "action": "create",
        "target": "",
        "slug": name.removesuffix(".md"),
        "title": name,
        "description": text[:40],
        "body": text,
        "rule": "",
    }


@pytest.fixture
def llm_home(tmp_home: Path) -> Iterator[MemoryService]:
    with MemoryService(settings=Settings.load(tmp_home, llm=LLM)) as svc:
        yield svc


def test_no_model_is_a_no_op(svc: MemoryService) -> None:
    svc.remember("an inbox item", scope="global")
    before = snapshot(svc.home / "memory")
    assert svc.organize("global").status == "no_model"
    assert svc.reorganize("global").status == "no_model"
    assert snapshot(svc.home / "memory") == before


def test_organize_merges_creates_and_classifies_rules(llm_home: MemoryService) -> None:
    svc = llm_home
    svc.remember("seed", scope="global")
    sp = svc.paths("global")
    deploy = sp.topic_file("deploy")
    deploy.write_text("---\ntitle: Deploying\ndescription: How releases go out.\n---\n\nUse make release.\n")
    svc.remember("Deploy day is Tuesday; deploy after the standup.", title="deploy-day", scope="global")
    svc.remember("Never commit directly to main.", title="no-direct-commits", scope="global")
    svc.remember("Postgres runs version 16 in production.", title="postgres", scope="global")
    (sp.inbox / "seed.md").unlink()
    with installed(ScriptedLLM(filing_script)) as llm:
        report = svc.organize("global")
    assert report.status == "ok" and len(llm.calls) == 3
    assert (report.count("merged"), report.count("created"), report.rules_appended) == (1, 1, 1)
    assert report.usage.prompt_tokens == 300
    assert list(sp.inbox.glob("*.md")) == []
    merged = frontmatter.load(deploy)
    assert "Tuesday" in merged.content and list(merged.metadata) == ["title", "description", "updated_at"]
    assert [p.name.startswith("deploy-") for p in sp.superseded.iterdir()] == [True]
    assert "Never commit directly to main." in svc.rules(store="global").text
    created = sp.topic_file("postgres")
    assert created.is_file() and "version 16" in created.read_text()
    log = svc.consolidation_log(store="global").text or ""
    assert log.count("\n- ") == 3 and "into deploy.md" in log and "became a rule" in log
    index = sp.index_md.read_text()
    assert "(deploy.md)" in index and "(postgres.md)" in index
    assert svc.recall("Tuesday", stores=["global"]).hits[0].path == deploy
    audit = svc.audit_events("global")[0]
    assert audit["event"] == "memory_organized" and audit["details"]["rules_appended"] == 1
    assert audit["details"]["merged"] == 1 and audit["details"]["prompt_tokens"] == 300


def test_malformed_output_leaves_the_item(llm_home: MemoryService) -> None:
    svc = llm_home
    bad = svc.remember("first item", title="first", scope="global")
    good = svc.remember("second item", title="second", scope="global")

    def script(messages: Sequence[ChatMessage]) -> str | dict[str, Any]:
        name, _ = item_of(messages)
        if name == "first.md":
            return '{"action": "merge", "target": "nowhere.md", "body": "x"'  # truncated JSON
        return filing_script(messages)

    with installed(ScriptedLLM(script)):
        report = svc.organize("global")
    assert report.skipped == 1 and report.count("created") == 1
    assert bad.path.exists() and not good.path.exists()
    assert "malformed" in (report.changes[0].error or "")


def test_dry_run_returns_diffs_and_writes_nothing(llm_home: MemoryService) -> None:
    svc = llm_home
    svc.remember("Never force-push.", title="force", scope="global")
    svc.remember("The cache is Redis.", title="cache", scope="global")
    before = snapshot(svc.home / "memory")
    with installed(ScriptedLLM(filing_script)):
        report = svc.organize("global", dry_run=True)
    assert report.dry_run and len(report.changes) == 2
    assert all(c.diff.startswith(("--- ", "--- /dev/null")) for c in report.changes)
    assert (
        "+- Never force-push." in report.changes[1].diff or "+- Never force-push." in report.changes[0].diff
    )
    assert snapshot(svc.home / "memory") == before


def test_long_rules_file_is_split_by_topic(tmp_home: Path) -> None:
    settings = Settings.load(tmp_home, llm=LLM, organize={"rules_split_chars": 500})
    with MemoryService(settings=settings) as svc:
        rules = [f"Python rule number {i} about typing." for i in range(10)]
        rules += [f"Git rule number {i} about commits." for i in range(10)]
        for rule in rules:
            svc.append_rule(rule, scope="global")

        def script(messages: Sequence[ChatMessage]) -> dict[str, Any]:
            return {
                "groups": [
                    {
                        "slug": "python",
                        "title": "Python",
                        "rules": [r for r in rules if r.startswith("Python")],
                    },
                    {"slug": "git", "title": "Git", "rules": [r for r in rules if r.startswith("Git")]},
                ]
            }

        with installed(ScriptedLLM(script)):
            report = svc.organize("global")
        assert report.count("split") == 2
        view = svc.rules(store="global")
        assert sorted(p.name for p in view.files) == ["git.md", "python.md"]
        assert all(rule in view.text for rule in rules)
        assert any(p.name.startswith("rules-") for p in svc.paths("global").superseded.iterdir())


def test_a_split_that_loses_a_rule_is_refused(tmp_home: Path) -> None:
    settings = Settings.load(tmp_home, llm=LLM, organize={"rules_split_chars": 500})
    with MemoryService(settings=settings) as svc:
        for i in range(30):
            svc.append_rule(f"Rule {i} that must survive.", scope="global")
        with installed(ScriptedLLM(lambda m: {"groups": [{"slug": "a", "title": "A", "rules": ["Rule 0"]}]})):
            report = svc.organize("global")
        assert report.count("split") == 0 and "lost a rule" in (report.changes[-1].error or "")
        assert [p.name for p in svc.rules(store="global").files] == ["rules.md"]


def test_killing_organize_between_steps_loses_nothing(tmp_home: Path) -> None:
    """A child process organizes 12 items slowly; it is SIGKILLed at random points, several times."""
    with MemoryService(tmp_home) as svc:
        tokens = [f"token{i:02d}zz" for i in range(12)]
        for token in tokens:
            svc.remember(f"fact holding {token}", title=token, scope="global")
    child = Path(__file__).with_name("_organize_child.py")
    rng = random.Random(int(os.environ.get("COFFER_TEST_SEED", "7")))
    for _ in range(4):
        proc = subprocess.Popen(
            [sys.executable, str(child), str(tmp_home)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.05, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        knowledge = (tmp_home / "memory" / "global" / "knowledge").rglob("*.md")
        texts = "\n".join(p.read_text() for p in knowledge if p.name != "INDEX.md")
        assert all(token in texts for token in tokens)
    with MemoryService(settings=Settings.load(tmp_home, llm=LLM)) as svc:
        from scripted_llm import ScriptedLLM as Fresh

        with installed(Fresh(filing_script)):
            svc.organize("global")
        assert list(svc.paths("global").inbox.glob("*.md")) == []
        for token in tokens:
            assert svc.recall(token, stores=["global"]).hits, token
        assert svc.doctor().ok


def reorg_script() -> Any:
    steps = iter(
        [
            {"tool": "list_topics"},
            {"tool": "read_topic", "name": "a.md"},
            {
                "tool": "write_topic",
                "name": "merged.md",
                "title": "Merged",
                "description": "Both halves.",
                "body": "alpha facts\n\nbeta facts",
            },
            {"tool": "supersede_topic", "name": "a.md", "replaced_by": "merged.md"},
            {"tool": "supersede_topic", "name": "b", "replaced_by": "merged.md"},
            {"tool": "done", "summary": "merged a and b"},
        ]
    )
    return lambda messages: next(steps)


def test_reorganize_runs_a_bounded_tool_loop(llm_home: MemoryService) -> None:
    svc = llm_home
    svc.remember("seed", scope="global")
    sp = svc.paths("global")
    sp.topic_file("a").write_text("---\ntitle: A\n---\n\nalpha facts\n")
    sp.topic_file("b").write_text("---\ntitle: B\n---\n\nbeta facts\n")
    before = snapshot(svc.home / "memory")
    with installed(ScriptedLLM(reorg_script())) as llm:
        dry = svc.reorganize("global", dry_run=True)
    assert (
        dry.summary == "merged a and b" and len(dry.changes) == 3 and snapshot(svc.home / "memory") == before
    )
    assert "alpha facts" in llm.calls[2][-1].content  # the read_topic result came back to the model
    with installed(ScriptedLLM(reorg_script())), MemoryService(settings=svc.settings) as fresh:
        report = fresh.reorganize("global")  # a new service: each service loads its LLM once
    assert report.status == "ok" and report.steps == 6
    assert sorted(p.name for p in sp.knowledge.glob("*.md")) == ["INDEX.md", "merged.md"]
    tombs = sorted(p.name.split("-")[0] for p in sp.superseded.iterdir())
    assert tombs == ["a", "b"]
    assert svc.audit_events("global")[0]["event"] == "memory_reorganized"
    assert svc.recall("beta facts", stores=["global"]).hits[0].path == sp.topic_file("merged")


def test_reorg_budget_and_empty(tmp_home: Path) -> None:
    settings = Settings.load(tmp_home, llm=LLM, organize={"reorg_max_steps": 3})
    with MemoryService(settings=settings) as svc:
        svc.remember("seed", scope="global")
        with installed(ScriptedLLM(lambda m: {"tool": "list_topics"})):
            assert svc.reorganize("global").status == "empty"
            svc.paths("global").topic_file("t").write_text("# T\n\nbody\n")
            report = svc.reorganize("global")
        assert report.steps == 3 and report.summary == "step budget exhausted"


def test_auto_organize_runs_after_quiet_and_close_cancels(tmp_home: Path) -> None:
    settings = Settings.load(tmp_home, llm=LLM, organize={"auto": True, "auto_delay_seconds": 0.05})
    with installed(ScriptedLLM(filing_script)):
        with MemoryService(settings=settings) as svc:
            svc.remember("The cache is Redis.", title="cache", scope="global")
            deadline = time.monotonic() + 10
            while list(svc.paths("global").inbox.glob("*.md")) and time.monotonic() < deadline:
                time.sleep(0.02)
            assert list(svc.paths("global").inbox.glob("*.md")) == []
            assert svc.paths("global").topic_file("cache").is_file()
        slow = Settings.load(tmp_home, llm=LLM, organize={"auto": True, "auto_delay_seconds": 60})
        with MemoryService(settings=slow) as svc:
            r = svc.remember("Queued but never organized.", title="queued", scope="global")
        assert r.path.exists()  # close cancelled the pending pass; the item waits in the inbox


def test_a_broken_inbox_file_is_skipped_not_fatal(llm_home: MemoryService) -> None:
    svc = llm_home
    good = svc.remember("The cache is Redis.", title="cache", scope="global")
    broken = svc.paths("global").inbox / "broken.md"
    broken.write_text("---\ntitle: [unclosed\n---\nbody\n")
    with installed(ScriptedLLM(filing_script)):
        report = svc.organize("global")
    assert broken.exists() and not good.path.exists()
    assert any("broken frontmatter" in (c.error or "") for c in report.changes)


def test_organize_carries_inbox_tags_into_topics(llm_home: MemoryService) -> None:
    """Tags of an inbox item survive its filing: a created topic gets them, a merge adds them to
    the topic's own (which the rewrite keeps), and a ``tags=`` recall finds the topic."""
    svc = llm_home
    sp = svc.paths("global")
    deploy = sp.topic_file("deploy")
    sp.knowledge.mkdir(parents=True, exist_ok=True)
    deploy.write_text(
        "---\ntitle: Deploying\ndescription: How releases go out.\ntags: [release, ops]\n---\n\nUse make release.\n"
    )
    svc.remember("Deploy day is Tuesday.", title="deploy-day", scope="global", tags=["ops", "calendar"])
    svc.remember("Postgres runs version 16.", title="postgres", scope="global", tags=["db"])
    with installed(ScriptedLLM(filing_script)):
        report = svc.organize("global")
    assert (report.count("merged"), report.count("created")) == (1, 1)
    assert frontmatter.load(deploy).metadata["tags"] == ["release", "ops", "calendar"]
    created = sp.topic_file("postgres")
    assert frontmatter.load(created).metadata["tags"] == ["db"]
    assert [h.path for h in svc.recall("Tuesday", stores=["global"], tags=["calendar"]).hits] == [deploy]
    assert [h.path for h in svc.recall("version", stores=["global"], tags=["db"]).hits] == [created]


def test_merged_tags_keep_order_and_the_limit() -> None:
    from coffer_memory._organize.topics import merged_tags
    from coffer_memory.vocabulary import MAX_TAGS

    assert merged_tags(["a", "b"], ["b", "c"]) == ("a", "b", "c")
    many = [f"t{i}" for i in range(MAX_TAGS)]
    assert merged_tags(many, ["extra"]) == tuple(many)
