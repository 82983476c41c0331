"""Merging one project store into another (the seed's consolidate), with real git clones of a bare remote."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from coffer_memory import (
    InvalidInput,
    MemoryService,
    MemoryStoreNotFound,
    StoreNotMergeable,
)
from coffer_memory._agents.context import session_context
from coffer_memory._store.identity import STORE_FILE
from tests.conftest import CliRunner, git
from tests.test_project_identity import _clone


def tree_hash(root: Path) -> str:
    """One digest of every path, file mode and file content under ``root`` (links by their target)."""
    h = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted([*dirs, *files]):
            path = Path(folder) / name
            st = os.lstat(path)
            h.update(f"{path.relative_to(root)}|{st.st_mode}\n".encode())
            if path.is_symlink():
                h.update(os.readlink(path).encode())
            elif path.is_file():
                h.update(path.read_bytes())
    return h.hexdigest()


def _identity(svc: MemoryService, store: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((svc.paths(store).root / STORE_FILE).read_text())
    return data


@pytest.fixture
def two(svc: MemoryService, tmp_path: Path) -> tuple[Path, str, Path, str]:
    """Two clones of one repository, each with its own store holding a fact, a journal day and rules."""
    a, b = _clone(tmp_path, "first"), _clone(tmp_path, "second")
    src = svc.remember("the staging database is called heron", cwd=a).store
    dst = svc.remember("deploys go out on tuesdays", cwd=b).store
    svc.journal_append("found the flaky test in the first clone", cwd=a)
    svc.journal_append("rewrote the deploy script in the second clone", cwd=b)
    svc.append_rule("Run the linter before pushing.", cwd=a)
    svc.append_rule("Never force-push main.", cwd=b)
    svc.save_handoff("halfway through the parser rewrite", cwd=a)
    assert src != dst
    return a, src, b, dst


def test_merge_moves_everything_and_retires_the_source(
    svc: MemoryService, two: tuple[Path, str, Path, str]
) -> None:
    _a, src, b, dst = two
    src_id = src.removeprefix("project-")
    done = svc.merge_stores(src, dst)
    assert done.retired and not done.dry_run and not done.already_merged
    assert "knowledge/inbox/the-staging-database-is-called-heron.md" in done.moved
    assert any(rel.startswith("handoff/") for rel in done.moved)
    assert ("rules/rules.md", f"rules/rules--from-{src_id}.md") in done.siblings
    assert done.journal_entries == 1
    assert not svc.paths(src).root.exists()
    assert [s.name for s in svc.stores()] == [dst]
    assert svc.db.scalar("SELECT count(*) FROM documents WHERE resource_name = ?", (src,)) == 0
    assert svc.db.scalar("SELECT count(*) FROM memory_store_project_roots WHERE store_name = ?", (src,)) == 0
    # Everything of the first clone is found from the second.
    texts = [h.text for h in svc.recall("heron", cwd=b).hits]
    assert any("heron" in t for t in texts)
    journal = svc.journal(cwd=b)[0].text
    assert "flaky test" in journal and "deploy script" in journal
    rules = svc.rules(cwd=b).text
    assert "Run the linter" in rules and "Never force-push" in rules
    assert "parser rewrite" in svc.resume(cwd=b).summary or svc.handoffs(cwd=b)
    assert _identity(svc, dst)["merged_identities"] == [src_id]
    assert _identity(svc, dst)["project_root"] == str(b.resolve())
    assert "store_merged" in [e["event"] for e in svc.audit_events(dst)]
    assert "store_merged" in [e["event"] for e in svc.audit_events(src)]


def test_merging_twice_changes_nothing_the_second_time(
    svc: MemoryService, two: tuple[Path, str, Path, str]
) -> None:
    _, src, _, dst = two
    svc.merge_stores(src, dst)
    before, version = tree_hash(svc.settings.memory_dir), svc.writer.version(dst)
    events = len(svc.audit_events(dst))
    again = svc.merge_stores(src, dst)
    assert again.already_merged and not again.changed and again.moved == ()
    assert tree_hash(svc.settings.memory_dir) == before
    assert svc.writer.version(dst) == version and len(svc.audit_events(dst)) == events
    assert svc.merge_stores(src, dst, dry_run=True).already_merged


def test_a_dry_run_writes_nothing_and_shows_what_the_merge_does(
    svc: MemoryService, two: tuple[Path, str, Path, str]
) -> None:
    _, src, _, dst = two
    before = tree_hash(svc.settings.memory_dir)
    plan = svc.merge_stores(src, dst, dry_run=True)
    assert tree_hash(svc.settings.memory_dir) == before
    assert plan.dry_run and not plan.retired and all(r.dry_run for r in plan.receipts)
    assert svc.paths(src).root.is_dir() and _identity(svc, dst)["merged_identities"] == []
    done = svc.merge_stores(src, dst)
    assert (plan.moved, plan.siblings, plan.journal_entries) == (
        done.moved,
        done.siblings,
        done.journal_entries,
    )
    assert [r.path for r in plan.receipts] == [r.path for r in done.receipts]


def test_a_later_resolve_of_the_source_lands_in_the_destination(
    svc: MemoryService, two: tuple[Path, str, Path, str], tmp_home: Path
) -> None:
    a, src, _b, dst = two
    svc.merge_stores(src, dst)
    assert svc.target(cwd=a).store == dst
    assert svc.remember("a fact written from the first clone afterwards", cwd=a).store == dst
    assert not svc.paths(src).root.exists()
    git(a, "worktree", "add", "-q", "-b", "feature", str(a.parent / "first-wt"))
    assert svc.target(cwd=a.parent / "first-wt").store == dst
    with MemoryService(tmp_home) as other:  # another process's view: from the files alone
        assert other.target(cwd=a).store == dst
    assert "Never force-push main" in session_context(svc.settings.memory_dir, a)


def test_merges_chain_the_identities(svc: MemoryService, tmp_path: Path) -> None:
    clones = [_clone(tmp_path, n) for n in ("one", "two", "three")]
    stores = [svc.remember(f"fact number {i}", cwd=c).store for i, c in enumerate(clones)]
    svc.merge_stores(stores[0], stores[1])
    svc.merge_stores(stores[1], stores[2])
    ids = [s.removeprefix("project-") for s in stores]
    assert _identity(svc, stores[2])["merged_identities"] == [ids[1], ids[0]]
    assert {svc.target(cwd=c).store for c in clones} == {stores[2]}
    assert svc.store_info(stores[2]).fact_count == 3


def test_journal_days_are_merged_entry_by_entry(svc: MemoryService, two: tuple[Path, str, Path, str]) -> None:
    _, src, _, dst = two
    src_day = next(svc.paths(src).journal.glob("*.md"))
    dst_day = svc.paths(dst).journal / src_day.name
    # A day both stores hold: the source's entry reached the destination once already (a synced copy).
    shared = src_day.read_text().split("\n## ", 1)[1]
    dst_day.write_text(dst_day.read_text() + "\n## " + shared)
    done = svc.merge_stores(src, dst)
    assert done.journal_entries == 0 and f"journal/{src_day.name}" in done.unchanged
    text = dst_day.read_text()
    assert text.count("found the flaky test") == 1 and text.count("rewrote the deploy script") == 1


def test_journal_entries_are_put_in_time_order(svc: MemoryService, two: tuple[Path, str, Path, str]) -> None:
    _, src, _, dst = two
    day = "2026-01-05"
    head = "---\nkind: journal\ntitle: Journal 2026-01-05\n---\n"
    entry = "\n## 2026-01-05T{t}.000+00:00 · agent\n\n{text}\n"
    (svc.paths(src).journal / f"{day}.md").write_text(
        head
        + entry.format(t="09:00:00", text="early in the source")
        + entry.format(t="12:00:00", text="noon")
    )
    (svc.paths(dst).journal / f"{day}.md").write_text(
        head + entry.format(t="10:00:00", text="mid-morning here") + entry.format(t="12:00:00", text="noon")
    )
    done = svc.merge_stores(src, dst)
    assert done.journal_entries == 2  # this day's early entry, and today's entry of the fixture
    text = (svc.paths(dst).journal / f"{day}.md").read_text()
    assert text == head + entry.format(t="09:00:00", text="early in the source") + entry.format(
        t="10:00:00", text="mid-morning here"
    ) + entry.format(t="12:00:00", text="noon")


def test_same_name_files_are_kept_as_siblings(svc: MemoryService, two: tuple[Path, str, Path, str]) -> None:
    _, src, _, dst = two
    src_id = src.removeprefix("project-")
    s, d = svc.paths(src), svc.paths(dst)
    (s.knowledge / "deploy.md").write_text("# Deploy\n\nfrom the first clone\n")
    (d.knowledge / "deploy.md").write_text("# Deploy\n\nfrom the second clone\n")
    (d.knowledge / f"deploy--from-{src_id}.md").write_text("# Deploy\n\nan older copy\n")
    (s.knowledge / "same.md").write_text("# Same\n\nidentical in both\n")
    (d.knowledge / "same.md").write_text("# Same\n\nidentical in both\n")
    (s.rules / "notes.md").write_text("- a rule file\n")
    (d.rules / "notes.md").mkdir()  # a folder where the source has a file: never written into
    done = svc.merge_stores(src, dst)
    assert ("knowledge/deploy.md", f"knowledge/deploy--from-{src_id}-2.md") in done.siblings
    assert ("rules/notes.md", f"rules/notes--from-{src_id}.md") in done.siblings
    assert "knowledge/same.md" in done.unchanged
    assert (d.knowledge / "deploy.md").read_text().endswith("from the second clone\n")
    assert (d.knowledge / f"deploy--from-{src_id}-2.md").read_text().endswith("from the first clone\n")
    assert any("first clone" in h.text for h in svc.recall("first clone", stores=[dst], mode="grep").hits)


def test_an_interrupted_merge_finishes_without_duplicates(
    svc: MemoryService, two: tuple[Path, str, Path, str]
) -> None:
    _, src, _, dst = two
    fact = "knowledge/inbox/the-staging-database-is-called-heron.md"
    (svc.paths(dst).root / fact).write_bytes(
        (svc.paths(src).root / fact).read_bytes()
    )  # copied before a crash
    done = svc.merge_stores(src, dst)
    assert fact in done.unchanged and fact not in done.moved
    assert len(list(svc.paths(dst).inbox.glob("*.md"))) == 2


def test_links_and_temp_files_are_not_moved(
    svc: MemoryService, two: tuple[Path, str, Path, str], tmp_path: Path
) -> None:
    _, src, _, dst = two
    outside = tmp_path / "precious.md"
    outside.write_text("# Precious\n\nnot coffer's\n")
    (svc.paths(src).knowledge / "link.md").symlink_to(outside)
    (svc.paths(src).inbox / ".tmp-999999-x.md").write_text("half written")
    done = svc.merge_stores(src, dst)
    assert any(s.startswith("knowledge/link.md (symbolic link") for s in done.skipped)
    assert any("temp file" in s for s in done.skipped)
    assert outside.read_text() == "# Precious\n\nnot coffer's\n"
    assert not (svc.paths(dst).knowledge / "link.md").exists()


def test_the_label_carries_over_when_the_destination_has_none(
    svc: MemoryService, two: tuple[Path, str, Path, str]
) -> None:
    _, src, _, dst = two
    svc.set_label(src, "Widget")
    svc.merge_stores(src, dst)
    assert svc.store_info(dst).label == "Widget"
    assert svc.db.scalar("SELECT count(*) FROM memory_store_labels WHERE store_name = ?", (src,)) == 0


def test_merge_errors_are_typed_and_write_nothing(
    svc: MemoryService, two: tuple[Path, str, Path, str], repo: Path
) -> None:
    _, src, _, dst = two
    svc.remember("global fact", scope="global")
    before = tree_hash(svc.settings.memory_dir)
    with pytest.raises(StoreNotMergeable) as same:
        svc.merge_stores(src, src)
    assert same.value.code == "INVALID_INPUT" and same.value.reason == "same_store"
    for pair in ((src, "global"), ("global", dst)):
        with pytest.raises(StoreNotMergeable) as glob:
            svc.merge_stores(*pair)
        assert glob.value.reason == "global"
    missing = "project-0" + "A" * 25
    with pytest.raises(MemoryStoreNotFound):
        svc.merge_stores(missing, dst)
    with pytest.raises(MemoryStoreNotFound):
        svc.merge_stores(src, missing)
    with pytest.raises(MemoryStoreNotFound):
        svc.merge_stores("project-../x", dst)
    assert tree_hash(svc.settings.memory_dir) == before
    assert isinstance(same.value, InvalidInput)


def test_delete_then_recreate_after_a_merge(svc: MemoryService, two: tuple[Path, str, Path, str]) -> None:
    a, src, _b, dst = two
    svc.merge_stores(src, dst)
    svc.delete_store(dst)
    assert svc.stores() == []
    fresh = svc.remember("a new beginning", cwd=a)
    assert fresh.store == src and svc.store_info(src).fact_count == 1
    assert svc.recall("heron", cwd=a, mode="keyword").hits == ()


def test_rest_merge(client: Any, service: MemoryService, tmp_path: Path) -> None:
    src = service.remember("alpha fact", cwd=_clone(tmp_path, "first")).store
    dst = service.remember("beta fact", cwd=_clone(tmp_path, "second")).store
    before = tree_hash(service.settings.memory_dir)
    plan = client.post(f"/api/v1/memory_stores/{src}/merge", json={"into": dst, "dry_run": True})
    assert plan.status_code == 200 and plan.json()["dry_run"] is True
    assert plan.json()["moved"] == ["knowledge/inbox/alpha-fact.md"]
    assert tree_hash(service.settings.memory_dir) == before
    done = client.post(f"/api/v1/memory_stores/{src}/merge", json={"into": dst})
    assert done.status_code == 200 and done.json()["retired"] is True
    assert {c["action"] for c in done.json()["changes"]} == {"created", "replaced"}
    again = client.post(f"/api/v1/memory_stores/{src}/merge", json={"into": dst})
    assert again.status_code == 200 and again.json()["already_merged"] is True
    same = client.post(f"/api/v1/memory_stores/{dst}/merge", json={"into": dst})
    assert same.status_code == 422 and same.json()["error"]["details"]["reason"] == "same_store"
    glob = client.post(f"/api/v1/memory_stores/{dst}/merge", json={"into": "global"})
    assert glob.status_code == 422 and glob.json()["error"]["code"] == "INVALID_INPUT"
    assert client.post("/api/v1/memory_stores/nope/merge", json={"into": dst}).status_code == 404


def test_rest_merge_into_an_unwritten_clone_store_needs_the_clients_cwd(
    client: Any, service: MemoryService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A REST merge into a second clone's store not yet written used the server process's own
    directory to decide whether that store may be made: 404 from one server, 200 from another
    started inside the clone. The client names its checkout (``cwd``), or the store is not found."""
    src = service.remember("alpha fact", cwd=_clone(tmp_path, "first")).store
    second = _clone(tmp_path, "second")
    dst = service.target(cwd=second).store
    monkeypatch.chdir(second)  # the server runs inside the clone: that must not count
    url = f"/api/v1/memory_stores/{src}/merge"
    refused = client.post(url, json={"into": dst})
    assert refused.status_code == 404, refused.text
    error = refused.json()["error"]
    assert error["code"] == "MEMORY_STORE_NOT_FOUND" and "cwd" in error["message"]
    assert not (service.settings.memory_dir / "projects" / dst.removeprefix("project-")).exists()
    relative = client.post(url, json={"into": dst, "cwd": "second"})
    assert relative.status_code == 422 and relative.json()["error"]["details"]["field"] == "cwd"
    done = client.post(url, json={"into": dst, "cwd": str(second)})
    assert done.status_code == 200 and done.json()["retired"] is True, done.text
    assert [h.text for h in service.recall("alpha", cwd=second, mode="keyword").hits] == ["alpha fact"]


def test_cli_merge_asks_for_yes(cli: CliRunner, tmp_path: Path, tmp_home: Path) -> None:
    a, b = _clone(tmp_path, "first"), _clone(tmp_path, "second")
    assert cli("remember", "alpha fact", cwd=a).returncode == 0
    assert cli("remember", "beta fact", cwd=b).returncode == 0
    listed = {s["project_root"]: s["name"] for s in json.loads(cli("stores", "list", "--json").stdout)}
    src, dst = listed[str(a.resolve())], listed[str(b.resolve())]
    before = tree_hash(tmp_home / "memory")
    asked = cli("stores", "merge", src, dst)
    assert asked.returncode == 1 and "dry run: merging" in asked.stdout and "--yes" in asked.stderr
    assert "  would move knowledge/inbox/alpha-fact.md" in asked.stdout
    assert f"merged_identities and retire {src}" in asked.stdout
    assert tree_hash(tmp_home / "memory") == before
    looked = cli("stores", "merge", src, dst, "--dry-run", "--json")
    assert looked.returncode == 0 and json.loads(looked.stdout)["moved"] == ["knowledge/inbox/alpha-fact.md"]
    done = cli("stores", "merge", "first", "second", "--yes")  # repository folder names work too
    # What a merge did is said in the past tense (it said "move ... and retire", as if still to do).
    assert done.returncode == 0 and "  moved knowledge/inbox/alpha-fact.md" in done.stdout
    assert f"merged_identities and retired {src}" in done.stdout
    again = cli("stores", "merge", src, dst, "--yes")
    assert again.returncode == 0 and "merged into" in again.stdout and "already" in again.stdout
    recalled = cli("recall", "alpha", "--json", cwd=a)
    assert "alpha fact" in recalled.stdout
