"""What a warm recall's git lookup watches, now that each path is stat'ed once: what it still sees.

``find_git`` keeps its answer per folder while the watched paths keep their stat. The reftable
list is watched only in a reftable repository (HEAD holds the stub there; a repository turned
into one rewrites HEAD), each path once, and ``folder_git`` answers "is it a folder" from the
same ``stat`` of the working directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import git, make_repo

from coffer_memory import InvalidInput, MemoryService
from coffer_memory import _scope as scope_mod
from coffer_memory._retrieval import _file_path
from coffer_memory._scope import find_git, folder_git

STUB = "ref: refs/heads/.invalid\n"


@pytest.fixture(autouse=True)
def _no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scope_mod, "_RACY_NS", 0)  # cache at once (the window is for real clocks)


def _stub_repository(path: Path) -> Path:
    """A hand-made reftable-shaped checkout: HEAD holds the stub, the branch lives in the tables."""
    gitdir = path / ".git"
    (gitdir / "reftable").mkdir(parents=True)
    (gitdir / "HEAD").write_text(STUB)
    (gitdir / "reftable" / "tables.list").write_text("0x000000000001-0x000000000001-aaaa.ref\n")
    return path


def _bump(path: Path, text: str) -> None:
    path.write_text(text)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_a_reftable_checkout_is_looked_up_again_when_its_table_list_changes(tmp_path: Path) -> None:
    repo = _stub_repository(tmp_path / "stub")
    first = find_git(repo)
    assert first is not None and find_git(repo) is first  # kept
    _bump(repo / ".git" / "reftable" / "tables.list", "0x000000000001-0x000000000002-bbbb.ref\n")
    assert find_git(repo) is not first  # a branch switch there rewrites only the list


def test_a_plain_checkout_does_not_watch_a_reftable_list(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    info = find_git(repo)
    assert info is not None
    watched = scope_mod._watched(os.fspath(repo), info)
    assert watched is not None and not any(p.endswith("tables.list") for p in watched)
    assert len(watched) == len(set(watched))  # the folder and its realpath are one path here
    (repo / ".git" / "HEAD").write_text(STUB)  # turned into a reftable repository: HEAD rewritten
    assert find_git(repo) is not info


def test_a_branch_switch_and_a_new_checkout_below_are_seen(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    sub = repo / "sub"
    sub.mkdir()
    assert folder_git(sub)[1] is not None and folder_git(sub)[1].branch == "main"  # type: ignore[union-attr]
    git(repo, "checkout", "-q", "-b", "feature")
    assert folder_git(sub) == (True, find_git(sub))
    assert find_git(sub).branch == "feature"  # type: ignore[union-attr]
    git(sub, "init", "-q", "-b", "inner")
    assert find_git(sub).worktree == sub.resolve()  # type: ignore[union-attr]


def test_folder_git_says_what_is_not_a_folder(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    assert folder_git(repo)[0] is True
    assert folder_git(repo / "README.md") == (False, None)
    assert folder_git(repo / "gone") == (False, None)
    assert folder_git("bad\x00path") == (False, None)


def test_a_recall_from_a_folder_removed_after_a_warm_recall_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    sub = repo / "sub"
    sub.mkdir()
    with MemoryService(tmp_path / "home") as svc:
        svc.remember("deploy with make release", cwd=repo)
        assert svc.recall("release", cwd=sub, mode="keyword").hits
        sub.rmdir()
        with pytest.raises(InvalidInput, match="cwd is not a directory"):
            svc.recall("release", cwd=sub, mode="keyword")
        with pytest.raises(InvalidInput, match="cwd is not a directory"):
            svc.recall("release", cwd=repo / "README.md", mode="keyword")


@pytest.mark.parametrize(
    "path",
    [
        "/a/b/c.md",
        "/c.md",
        "/a/b/",
        "/a//b/c.md",
        "/a/./c.md",
        "/a/b/.hidden.md",
        "rel/c.md",
        "./rel/c.md",
        "/a b/é/c d.md",
    ],
)
def test_a_hit_file_path_is_the_path_pathlib_makes(path: str) -> None:
    """The Path and the string a hit's ``source`` is written with: the one pathlib would print
    (``path`` itself is used only where the two are the same)."""
    made, written = _file_path(path)
    assert made == Path(path) and str(made) == str(Path(path)) and made.parts == Path(path).parts
    assert written == str(Path(path))
    assert _file_path(path) == (made, written)  # its folder kept
