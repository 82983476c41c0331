"""Lanes: journal, handoff, rules, consolidation log, INDEX.md, tombstones, session context."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import frontmatter
import pytest
from conftest import git

from coffer_memory import InvalidInput, MemoryNotFound, MemoryService
from coffer_memory._agents import MAX_CONTEXT_CHARS, SEEDED_RULES, build_session_context

# The same tests on the machine-local SQLite index and on the shared PostgreSQL one.
pytestmark = pytest.mark.usefixtures("index_backend")


def test_journal_appends_indexes_at_once_and_stays_out_of_fact_count(svc: MemoryService, repo: Path) -> None:
    first = svc.journal_append("Shipped the billing migration; rollback plan in PR 412.", cwd=repo)
    second = svc.journal_append(
        "Flaky test test_sync_retries quarantined.", cwd=repo, origin_session_id="s-42"
    )
    assert first.path == second.path and first.path.parent.name == "journal"
    assert second.before_sha256 == first.after_sha256
    text = first.path.read_text()
    assert text.count("\n## ") == 2 and "session s-42" in text and "billing migration" in text
    assert stat.S_IMODE(os.stat(first.path).st_mode) == 0o600
    hits = svc.recall("billing migration rollback", cwd=repo).hits
    assert hits and hits[0].path == first.path
    assert svc.recall("quarantined", cwd=repo, mode="grep").hits[0].path == first.path
    assert svc.store_info(svc.resolve_store(cwd=repo)).fact_count == 0
    days = svc.journal(cwd=repo)
    assert [d.period for d in days] == [first.path.stem] and days[0].folder_path == first.path.parent
    events = [e for e in svc.audit_events() if e["details"].get("lane") == "journal"]
    assert len(events) == 2 and events[0]["details"]["origin_session_id"] == "s-42"


def test_journal_is_for_project_stores_and_validates(svc: MemoryService, repo: Path) -> None:
    with pytest.raises(InvalidInput):
        svc.journal_append("x", store="global")
    with pytest.raises(InvalidInput):
        svc.delete_journal("../../etc", cwd=repo)
    assert svc.journal(cwd=repo) == []
    assert not (svc.home / "memory").exists()


def test_journal_written_but_never_indexed_is_swept(svc: MemoryService, repo: Path) -> None:
    svc.remember("seed", cwd=repo)
    sp = svc.paths(svc.resolve_store(cwd=repo))
    sp.journal.mkdir()
    (sp.journal / "2026-01-02.md").write_text(
        "---\nkind: journal\ntitle: Journal 2026-01-02\n---\n\n## x\n\nkafka offsets reset\n"
    )
    reports = svc.reindex()
    assert sum(r.added for r in reports) == 1
    assert svc.recall("kafka offsets", cwd=repo).hits[0].path == sp.journal / "2026-01-02.md"


def test_delete_journal_period_logs_audits_and_drops_rows(svc: MemoryService, repo: Path) -> None:
    w = svc.journal_append("Database password rotated.", cwd=repo)
    period = w.path.stem
    deleted = svc.delete_journal(period, cwd=repo)
    assert deleted.after_sha256 is None and not w.path.exists()
    assert svc.recall("password rotated", cwd=repo).hits == ()
    log = svc.consolidation_log(cwd=repo)
    assert log.text is not None and f"deleted: journal/{period}" in log.text
    assert svc.audit_events()[0]["event"] == "memory_deleted"
    with pytest.raises(MemoryNotFound):
        svc.delete_journal(period, cwd=repo)


def test_handoff_save_resume_and_head_movement(svc: MemoryService, repo: Path) -> None:
    assert svc.resume(cwd=repo).scene is None
    saved = svc.save_handoff("Halfway through the parser rewrite; next: error recovery.", cwd=repo)
    post = frontmatter.load(saved.path)
    assert post["branch"] == "main" and len(post["head"]) == 40 and "updated_at" in post.metadata
    r = svc.resume(cwd=repo)
    assert r.scene is not None and "parser rewrite" in r.scene.text and not r.head_moved
    (repo / "a.txt").write_text("a")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "add a")
    r = svc.resume(cwd=repo)
    assert r.head_moved and r.new_commits is not None and len(r.new_commits) == 1
    assert "add a" in r.new_commits[0] and "1 new commit" in r.summary
    # Outside recall: a handoff is never a hit.
    assert svc.recall("parser rewrite", cwd=repo).hits == ()


def test_handoff_is_per_branch_and_rewritten_history_is_reported(svc: MemoryService, repo: Path) -> None:
    svc.save_handoff("main work", cwd=repo)
    git(repo, "checkout", "-q", "-b", "feature/x")
    svc.save_handoff("feature work", cwd=repo)
    scenes = svc.handoffs(cwd=repo)
    assert {s.branch for s in scenes} == {"main", "feature/x"}
    assert svc.resume(cwd=repo).scene.text == "feature work"  # type: ignore[union-attr]
    assert {s.branch for s in svc.handoffs(cwd=repo)} == {"main", "feature/x"}
    (repo / "f.txt").write_text("f")
    git(repo, "add", "f.txt")
    git(repo, "commit", "-q", "-m", "feature commit")
    svc.save_handoff("feature work at the first commit", cwd=repo)
    git(repo, "commit", "-q", "--amend", "-m", "rewritten")  # the saved commit leaves HEAD's history
    r = svc.resume(cwd=repo)
    assert r.head_moved and r.new_commits is None and "no longer in its history" in r.summary
    svc.delete_handoff("feature/x", cwd=repo)
    assert {s.branch for s in svc.handoffs(cwd=repo)} == {"main"}


def test_rules_concatenate_and_are_outside_recall(svc: MemoryService, repo: Path) -> None:
    svc.append_rule("Never force-push to main.", cwd=repo)
    svc.append_rule("Run make test before every push.", cwd=repo)
    sp = svc.paths(svc.resolve_store(cwd=repo))
    (sp.rules / "python.md").write_text("# Python\n\n- Use uv.\n")
    view = svc.rules(cwd=repo)
    assert [p.name for p in view.files] == ["rules.md", "python.md"]
    assert view.text.index("force-push") < view.text.index("Use uv")
    assert svc.recall("force-push", cwd=repo).hits == ()
    assert svc.rules(scope="global").text == ""
    deleted = svc.delete_rules(cwd=repo)
    assert len(deleted) == 2 and svc.rules(cwd=repo).text == ""
    with pytest.raises(MemoryNotFound):
        svc.delete_rules(cwd=repo)
    with pytest.raises(InvalidInput):
        svc.append_rule("   ", cwd=repo)


def test_index_md_and_tombstones(svc: MemoryService) -> None:
    svc.remember("inbox item", scope="global")
    sp = svc.paths("global")
    topic = sp.topic_file("deploy")
    topic.write_text("---\ntitle: Deploying\ndescription: How releases go out.\n---\n\nUse make release.\n")
    index = svc.regenerate_index("global")
    assert index is not None
    text = index.read_text()
    assert "[Deploying](deploy.md): How releases go out." in text and "1 item(s) in inbox/" in text
    before = index.stat().st_mtime_ns
    svc.regenerate_index("global")
    assert index.stat().st_mtime_ns == before  # unchanged content is not rewritten
    tomb = svc.archive_version("global", topic, replaced_by="knowledge/release.md")
    assert tomb.parent == sp.superseded and tomb.name.startswith("deploy-")
    post = frontmatter.load(tomb)
    assert post["superseded_by"] == "knowledge/release.md" and post["title"] == "Deploying"
    assert (
        svc.recall("make release", stores=["global"]).hits[0].path == topic
    )  # tombstones stay out of recall


def test_consolidation_log_reads_and_delete(svc: MemoryService) -> None:
    log = svc.consolidation_log(store="global")
    assert log.text is None and log.path.name == "consolidation-log.md"
    with pytest.raises(MemoryNotFound):
        svc.delete_consolidation_log(store="global")
    with svc.writing("global"):
        svc.log_change("global", "organize", "merged inbox/a.md into deploy.md")
    assert "merged inbox/a.md" in (svc.consolidation_log(store="global").text or "")
    svc.delete_consolidation_log(store="global")
    assert svc.consolidation_log(store="global").text is None


def test_session_context_orders_project_global_seeded(svc: MemoryService, repo: Path, tmp_path: Path) -> None:
    svc.append_rule("PROJECT: use the staging cluster for load tests.", cwd=repo)
    svc.append_rule("GLOBAL: answer in English.", scope="global")
    bundle = svc.assemble_session_context(repo)
    assert bundle.index("PROJECT:") < bundle.index("GLOBAL:") < bundle.index("coffer__resume")
    assert all(rule.split("`")[1] in bundle for rule in SEEDED_RULES)
    outside = tmp_path / "outside"
    outside.mkdir()
    bundle = svc.assemble_session_context(outside)
    assert "PROJECT:" not in bundle and "GLOBAL:" in bundle and "coffer__remember" in bundle
    empty = MemoryService(svc.home / "elsewhere").assemble_session_context(outside)
    assert "coffer__resume" in empty and len(empty) < 1000


def test_session_context_truncates_global_first_and_keeps_seeded() -> None:
    project = "\n".join(f"- project rule {i}" for i in range(300))
    global_ = "\n".join(f"- global rule {i} " + "é" * 20 for i in range(600))
    bundle = build_session_context(project, global_, project_name="acme")
    assert len(bundle) <= MAX_CONTEXT_CHARS
    assert "project rule 299" in bundle and "global rules truncated" in bundle
    assert "coffer__resume" in bundle and "coffer__remember" in bundle
    huge = build_session_context("x\n" * 20_000, "y\n" * 20_000)
    assert len(huge) <= MAX_CONTEXT_CHARS and "project rules truncated" in huge and "coffer__resume" in huge


def test_startup_sweep_indexes_journal_files_written_but_never_indexed(
    svc: MemoryService, repo: Path
) -> None:
    svc.remember("seed", cwd=repo)
    sp = svc.paths(svc.resolve_store(cwd=repo))
    sp.journal.mkdir()
    (sp.journal / "2026-02-03.md").write_text("## entry\n\nthe zookeeper quorum was lost\n")
    reports = svc.startup_sweep()
    assert sum(r.added for r in reports) == 1
    conn_rows = svc.db.rows("SELECT path FROM documents WHERE path LIKE '%2026-02-03.md'")
    assert len(conn_rows) == 1
