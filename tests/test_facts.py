"""Facts: remember, list, get, edit, delete, clear — against a real temp home and repo."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import apsw
import frontmatter
import pytest

from coffer_memory import (
    InvalidInput,
    MemoryConflict,
    MemoryNotFound,
    MemoryRejected,
    MemoryService,
    ScopeUnresolved,
    Settings,
)

# The same tests on the machine-local SQLite index and on the shared PostgreSQL one.
pytestmark = pytest.mark.usefixtures("index_backend")


def test_remember_writes_the_seed_frontmatter_in_order(svc: MemoryService, repo: Path) -> None:
    r = svc.remember(
        "This repo deploys via `make release`.\n\nNever push tags by hand.",
        title="deploy-via-make-release",
        description="Deploy with make release.",
        cwd=repo,
        origin_session_id="01JSESSION",
    )
    assert r.path.parent.name == "inbox" and r.path.name == "deploy-via-make-release.md"
    text = r.path.read_text(encoding="utf-8")
    head, body = text.split("\n---\n", 1)
    keys = [line.split(":")[0] for line in head.splitlines()[1:]]
    assert keys == [
        "kind",
        "title",
        "description",
        "metadata",
        "  actor",
        "origin_session_id",
        "created_at",
        "updated_at",
    ]
    post = frontmatter.loads(text)
    assert post["kind"] == "knowledge"
    assert post["metadata"] == {"actor": "agent"}
    assert post["origin_session_id"] == "01JSESSION"
    assert post["created_at"] == post["updated_at"]
    assert body.strip() == "This repo deploys via `make release`.\n\nNever push tags by hand."
    assert r.before_sha256 is None and r.after_sha256 and len(r.fact.id) == 26
    assert stat.S_IMODE(os.stat(r.path).st_mode) == 0o600


def test_title_collisions_never_overwrite(svc: MemoryService) -> None:
    paths = {svc.remember(f"fact number {i}", title="same title", scope="global").path for i in range(5)}
    assert len(paths) == 5
    names = sorted(p.name for p in paths)
    assert names == [
        "same-title-2.md",
        "same-title-3.md",
        "same-title-4.md",
        "same-title-5.md",
        "same-title.md",
    ]
    bodies = {frontmatter.load(p).content for p in paths}
    assert bodies == {f"fact number {i}" for i in range(5)}


@pytest.mark.parametrize("text", ["", "   ", "\n\t\n"])
def test_empty_text_is_rejected(svc: MemoryService, text: str) -> None:
    with pytest.raises(MemoryRejected) as err:
        svc.remember(text, scope="global")
    assert err.value.reason == "empty" and err.value.code == "MEMORY_REJECTED"
    assert not (svc.home / "memory").exists()


def test_too_long_text_is_rejected_and_nothing_is_written(tmp_home: Path) -> None:
    settings = Settings.load(tmp_home, memory={"max_fact_chars": 100})
    with MemoryService(settings=settings) as svc:
        with pytest.raises(MemoryRejected) as err:
            svc.remember("x" * 101, scope="global")
        assert err.value.reason == "too_long" and err.value.limit == 100
        assert svc.remember("x" * 100, scope="global").fact.body == "x" * 100
        assert len(svc.list_facts(store="global").items) == 1


def test_bad_fields_are_invalid_input(svc: MemoryService) -> None:
    with pytest.raises(InvalidInput):
        svc.remember("ok", title="t" * 300, scope="global")
    with pytest.raises(InvalidInput):
        svc.remember("ok", actor="robot", scope="global")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        svc.remember("nul \x00 byte", scope="global")
    with pytest.raises(InvalidInput):
        svc.remember("ok", scope="team")  # type: ignore[arg-type]


def test_project_scope_outside_git_is_unresolved(svc: MemoryService, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ScopeUnresolved) as err:
        svc.remember("x", cwd=plain)
    assert err.value.code == "SCOPE_UNRESOLVED"


def test_list_is_newest_first_and_pages_with_a_cursor(svc: MemoryService) -> None:
    ids = [svc.remember(f"fact {i}", title=f"fact {i}", scope="global").fact.id for i in range(7)]
    seen = []
    cursor = None
    while True:
        page = svc.list_facts(store="global", limit=3, cursor=cursor)
        seen += [r.fact.id for r in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == list(reversed(ids))


def test_cursor_from_another_store_or_garbage_is_rejected(svc: MemoryService, repo: Path) -> None:
    for i in range(3):
        svc.remember(f"global {i}", scope="global")
        svc.remember(f"project {i}", cwd=repo)
    cursor = svc.list_facts(store="global", limit=1).next_cursor
    assert cursor
    with pytest.raises(InvalidInput) as err:
        svc.list_facts(cwd=repo, limit=1, cursor=cursor)
    assert err.value.field == "cursor"
    for bad in ("not-a-cursor", "e30", "!!!"):
        with pytest.raises(InvalidInput):
            svc.list_facts(store="global", cursor=bad)
    with pytest.raises(InvalidInput):
        svc.list_facts(store="global", limit=0)


def test_get_edit_with_compare_and_swap(svc: MemoryService) -> None:
    r = svc.remember("original body", title="edit me", scope="global")
    got = svc.get_fact(r.fact.id, store="global")
    assert got.fact.body == "original body" and got.sha256 == r.after_sha256 and got.path == r.path

    with pytest.raises(MemoryConflict) as err:
        svc.edit_fact(r.fact.id, body="lost", store="global", expected_sha256="0" * 64)
    assert err.value.code == "MEMORY_CONFLICT"
    assert svc.get_fact(r.fact.id, store="global").fact.body == "original body"

    edited = svc.edit_fact(r.fact.id, body="new body", store="global", expected_sha256=got.sha256)
    assert edited.before_sha256 == got.sha256 and edited.after_sha256 != got.sha256
    assert edited.fact.id == r.fact.id
    after = svc.get_fact(r.fact.id, store="global")
    assert after.fact.body == "new body" and after.fact.created_at == r.fact.created_at
    assert after.fact.updated_at >= r.fact.updated_at and after.fact.actor == "user"
    assert [h.id for h in svc.recall("new body", stores=["global"]).hits] == [r.fact.id]
    assert svc.recall("original", stores=["global"]).hits == ()


def test_edit_keeps_keys_a_user_added(svc: MemoryService) -> None:
    r = svc.remember("body", title="keep keys", scope="global")
    text = r.path.read_text().replace("kind: knowledge\n", "kind: knowledge\ntags: [ops, deploy]\n")
    r.path.write_text(text)
    svc.edit_fact(r.fact.id, title="renamed", store="global")
    post = frontmatter.load(r.path)
    assert post["tags"] == ["ops", "deploy"] and post["title"] == "renamed"


def test_delete_and_not_found(svc: MemoryService) -> None:
    r = svc.remember("short lived", scope="global")
    with pytest.raises(MemoryConflict):
        svc.delete_fact(r.fact.id, store="global", expected_sha256="f" * 64)
    assert r.path.exists()
    deleted = svc.delete_fact(r.fact.id, store="global")
    assert deleted.after_sha256 is None and not r.path.exists()
    for call in (svc.get_fact, svc.delete_fact):
        with pytest.raises(MemoryNotFound) as err:
            call(r.fact.id, store="global")
        assert err.value.code == "MEMORY_NOT_FOUND"
    with pytest.raises(MemoryNotFound):
        svc.get_fact("../../etc/passwd", store="global")
    assert svc.recall("short lived", stores=["global"]).hits == ()


def test_clear_empties_the_knowledge_lane_only(svc: MemoryService) -> None:
    for i in range(3):
        svc.remember(f"fact {i}", scope="global")
    rules = svc.paths("global").rules / "rules.md"
    rules.parent.mkdir()
    rules.write_text("# rules\nalways be kind\n")
    result = svc.clear(store="global")
    assert result.deleted == 3
    assert svc.list_facts(store="global").items == ()
    assert rules.exists() and svc.paths("global").root.is_dir()
    assert svc.store_info("global").fact_count == 0


def test_every_mutation_is_audited(svc: MemoryService) -> None:
    r = svc.remember("audited", scope="global", origin_session_id="sess-1")
    svc.edit_fact(r.fact.id, body="audited again", store="global")
    svc.delete_fact(r.fact.id, store="global")
    svc.remember("another", scope="global")
    svc.clear(store="global")
    events = [e["event"] for e in svc.audit_events("global")]
    assert events == ["memory_cleared", "memory_added", "memory_deleted", "memory_updated", "memory_added"]
    added = svc.audit_events("global")[-1]
    assert added["document_id"] == r.fact.id and added["details"]["origin_session_id"] == "sess-1"


def test_hand_written_files_are_picked_up(svc: MemoryService) -> None:
    svc.remember("seed so the store exists", scope="global")
    knowledge = svc.paths("global").knowledge
    (knowledge / "plain.md").write_text("# Deploy checklist\n\nRun the smoke tests before tagging.\n")
    (knowledge / "legacy.md").write_text("---\nname: legacy-name\n---\nThe staging host is staging-7.\n")
    (knowledge / "INDEX.md").write_text("# Index\nsmoke tests are listed here too\n")
    (knowledge / "broken.md").write_text("---\ntitle: [unclosed\n---\nsmoke tests broken\n")
    hits = svc.recall("smoke tests", stores=["global"]).hits
    assert [h.title for h in hits] == ["Deploy checklist"]
    legacy = svc.recall("staging host", stores=["global"]).hits
    assert legacy[0].title == "legacy-name"
    fact = svc.get_fact(legacy[0].id, store="global").fact
    assert fact.actor == "user" and fact.created_at.tzinfo is not None
    report = svc.doctor()
    assert [b.path.name for b in report.broken] == ["broken.md"]
    assert not report.index_mismatches


def test_index_rows_carry_seed_metadata(svc: MemoryService) -> None:
    r = svc.remember("metadata check", scope="global", origin_session_id="s-9")
    conn = apsw.Connection(str(svc.settings.index_path))
    row = next(
        conn.execute(
            "SELECT kind, resource_name, project_id, path, title, metadata, content_sha256 FROM documents WHERE id = ?",
            (r.fact.id,),
        )
    )
    assert row[:3] == ("memory", "global", "0" * 26)
    assert row[3] == r.path.relative_to(svc.home).as_posix() and row[4] == r.fact.title  # home-relative
    assert json.loads(row[5]) == {"actor": "agent", "origin_session_id": "s-9"}
    assert row[6] == r.after_sha256


def test_a_broken_file_is_read_once_until_it_changes(
    svc: MemoryService, caplog: pytest.LogCaptureFixture
) -> None:
    svc.remember("seed", scope="global")
    broken = svc.paths("global").knowledge / "broken.md"
    broken.write_text("---\ntitle: [unclosed\n---\nbody\n")
    with caplog.at_level("WARNING", logger="coffer_memory.reconcile"):
        for _ in range(3):
            svc.recall("body", stores=["global"])
    assert sum("skipping" in r.message for r in caplog.records) == 1
    broken.write_text("---\ntitle: fixed\n---\nbody now parses\n")
    assert [h.title for h in svc.recall("parses", stores=["global"]).hits] == ["fixed"]
    assert svc.doctor().ok


def test_editing_a_hand_written_fact_keeps_its_id(svc: MemoryService) -> None:
    svc.remember("seed", scope="global")
    (svc.paths("global").knowledge / "hand.md").write_text("# Hand written\n\nno frontmatter at all\n")
    hit = svc.recall("frontmatter", stores=["global"]).hits[0]
    edited = svc.edit_fact(hit.id, body="still no created_at", store="global")
    assert edited.fact.id == hit.id
    assert svc.get_fact(hit.id, store="global").fact.body == "still no created_at"
    assert "\ncreated_at:" not in edited.path.read_text()


def test_index_db_is_private(svc: MemoryService) -> None:
    svc.remember("private", scope="global")
    assert stat.S_IMODE(os.stat(svc.settings.index_path).st_mode) == 0o600


def test_settings_home_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with MemoryService(settings=Settings(home=Path("relhome"))) as svc:
        r = svc.remember("relative home works", scope="global")
        assert r.path.is_absolute() and r.path.is_relative_to(tmp_path / "relhome")


def test_home_with_dotdot_is_normalised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    with MemoryService("../home") as svc:
        assert svc.remember("dotdot home", scope="global").path.is_relative_to(tmp_path / "home")


def test_hit_text_keeps_a_first_line_equal_to_the_title(svc: MemoryService) -> None:
    svc.remember("seed", scope="global")
    (svc.paths("global").knowledge / "deploy.md").write_text(
        "---\ntitle: Deploy\n---\n\nDeploy\n\nUse make ship.\n"
    )
    assert svc.recall("make ship", stores=["global"]).hits[0].text.startswith("Deploy\n")
    svc.remember("Body without its title.", title="zebra crossing", scope="global")
    hit = svc.recall("zebra crossing", stores=["global"]).hits[0]
    assert hit.title == "zebra crossing" and hit.text == "Body without its title."


def test_long_titles_that_collide_still_fit_the_slug_limit(svc: MemoryService) -> None:
    title = "a very long title " * 6
    paths = [svc.remember(f"fact {i}", title=title, scope="global").path for i in range(3)]
    assert len(set(paths)) == 3 and all(len(p.stem) <= 64 for p in paths)
    assert paths[1].stem.endswith("-2") and paths[2].stem.endswith("-3")
