"""Store names, store paths, store provisioning and the store listing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

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
