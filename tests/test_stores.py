"""Store names, store paths, store provisioning and the store listing."""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from conftest import make_repo
from ulid import ULID

from coffer_memory import (
    InvalidInput,
    MemoryNotFound,
    MemoryScope,
    MemoryService,
    MemoryStoreNotFound,
)
from coffer_memory._scope import GLOBAL_PROJECT_ID, project_id_for
from coffer_memory._store.paths import StorePaths, validate_store_name

VALID_ULID = str(ULID.from_bytes(bytes(range(16))))  # deterministic, starts with '0'
assert len(VALID_ULID) == 26 and VALID_ULID[0] <= "7"


def tree(root: Path) -> set[str]:
    """Every path under ``root`` (relative), or an empty set if ``root`` does not exist."""
    if not root.exists():
        return set()
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def with_char(index: int, char: str) -> str:
    return VALID_ULID[:index] + char + VALID_ULID[index + 1 :]


# -- validate_store_name --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "global",
        f"project-{VALID_ULID}",
        "project-" + "0" * 26,
        "project-7" + "Z" * 25,
        f"project-{project_id_for('/tmp')}",
    ],
)
def test_valid_store_names(name: str) -> None:
    assert validate_store_name(name) == name


BAD_NAMES: list[object] = [
    "",
    "Global",
    "GLOBAL",
    " global",
    "global ",
    "globals",
    "project",
    "project-",
    "project-" + VALID_ULID.lower(),
    "project-" + VALID_ULID[:-1],
    "project-" + VALID_ULID + "0",
    "project-../../etc",
    "project-" + "../" * 8 + "ab",
    "../global",
    "global/..",
    "./global",
    "project_" + VALID_ULID,
    "Project-" + VALID_ULID,
    VALID_ULID,
    *(f"project-{with_char(5, c)}" for c in "ILOU"),
    *(f"project-{with_char(0, c)}" for c in "89ABZ"),
    f"project-{VALID_ULID[:10]}/{VALID_ULID[11:]}",
    "global/x",
    "/global",
    "global\x00",
    f"project-{VALID_ULID[:10]}\x00{VALID_ULID[11:]}",
    None,
    0,
    42,
    b"global",
    ["global"],
    ("global",),
    {"global": 1},
]


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_invalid_store_names_raise(name: object) -> None:
    with pytest.raises(MemoryStoreNotFound) as excinfo:
        validate_store_name(name)
    assert excinfo.value.code == "MEMORY_STORE_NOT_FOUND"


@pytest.mark.parametrize("suffix", ["\n", "\r\n", " ", "\t"], ids=repr)
def test_store_name_with_trailing_whitespace_is_rejected(suffix: str) -> None:
    """``re.match`` with ``$`` also matches before a final newline: the name must still be refused."""
    with pytest.raises(MemoryStoreNotFound):
        validate_store_name(f"project-{VALID_ULID}{suffix}")


def test_trailing_newline_store_name_does_not_reach_the_disk(svc: MemoryService) -> None:
    before = tree(svc.home)
    with pytest.raises(MemoryStoreNotFound):
        svc.remember("a fact in a store with a newline in its name", store=f"project-{VALID_ULID}\n")
    assert not (svc.settings.memory_dir / "projects").exists()
    assert tree(svc.home) == before


@pytest.mark.parametrize("prepopulate", [False, True], ids=["fresh-home", "populated-home"])
@pytest.mark.parametrize(
    "bad",
    [
        "",
        "Global",
        "project-",
        "project-../../etc",
        "../global",
        f"project-{VALID_ULID.lower()}",
        f"project-{with_char(3, 'U')}",
        f"project-8{VALID_ULID[1:]}",
        "global/x",
        "global\x00",
        7,
        b"global",
    ],
    ids=repr,
)
def test_service_rejects_bad_store_without_touching_disk(
    tmp_home: Path, bad: object, prepopulate: bool
) -> None:
    # (store=None is not here: it means "resolve from scope and cwd", a different path.)
    with MemoryService(tmp_home) as svc:
        if prepopulate:
            svc.remember("a seed fact so the home exists", scope="global")
        before = tree(tmp_home)

        with pytest.raises(MemoryStoreNotFound) as excinfo:
            svc.list_facts(store=bad)  # type: ignore[arg-type]
        assert excinfo.value.code == "MEMORY_STORE_NOT_FOUND"
        with pytest.raises(MemoryStoreNotFound):
            svc.recall("seed", stores=[bad])  # type: ignore[list-item]
        with pytest.raises(MemoryStoreNotFound):
            svc.recall("seed", stores=["global", bad])  # type: ignore[list-item]
        with pytest.raises(MemoryStoreNotFound):
            svc.remember("a fact that must not be written", store=bad)  # type: ignore[arg-type]
        with pytest.raises(MemoryStoreNotFound):
            svc.get_fact(VALID_ULID, store=bad)  # type: ignore[arg-type]
        with pytest.raises(MemoryStoreNotFound):
            svc.set_label(bad, "nope")  # type: ignore[arg-type]

        assert tree(tmp_home) == before
    if not prepopulate:
        assert not tmp_home.exists()


# -- StorePaths.resolve_relative -------------------------------------------------------------------


@pytest.mark.parametrize(
    "rel",
    [
        "../x",
        "/etc/passwd",
        "knowledge/../../x",
        "",
        "a\x00b",
        "..",
        ".",
        "knowledge/..",
        "\\etc\\passwd",
        "knowledge/inbox/../../../x.md",
        "../" + "projects/x",
    ],
    ids=repr,
)
@pytest.mark.parametrize("store", ["global", f"project-{VALID_ULID}"])
def test_resolve_relative_refuses_traversal(tmp_path: Path, store: str, rel: str) -> None:
    sp = StorePaths.of(tmp_path / "memory", store)
    with pytest.raises(InvalidInput) as excinfo:
        sp.resolve_relative(rel)
    assert excinfo.value.code == "INVALID_INPUT"
    assert excinfo.value.field == "path"


def test_resolve_relative_accepts_paths_inside(tmp_path: Path) -> None:
    sp = StorePaths.of(tmp_path / "memory", f"project-{VALID_ULID}")
    assert sp.root == tmp_path / "memory" / "projects" / VALID_ULID
    assert sp.resolve_relative("knowledge/inbox/a.md") == sp.root / "knowledge" / "inbox" / "a.md"
    assert sp.resolve_relative("knowledge/x/../b.md") == sp.root / "knowledge" / "b.md"
    assert StorePaths.of(tmp_path / "memory", "global").root == tmp_path / "memory" / "global"


# -- absent stores are not provisioned by reads ---------------------------------------------------


def test_reads_of_absent_store_create_nothing(svc: MemoryService, repo: Path) -> None:
    memory = svc.settings.memory_dir
    store = svc.resolve_store(cwd=repo)
    for name in (store, "global"):
        assert svc.recall("anything", stores=[name]).hits == ()
        page = svc.list_facts(store=name)
        assert page.items == () and page.next_cursor is None
        with pytest.raises(MemoryNotFound) as excinfo:
            svc.get_fact(VALID_ULID, store=name)
        assert excinfo.value.code == "MEMORY_NOT_FOUND"
    assert svc.recall("anything", cwd=repo).hits == ()
    assert svc.list_facts(cwd=repo).items == ()
    with pytest.raises(MemoryNotFound):
        svc.get_fact(VALID_ULID, cwd=repo)
    assert svc.stores() == []
    info = svc.store_info(store)
    assert info.fact_count == 0
    assert svc.reindex(store)[0].scanned == 0
    assert not memory.exists() or tree(memory) == set()


def test_first_remember_provisions_store_with_private_modes(svc: MemoryService, repo: Path) -> None:
    memory = svc.settings.memory_dir
    assert not memory.exists()
    result = svc.remember("The first fact provisions the store", cwd=repo)
    sp = svc.paths(result.store)
    assert sp.root == memory / "projects" / project_id_for(repo)
    assert result.path.parent == sp.inbox
    assert result.path.is_file()

    folders = [memory, memory / "projects", sp.root, sp.knowledge, sp.inbox]
    for folder in folders:
        assert folder.is_dir()
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700, folder
    assert stat.S_IMODE(os.stat(result.path).st_mode) == 0o600
    # Nothing else was written under memory/ besides the store's folders, its store.json and the fact.
    assert tree(memory) == {
        f"projects/{project_id_for(repo)}/store.json",
        "projects",
        f"projects/{project_id_for(repo)}",
        f"projects/{project_id_for(repo)}/knowledge",
        f"projects/{project_id_for(repo)}/knowledge/inbox",
        f"projects/{project_id_for(repo)}/knowledge/inbox/{result.path.name}",
    }
    # The global store is provisioned the same way on its first remember.
    glob = svc.remember("A global fact", scope="global")
    assert stat.S_IMODE(os.stat(memory / "global").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(glob.path).st_mode) == 0o600
    assert [s.name for s in svc.stores()] == ["global", result.store]


# -- stores() --------------------------------------------------------------------------------------


def test_stores_lists_global_and_project_stores(svc: MemoryService, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "alpha-project")
    nested = repo / "src"
    nested.mkdir()
    g1 = svc.remember("global one about pelicans", scope="global")
    svc.remember("global two about herons", scope="global")
    p1 = svc.remember("project one about pelicans", cwd=nested)
    svc.remember("project two", cwd=repo)
    svc.remember("project three", cwd=repo)

    infos = {i.name: i for i in svc.stores()}
    assert set(infos) == {"global", p1.store}
    glob, proj = infos["global"], infos[p1.store]

    assert glob.scope is MemoryScope.GLOBAL
    assert glob.project_id == GLOBAL_PROJECT_ID
    assert glob.store_dir == svc.settings.memory_dir / "global"
    assert glob.fact_count == 2
    assert glob.label is None
    assert glob.project_root is None
    assert glob.display_name == "global"
    assert g1.path.is_relative_to(glob.store_dir)

    assert proj.scope is MemoryScope.PROJECT
    assert proj.project_id == project_id_for(repo)
    assert proj.store_dir == svc.settings.memory_dir / "projects" / project_id_for(repo)
    assert proj.fact_count == 3
    assert proj.label is None
    assert proj.project_root == os.path.realpath(repo)  # the toplevel, though remembered from src/
    assert proj.display_name == "alpha-project"


def test_fact_count_counts_the_knowledge_lane_only(svc: MemoryService, repo: Path) -> None:
    result = svc.remember("a knowledge fact about the wombat", cwd=repo)
    sp = svc.paths(result.store)
    sp.journal.mkdir()
    (sp.journal / "2026-01-01.md").write_text("# 2026-01-01\n\nJournal entry about the wombat.\n")
    sp.rules.mkdir()
    (sp.rules / "rules.md").write_text("# Rules\n\nAlways feed the wombat.\n")
    sp.index_md.write_text("# Index\n\n- wombat\n")
    (sp.knowledge / "notes.txt").write_text("not markdown\n")

    info = svc.store_info(result.store)
    assert info.fact_count == 1
    assert [i.fact_count for i in svc.stores() if i.name == result.store] == [1]
    # The journal entry is indexed (recall finds it), yet it is not counted as a fact.
    hits = svc.recall("wombat", cwd=repo, limit=20).hits
    paths = {h.path for h in hits}
    assert sp.journal / "2026-01-01.md" in paths
    assert result.path in paths
    assert sp.rules / "rules.md" not in paths
    assert sp.index_md not in paths
    assert [r.path for r in svc.list_facts(cwd=repo).items] == [result.path]

    # A hand-written topic document in the knowledge lane is counted.
    (sp.knowledge / "topic.md").write_text("---\ntitle: Topic\n---\n\nAll about wombats.\n")
    assert svc.store_info(result.store).fact_count == 2


def test_project_root_kept_from_first_remember(svc: MemoryService, repo: Path) -> None:
    result = svc.remember("first", cwd=repo)
    assert svc.store_info(result.store).project_root == os.path.realpath(repo)
    # Writing by explicit store name records no root for a store that never had one.
    other = f"project-{VALID_ULID}"
    svc.remember("by name", store=other)
    info = svc.store_info(other)
    assert info.project_root is None
    assert info.display_name == other
    assert info.fact_count == 1


def test_display_name_prefers_label_then_root_basename_then_name(svc: MemoryService, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "beta-repo")
    name = svc.remember("fact", cwd=repo).store
    assert svc.store_info(name).display_name == "beta-repo"

    labelled = svc.set_label(name, "  My Beta  ")
    assert labelled.label == "My Beta"
    assert labelled.display_name == "My Beta"
    assert labelled.name == name
    assert {i.name: i.display_name for i in svc.stores()}[name] == "My Beta"

    relabelled = svc.set_label(name, "Beta, renamed ✓")
    assert relabelled.display_name == "Beta, renamed ✓"
    assert svc.store_info(name).label == "Beta, renamed ✓"

    cleared = svc.clear_label(name)
    assert cleared.label is None
    assert cleared.display_name == "beta-repo"
    assert svc.store_info(name).label is None
    # Clearing twice is harmless.
    assert svc.clear_label(name).label is None

    glob = svc.set_label("global", "Everywhere")
    assert glob.display_name == "Everywhere"
    assert svc.clear_label("global").display_name == "global"


def test_label_survives_a_new_service(tmp_home: Path, repo: Path) -> None:
    with MemoryService(tmp_home) as first:
        name = first.remember("fact", cwd=repo).store
        first.set_label(name, "Persistent")
    with MemoryService(tmp_home) as second:
        assert second.store_info(name).label == "Persistent"
        assert second.store_info(name).project_root == os.path.realpath(repo)


@pytest.mark.parametrize(
    "label", ["", "   ", "x" * 300, "x" * 201, "\n", "line\nbreak", "tab\there", "nul\x00", None, 5], ids=repr
)
def test_set_label_rejects_bad_labels(svc: MemoryService, label: object) -> None:
    svc.set_label("global", "Before")
    with pytest.raises(InvalidInput) as excinfo:
        svc.set_label("global", label)  # type: ignore[arg-type]
    assert excinfo.value.code == "INVALID_INPUT"
    assert excinfo.value.field == "label"
    assert svc.store_info("global").label == "Before"


def test_set_label_accepts_200_chars(svc: MemoryService) -> None:
    assert svc.set_label("global", "y" * 200).label == "y" * 200


def test_stray_folders_are_not_stores(svc: MemoryService, repo: Path) -> None:
    name = svc.remember("fact", cwd=repo).store
    projects = svc.settings.memory_dir / "projects"
    (projects / "not-a-ulid").mkdir()
    (projects / VALID_ULID.lower()).mkdir()
    assert [i.name for i in svc.stores()] == [name]


# -- per-store configuration ----------------------------------------------------------------------


def test_a_store_config_reads_the_home_defaults_and_its_own_keys(svc: MemoryService, repo: Path) -> None:
    import json

    store = svc.remember("a fact", cwd=repo).store
    view = svc.store_config(store)
    assert view.overrides == {} and view.config == svc.settings.memory
    changed = svc.set_store_config(store, {"max_fact_chars": "1000", "default_mode": "grep"})
    assert changed.changed and changed.overrides == {"default_mode": "grep", "max_fact_chars": 1000}
    assert changed.config.max_fact_chars == 1000 and changed.config.retrieval_modes == ["grep", "keyword"]
    on_disk = json.loads((svc.paths(store).root / "store.json").read_text())
    assert on_disk["config"] == {"default_mode": "grep", "max_fact_chars": 1000}
    assert "store_configured" in [e["event"] for e in svc.audit_events(store)]
    again = svc.set_store_config(store, {"max_fact_chars": 1000})
    assert not again.changed
    svc.close()
    svc.settings.index_path.unlink()  # the settings are truth in store.json, not in the index
    with MemoryService(svc.home) as fresh:
        assert fresh.store_config(store).overrides == {"default_mode": "grep", "max_fact_chars": 1000}
        removed = fresh.set_store_config(store, {"max_fact_chars": None})
        assert removed.overrides == {"default_mode": "grep"} and removed.config.max_fact_chars == 8192


def test_legacy_embedding_fields_are_accepted_and_ignored(svc: MemoryService, repo: Path) -> None:
    store = svc.remember("a fact", cwd=repo).store
    before = (svc.paths(store).root / "store.json").read_bytes()
    view = svc.set_store_config(store, {"embedding_model": "bge-m3", "embedding_dimensions": 1024})
    assert view.ignored == ("embedding_model", "embedding_dimensions") and not view.changed
    assert view.config.embedding_model is None and view.config.embedding_dimensions == 768
    assert (svc.paths(store).root / "store.json").read_bytes() == before


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"colour": "blue"}, "colour"),
        ({"max_file_bytes": 2048}, "max_file_bytes"),
        ({"merged_identities": ["0" * 26]}, "merged_identities"),
        ({"max_fact_chars": 10}, "max_fact_chars"),
        ({"max_fact_chars": "many"}, "max_fact_chars"),
        ({"default_mode": "psychic"}, "default_mode"),
        ({"default_mode": "vector"}, "default_mode"),  # not among the enabled retrieval_modes
        ({"retrieval_modes": ["grep", "vector"]}, "retrieval_modes"),  # the home has no vector index
        ({"retrieval_modes": []}, "retrieval_modes"),
    ],
)
def test_bad_store_settings_are_typed_errors_and_write_nothing(
    svc: MemoryService, repo: Path, changes: dict[str, object], field: str
) -> None:
    store = svc.remember("a fact", cwd=repo).store
    before = (svc.paths(store).root / "store.json").read_bytes()
    with pytest.raises(InvalidInput) as err:
        svc.set_store_config(store, changes)
    assert err.value.code == "INVALID_INPUT" and err.value.field == field
    assert (svc.paths(store).root / "store.json").read_bytes() == before


def test_merged_identities_may_be_sent_back_unchanged(svc: MemoryService, repo: Path) -> None:
    store = svc.remember("a fact", cwd=repo).store
    view = svc.store_config(store)
    sent = {k: v for k, v in dataclasses.asdict(view.config).items() if k != "max_file_bytes"}
    back = svc.set_store_config(store, sent)  # a round trip
    assert back.config == view.config and back.ignored[0] == "embedding_provider"
    assert set(back.overrides) == {"retrieval_modes", "default_mode", "max_fact_chars"}  # now pinned


def test_a_missing_project_store_has_no_config_to_change(svc: MemoryService) -> None:
    with pytest.raises(MemoryStoreNotFound):
        svc.set_store_config(f"project-{VALID_ULID}", {"max_fact_chars": 100})
    assert not svc.paths(f"project-{VALID_ULID}").root.exists()


def test_the_global_store_keeps_its_config_in_its_own_store_json(svc: MemoryService) -> None:
    view = svc.set_store_config("global", {"max_fact_chars": 200})
    assert view.path == svc.paths("global").root / "store.json" and view.path.is_file()
    with pytest.raises(Exception, match="the limit is 200"):
        svc.remember("x" * 300, scope="global")
    assert svc.store_info("global").label is None and [s.name for s in svc.stores()] == ["global"]


def test_max_fact_chars_per_store_limits_remember_edit_and_journal(svc: MemoryService, repo: Path) -> None:
    from coffer_memory import MemoryRejected

    r = svc.remember("a short fact", cwd=repo)
    svc.set_store_config(r.store, {"max_fact_chars": 100})
    for call in (
        lambda: svc.remember("y" * 101, cwd=repo),
        lambda: svc.edit_fact(r.fact.id, body="y" * 101, cwd=repo),
        lambda: svc.journal_append("y" * 101, cwd=repo),
    ):
        with pytest.raises(MemoryRejected) as err:
            call()
        assert err.value.reason == "too_long" and err.value.limit == 100
    assert svc.remember("z" * 100, cwd=repo).store == r.store
    # A store may also allow more than the home does (up to the seed's 32768).
    svc.set_store_config(r.store, {"max_fact_chars": 9000})
    assert svc.remember("w" * 8500, cwd=repo).store == r.store
    with pytest.raises(MemoryRejected):
        svc.remember("w" * 8500, scope="global")
    # An edit of store.json by hand (or by a sync) is seen at the next write.
    path = svc.paths(r.store).root / "store.json"
    path.write_text(path.read_text().replace('"max_fact_chars": 9000', '"max_fact_chars": 150'))
    with pytest.raises(MemoryRejected) as err:
        svc.remember("v" * 160, cwd=repo)
    assert err.value.limit == 150


def test_default_mode_and_retrieval_modes_per_store_drive_recall(svc: MemoryService, repo: Path) -> None:
    store = svc.remember("the deploy key lives in the vault", cwd=repo).store
    assert svc.recall("vault", cwd=repo).mode == "keyword"
    svc.set_store_config(store, {"default_mode": "grep"})
    assert svc.recall("vault", cwd=repo).mode == "grep"
    assert svc.recall("vault", stores=["global"]).mode == "keyword"  # other stores keep the home's
    svc.set_store_config(store, {"retrieval_modes": ["grep"]})
    with pytest.raises(InvalidInput) as err:
        svc.recall("vault", cwd=repo, mode="keyword")
    assert err.value.field == "mode" and store in err.value.message


def test_a_hand_broken_store_config_falls_back_to_the_home(svc: MemoryService, repo: Path) -> None:
    import json

    store = svc.remember("a fact", cwd=repo).store
    path = svc.paths(store).root / "store.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "config": {"max_fact_chars": -5}}))
    assert svc.store_config(store).config.max_fact_chars == 8192
    assert svc.remember("another fact", cwd=repo).store == store


def test_rest_store_config(client: Any, service: MemoryService, repo: Path) -> None:
    store = service.remember("a fact", cwd=repo).store
    got = client.get(f"/api/v1/memory_stores/{store}/config")
    assert got.status_code == 200 and got.json()["config"]["max_fact_chars"] == 8192
    assert got.json()["overrides"] == {} and got.json()["path"].endswith("store.json")
    r = client.patch(
        f"/api/v1/memory_stores/{store}/config", json={"max_fact_chars": 500, "embedding_model": "bge-m3"}
    )
    assert r.status_code == 200 and r.json()["overrides"] == {"max_fact_chars": 500}
    assert r.json()["ignored"] == ["embedding_model"] and "ignored" in r.json()["notes"][0]
    bad = client.patch(f"/api/v1/memory_stores/{store}/config", json={"max_file_bytes": 2048})
    assert bad.status_code == 422 and bad.json()["error"]["details"]["field"] == "max_file_bytes"
    assert client.patch(f"/api/v1/memory_stores/{store}/config", json=[1]).status_code == 422
    missing = client.get(f"/api/v1/memory_stores/project-{VALID_ULID}/config")
    assert missing.status_code == 200 and missing.json()["overrides"] == {}
    assert client.patch(f"/api/v1/memory_stores/project-{VALID_ULID}/config", json={}).status_code == 404
    assert client.get("/api/v1/memory_stores/nope/config").status_code == 404


def test_rest_resources(client: Any, service: MemoryService, repo: Path) -> None:
    store = service.remember("a fact", cwd=repo).store
    listed = client.get("/api/v1/resources", params={"kind": "memory"})
    assert listed.status_code == 200
    assert [(i["kind"], i["name"]) for i in listed.json()["items"]] == [("memory", store)]
    assert listed.json()["items"][0]["store"]["fact_count"] == 1
    assert client.get("/api/v1/resources").json() == listed.json()
    assert client.get("/api/v1/resources", params={"kind": "knowledge_base"}).json() == {"items": []}
    assert client.get("/api/v1/resources", params={"kind": "blob"}).status_code == 422
    one = client.get(f"/api/v1/resources/{store}")
    assert one.status_code == 200 and one.json()["config"]["default_mode"] == "keyword"
    patched = client.patch(
        f"/api/v1/resources/{store}", json={"config": {"default_mode": "grep", "embedding_dimensions": 1024}}
    )
    assert patched.status_code == 200 and patched.json()["config"]["default_mode"] == "grep"
    assert patched.json()["ignored"] == ["embedding_dimensions"]
    assert service.store_config(store).overrides == {"default_mode": "grep"}
    gone = client.delete(f"/api/v1/resources/{store}")
    assert gone.status_code == 200 and gone.json()["name"] == store
    assert client.delete(f"/api/v1/resources/{store}").status_code == 404
    assert client.get("/api/v1/resources").json() == {"items": []}
    assert client.delete("/api/v1/resources/global").status_code == 422


def test_cli_store_config(cli: Any, repo: Path) -> None:
    import json

    assert cli("remember", "a project fact", cwd=repo).returncode == 0
    shown = cli("stores", "config", repo.name)
    assert shown.returncode == 0 and "max_fact_chars = 8192  (home)" in shown.stdout
    assert "embedding_model = null  (legacy: ignored" in shown.stdout
    done = cli("stores", "config", repo.name, "retrieval_modes", "grep,keyword")
    assert done.returncode == 0 and done.stdout.strip() == 'retrieval_modes = ["grep", "keyword"]  (store)'
    assert cli("stores", "config", repo.name, "max_fact_chars", "300").returncode == 0
    assert cli("stores", "config", repo.name, "max_fact_chars").stdout.strip() == "300"
    legacy = cli("stores", "config", repo.name, "embedding_model", "bge-m3")
    assert legacy.returncode == 0 and "accepted and ignored" in legacy.stderr
    bad = cli("stores", "config", repo.name, "max_fact_chars", "5", "--json")
    assert bad.returncode == 1 and json.loads(bad.stderr)["error"]["details"]["field"] == "max_fact_chars"
    unset = cli("stores", "config", repo.name, "max_fact_chars", "--unset", "--json")
    assert json.loads(unset.stdout)["overrides"] == {"retrieval_modes": ["grep", "keyword"]}
    assert cli("stores", "config", repo.name, "colour").returncode == 1
