"""Scope resolution on real git repositories: toplevels, worktrees, branches, odd paths."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest
from conftest import git, make_repo
from ulid import ULID

from coffer_memory import MemoryService, ScopeUnresolved
from coffer_memory._scope import configs_readable, find_git, head_commit, project_id_for, require_git
from coffer_memory._store.paths import validate_store_name

CROCKFORD = set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


def expected_project_id(path: Path) -> str:
    """The project id computed independently of the library: sha256 of the real path, 16 bytes."""
    canonical = os.path.realpath(path)
    return str(ULID.from_bytes(hashlib.sha256(canonical.encode("utf-8")).digest()[:16]))


def recalled_ids(svc: MemoryService, query: str, **kwargs: object) -> set[str]:
    return {hit.id for hit in svc.recall(query, **kwargs).hits}  # type: ignore[arg-type]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A real folder that no git repository contains."""
    folder = tmp_path / "plain" / "deeper"
    folder.mkdir(parents=True)
    assert find_git(folder) is None, "precondition: the temp dir must not be inside a git repository"
    return folder


# -- toplevel, nested folders, project id ------------------------------------------------------


def test_find_git_from_toplevel(repo: Path) -> None:
    info = find_git(repo)
    assert info is not None
    real = Path(os.path.realpath(repo))
    assert info.toplevel == real
    assert info.worktree == real
    assert info.gitdir == real / ".git"
    assert info.branch == "main"
    assert require_git(repo) == info


def test_find_git_from_nested_subfolder(repo: Path) -> None:
    nested = repo / "src" / "pkg" / "inner"
    nested.mkdir(parents=True)
    info = require_git(nested)
    real = Path(os.path.realpath(repo))
    assert info.toplevel == real
    assert info.worktree == real
    assert info.branch == "main"
    assert find_git(nested) == info


def test_project_id_is_ulid_of_sha256_of_realpath(repo: Path) -> None:
    pid = project_id_for(repo)
    assert len(pid) == 26
    assert set(pid) <= CROCKFORD
    assert pid == expected_project_id(repo)
    # A valid store name can be built from it.
    assert validate_store_name(f"project-{pid}") == f"project-{pid}"


def test_project_id_differs_between_repositories(tmp_path: Path) -> None:
    a = make_repo(tmp_path / "a")
    b = make_repo(tmp_path / "b")
    assert project_id_for(a) != project_id_for(b)
    assert project_id_for(a) == expected_project_id(a)
    assert project_id_for(b) == expected_project_id(b)


def test_resolve_store_from_nested_folder_matches_toplevel(svc: MemoryService, repo: Path) -> None:
    nested = repo / "docs" / "deep"
    nested.mkdir(parents=True)
    expected = f"project-{expected_project_id(repo)}"
    assert svc.resolve_store(cwd=repo) == expected
    assert svc.resolve_store(cwd=nested) == expected
    assert svc.recall_stores(cwd=nested) == [expected, "global"]


# -- linked worktrees ------------------------------------------------------------------------


@pytest.fixture
def worktree(repo: Path) -> Path:
    git(repo, "worktree", "add", "-q", "../wt", "-b", "feature")
    wt = repo.parent / "wt"
    assert (wt / ".git").is_file()
    return wt


def test_worktree_resolves_to_main_toplevel(svc: MemoryService, repo: Path, worktree: Path) -> None:
    main_info = require_git(repo)
    wt_info = require_git(worktree)
    real_repo = Path(os.path.realpath(repo))
    assert wt_info.toplevel == real_repo
    assert wt_info.worktree == Path(os.path.realpath(worktree))
    assert wt_info.gitdir != main_info.gitdir
    assert wt_info.branch == "feature"
    assert main_info.branch == "main"
    assert project_id_for(wt_info.toplevel) == project_id_for(main_info.toplevel) == expected_project_id(repo)
    assert svc.resolve_store(cwd=worktree) == svc.resolve_store(cwd=repo)
    assert svc.resolve_store(cwd=worktree) == f"project-{expected_project_id(repo)}"
    # A nested folder of the worktree resolves the same way.
    nested = worktree / "sub"
    nested.mkdir()
    assert svc.resolve_store(cwd=nested) == svc.resolve_store(cwd=repo)
    assert require_git(nested).branch == "feature"


def test_facts_are_shared_between_worktree_and_main(svc: MemoryService, repo: Path, worktree: Path) -> None:
    from_wt = svc.remember("The flux capacitor needs plutonium zebrafish", cwd=worktree)
    from_main = svc.remember("The hoverboard runs on quokka batteries", cwd=repo)
    assert from_wt.store == from_main.store == svc.resolve_store(cwd=repo)

    assert from_wt.fact.id in recalled_ids(svc, "zebrafish", cwd=repo)
    assert from_main.fact.id in recalled_ids(svc, "quokka", cwd=worktree)
    # The project root recorded from the worktree is the main checkout's toplevel.
    info = svc.store_info(from_wt.store)
    assert info.project_root == os.path.realpath(repo)
    assert info.fact_count == 2


def test_detached_head_has_no_branch_but_same_project(repo: Path) -> None:
    before = require_git(repo)
    git(repo, "checkout", "-q", "--detach")
    info = require_git(repo)
    assert info.branch is None
    assert info.toplevel == before.toplevel
    assert project_id_for(info.toplevel) == project_id_for(before.toplevel) == expected_project_id(repo)


def test_detached_head_in_worktree(repo: Path, worktree: Path) -> None:
    git(worktree, "checkout", "-q", "--detach")
    assert require_git(worktree).branch is None
    assert require_git(repo).branch == "main"
    assert require_git(worktree).toplevel == Path(os.path.realpath(repo))


# -- odd paths ----------------------------------------------------------------------------------


def test_path_with_spaces_and_non_ascii_end_to_end(svc: MemoryService, tmp_path: Path) -> None:
    odd = make_repo(tmp_path / "my repo" / "données 日本")
    nested = odd / "sous dossier ü"
    nested.mkdir()
    info = require_git(nested)
    assert info.toplevel == Path(os.path.realpath(odd))
    pid = project_id_for(info.toplevel)
    assert pid == expected_project_id(odd)

    result = svc.remember("Les données du projet utilisent le capybara protocol", cwd=nested)
    assert result.store == f"project-{pid}"
    assert result.path.is_file()
    assert result.fact.id in recalled_ids(svc, "capybara", cwd=odd)
    assert result.fact.id in recalled_ids(svc, "capybara", cwd=nested)

    store = svc.store_info(result.store)
    assert store.project_root == os.path.realpath(odd)
    assert store.display_name == "données 日本"


def test_symlinked_checkout_resolves_to_canonical_path(
    svc: MemoryService, repo: Path, tmp_path: Path
) -> None:
    link = tmp_path / "link-to-repo"
    link.symlink_to(repo, target_is_directory=True)
    (repo / "pkg").mkdir()
    info = require_git(link)
    assert info.toplevel == Path(os.path.realpath(repo))
    assert info.toplevel != link
    assert require_git(link / "pkg").toplevel == info.toplevel
    assert project_id_for(link) == project_id_for(repo) == expected_project_id(repo)
    assert svc.resolve_store(cwd=link) == svc.resolve_store(cwd=repo)
    assert svc.resolve_store(cwd=link / "pkg") == svc.resolve_store(cwd=repo)

    result = svc.remember("Linked checkouts share the axolotl store", cwd=link)
    assert svc.store_info(result.store).project_root == os.path.realpath(repo)
    assert result.fact.id in recalled_ids(svc, "axolotl", cwd=repo)


# -- outside a repository ---------------------------------------------------------------------


def test_project_scope_outside_repo_raises(svc: MemoryService, outside: Path) -> None:
    with pytest.raises(ScopeUnresolved) as excinfo:
        require_git(outside)
    assert excinfo.value.code == "SCOPE_UNRESOLVED"

    with pytest.raises(ScopeUnresolved) as excinfo:
        svc.resolve_store(cwd=outside, scope="project")
    assert excinfo.value.code == "SCOPE_UNRESOLVED"

    with pytest.raises(ScopeUnresolved):
        svc.remember("this has nowhere to go", cwd=outside)
    assert not (svc.settings.memory_dir / "projects").exists()


def test_nonexistent_cwd_raises(svc: MemoryService, tmp_path: Path, repo: Path) -> None:
    missing = tmp_path / "does" / "not" / "exist"
    with pytest.raises(ScopeUnresolved) as excinfo:
        require_git(missing)
    assert excinfo.value.code == "SCOPE_UNRESOLVED"
    # Even a missing folder *inside* a repository is refused, not resolved through its parents.
    with pytest.raises(ScopeUnresolved):
        require_git(repo / "gone")
    with pytest.raises(ScopeUnresolved) as excinfo:
        svc.resolve_store(cwd=missing)
    assert excinfo.value.code == "SCOPE_UNRESOLVED"


def test_recall_outside_repo_searches_global_only(svc: MemoryService, repo: Path, outside: Path) -> None:
    assert svc.recall_stores(cwd=outside) == ["global"]
    glob = svc.remember("Global note about the narwhal migration", scope="global", cwd=outside)
    proj = svc.remember("Project note about the narwhal schema", cwd=repo)
    assert glob.store == "global"
    assert proj.store.startswith("project-")

    result = svc.recall("narwhal", cwd=outside)
    assert result.stores == ("global",)
    assert {h.id for h in result.hits} == {glob.fact.id}
    assert {h.store for h in result.hits} == {"global"}

    # From inside the repository both stores are searched.
    assert svc.recall_stores(cwd=repo) == [proj.store, "global"]
    assert recalled_ids(svc, "narwhal", cwd=repo) == {glob.fact.id, proj.fact.id}


# -- submodules ---------------------------------------------------------------------------------


def test_submodule_resolves_to_its_own_folder(svc: MemoryService, tmp_path: Path) -> None:
    lib = make_repo(tmp_path / "lib")
    parent = make_repo(tmp_path / "parent")
    git(parent, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "vendor/lib")
    sub = parent / "vendor" / "lib"
    dotgit = sub / ".git"
    assert dotgit.is_file()
    gitdir = require_git(sub).gitdir
    assert not (gitdir / "commondir").exists()

    info = require_git(sub)
    assert info.toplevel == Path(os.path.realpath(sub))
    assert info.worktree == info.toplevel
    assert gitdir == Path(os.path.realpath(parent / ".git" / "modules" / "vendor" / "lib"))
    assert project_id_for(info.toplevel) == expected_project_id(sub)
    assert project_id_for(info.toplevel) != project_id_for(parent)
    assert svc.resolve_store(cwd=sub) == f"project-{expected_project_id(sub)}"
    assert svc.resolve_store(cwd=sub) != svc.resolve_store(cwd=parent)
    # A folder of the parent outside the submodule still resolves to the parent.
    assert require_git(parent / "vendor").toplevel == Path(os.path.realpath(parent))


def test_handmade_gitdir_file_without_commondir(tmp_path: Path) -> None:
    """A `.git` file pointing (relatively) at a real gitdir that has no `commondir`."""
    real = make_repo(tmp_path / "real")
    holder = tmp_path / "holder"
    holder.mkdir()
    (holder / ".git").write_text("gitdir: ../real/.git\n")
    info = require_git(holder)
    assert info.gitdir == Path(os.path.realpath(real / ".git"))
    assert info.toplevel == Path(os.path.realpath(holder))
    assert info.worktree == info.toplevel
    assert info.branch == "main"
    assert project_id_for(info.toplevel) == expected_project_id(holder)


def test_resolve_scope_reports_root_and_branch(svc: MemoryService, tmp_path: Path) -> None:
    main = make_repo(tmp_path / "main-repo")
    git(main, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "feature")
    here = svc.resolve_scope(tmp_path / "wt")
    assert here.scope.value == "project" and here.branch == "feature"
    assert here.project_root == main.resolve() and here.store_name == svc.resolve_store(cwd=main)
    assert svc.resolve_scope(main).branch == "main"
    glob = svc.resolve_scope(scope="global")
    assert glob.store_name == "global" and glob.project_id == "0" * 26 and glob.branch is None
    assert not (svc.home / "memory").exists()


def test_a_worktree_whose_main_checkout_moved_says_so(svc: MemoryService, tmp_path: Path) -> None:
    # After `mv repo elsewhere` a linked worktree's .git file points into the old path: git itself
    # fails there, and coffer said only "not inside a git repository" though .git is right there.
    repo = make_repo(tmp_path / "repo")
    worktree = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "feat/x", str(worktree))
    (worktree / "sub").mkdir()
    repo.rename(tmp_path / "moved")
    with pytest.raises(ScopeUnresolved) as excinfo:
        svc.save_handoff("where the work stands", cwd=worktree / "sub")
    message = excinfo.value.message
    assert str(worktree / ".git") in message and "does not exist" in message
    assert "git worktree repair" in message
    git(tmp_path / "moved", "worktree", "repair", str(worktree))  # the advice works
    assert svc.save_handoff("where the work stands", cwd=worktree / "sub").path.name.startswith("feat-x-")


# -- a repository config that includes what git would block on ------------------------------------
def test_a_config_including_a_fifo_is_never_opened_by_a_recall(
    svc: MemoryService, repo: Path, tmp_path: Path
) -> None:
    # Any folder may be a cwd, its .git/config anyone's. git opens an included FIFO and waits for a
    # writer: a recall in a new checkout (which asks git for its root commits once the home knows a
    # project) stalled until git's 10 s timeout. Here a writer stands ready at the FIFO, so before
    # the fix git was fed and the recall went on; the point is that nobody opens it any more.
    svc.remember("deploys go out on Tuesdays", cwd=repo)
    fifo = tmp_path / "included.fifo"
    os.mkfifo(fifo)
    checkout = make_repo(tmp_path / "checkout")
    git(checkout, "config", "include.path", str(fifo))
    opened = threading.Event()

    def writer() -> None:
        fd = os.open(fifo, os.O_WRONLY)  # returns once a reader opens the FIFO
        opened.set()
        os.write(fd, b"[core]\n")
        os.close(fd)

    feeding = threading.Thread(target=writer, daemon=True)
    feeding.start()
    try:
        found = svc.recall("deploys", cwd=checkout)
        head = head_commit(checkout)
        was_opened = opened.is_set()
    finally:  # let our own writer go
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        feeding.join(timeout=10)
        os.close(reader)
    assert not was_opened, "git opened the included FIFO"
    assert found.stores[-1] == "global" and len(found.stores) == 2  # its project store, and global
    assert head is None  # what only git can tell is unknown here, as without git


@pytest.mark.parametrize("included", ["/dev/zero", "/dev/null", "/dev/stdin", "regular", "missing"])
def test_git_runs_only_where_every_included_config_is_a_small_regular_file(
    tmp_path: Path, included: str
) -> None:
    checkout = make_repo(tmp_path / "checkout")
    nested = tmp_path / "nested.inc"
    nested.write_text(f"[include]\n\tpath = {included if included.startswith('/') else 'x.inc'}\n")
    if included == "regular":
        (tmp_path / "x.inc").write_text("[user]\n\tname = someone\n")
    # Followed through a relative include of a regular file, in an includeIf with any condition.
    # /dev/null and git's stdin (/dev/null too, whatever this process's stdin is) read as empty.
    git(checkout, "config", "includeIf.gitdir:/nowhere/.path", "../../nested.inc")
    expected = None if included == "/dev/zero" else git(checkout, "rev-parse", "HEAD")
    assert configs_readable(checkout / ".git") is (expected is not None)
    assert head_commit(checkout) == expected
