"""Which branch a handoff is saved under when HEAD is detached: mid-rebase (a real ``git rebase``
stopped on a conflict, in a linked worktree and in the main checkout), and a plain detached HEAD
(one scene per checkout, never a literal ``HEAD`` shared by all of them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from conftest import GIT_ENV, git, make_repo

from coffer_memory import MemoryService


def _conflicting(tmp_path: Path) -> tuple[Path, Path]:
    """A repository whose ``main`` and a worktree's ``feature`` changed the same line."""
    repo = make_repo(tmp_path / "repo")
    worktree = tmp_path / "wt-feature"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(worktree))
    (worktree / "README.md").write_text("feature\n")
    git(worktree, "commit", "-q", "-am", "feature edits the readme")
    (repo / "README.md").write_text("main\n")
    git(repo, "commit", "-q", "-am", "main edits the readme")
    return repo, worktree


def _rebase_stops(worktree: Path, *extra: str) -> None:
    env = {**os.environ, **GIT_ENV, "HOME": str(worktree), "GIT_EDITOR": "true"}
    proc = subprocess.run(
        ["git", "rebase", *extra, "main"], cwd=worktree, env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode != 0 and "CONFLICT" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert git(worktree, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"  # detached, as git leaves it


@pytest.mark.parametrize("backend", ["--merge", "--apply"])
def test_a_handoff_written_mid_rebase_belongs_to_the_branch_being_rebased(
    svc: MemoryService, tmp_path: Path, backend: str
) -> None:
    """A handoff saved while a rebase waits on a conflict was saved under ``HEAD``, where no
    resume on the branch ever found it. ``rebase-merge/head-name`` (``rebase-apply/`` for the
    apply backend) in the worktree's own gitdir names the branch."""
    repo, worktree = _conflicting(tmp_path)
    before = svc.save_handoff("Feature: the readme says feature.", cwd=worktree)
    _rebase_stops(worktree, backend)
    gitdir = Path(git(worktree, "rev-parse", "--absolute-git-dir"))
    state = "rebase-merge" if backend == "--merge" else "rebase-apply"
    assert (gitdir / state / "head-name").read_text().strip() == "refs/heads/feature"

    assert svc.resolve_scope(worktree).branch == "feature"
    mid = svc.resume(cwd=worktree)
    assert mid.branch == "feature" and mid.scene is not None and mid.scene.path == before.path
    saved = svc.save_handoff("Rebasing feature on main: README.md conflicts; keep both lines.", cwd=worktree)
    assert saved.path == before.path and saved.target is not None and saved.target.branch == "feature"
    assert [s.branch for s in svc.handoffs(cwd=repo)] == ["feature"]
    assert svc.resume(cwd=repo).scene is None  # main's own scene is another one

    git(worktree, "rebase", "--abort")
    after = svc.resume(cwd=worktree)
    assert after.branch == "feature" and after.scene is not None and "keep both lines" in after.scene.text


def test_a_rebase_in_the_main_checkout_is_read_from_its_own_gitdir(
    svc: MemoryService, tmp_path: Path
) -> None:
    """Worktree-aware both ways: the main checkout's rebase state is under ``.git/``, a linked
    worktree's under ``.git/worktrees/<name>/``; neither names the other's branch."""
    repo, worktree = _conflicting(tmp_path)
    git(repo, "checkout", "-q", "-b", "topic", "main~1")
    (repo / "README.md").write_text("topic\n")
    git(repo, "commit", "-q", "-am", "topic edits the readme")
    _rebase_stops(repo)
    assert svc.resolve_scope(repo).branch == "topic"
    assert svc.resolve_scope(worktree).branch == "feature"
    assert svc.save_handoff("Topic mid-rebase.", cwd=repo).target.branch == "topic"  # type: ignore[union-attr]


def test_each_detached_checkout_keeps_its_own_scene(svc: MemoryService, tmp_path: Path) -> None:
    """A plain detached HEAD was saved as branch ``HEAD``: the detached HEADs of every worktree of
    the repository shared (and overwrote) one scene. Now it is one scene per checkout, under a key
    no branch can have (a ref name holds no space)."""
    repo, worktree = _conflicting(tmp_path)
    git(repo, "checkout", "-q", "--detach")
    git(worktree, "checkout", "-q", "--detach")
    here = svc.save_handoff("Bisecting the slow test in the main checkout.", cwd=repo)
    there = svc.save_handoff("Trying the old parser in the worktree.", cwd=worktree)
    assert here.path != there.path
    keys = {here.target.branch, there.target.branch}  # type: ignore[union-attr]
    assert keys == {"detached HEAD (main checkout)", "detached HEAD (worktree wt-feature)"}
    assert "HEAD" not in keys and all(" " in k for k in keys)
    assert svc.resume(cwd=repo).scene.text.startswith("Bisecting")  # type: ignore[union-attr]
    assert svc.resume(cwd=worktree).scene.text.startswith("Trying")  # type: ignore[union-attr]
    assert svc.resume(cwd=worktree).branch == "detached HEAD (worktree wt-feature)"
    # Back on a branch, the branch's own scene is the one resumed.
    git(worktree, "checkout", "-q", "feature")
    assert svc.resume(cwd=worktree).branch == "feature" and svc.resume(cwd=worktree).scene is None


def test_mcp_handoff_names_the_rebased_branch(svc: MemoryService, tmp_path: Path) -> None:
    from mcp import Client

    from coffer_memory_mcp import build_server

    _, worktree = _conflicting(tmp_path)
    _rebase_stops(worktree)

    async def save() -> dict[str, object]:
        async with Client(build_server(svc)) as client:
            result = await client.call_tool("coffer__handoff", {"text": "mid-rebase", "cwd": str(worktree)})
        assert not result.is_error and result.structured_content is not None
        return dict(result.structured_content)

    assert anyio.run(save)["branch"] == "feature"


def test_a_branch_whose_name_is_not_utf8_keeps_its_scene(svc: MemoryService, tmp_path: Path) -> None:
    """git takes any bytes but a few in a branch name; HEAD's bytes were read as lone surrogates,
    and ``save_handoff`` and ``resume`` failed with a raw ``UnicodeEncodeError`` (the CLI said
    "unexpected UnicodeEncodeError", MCP the same). Such a name is kept with ``\\xNN`` for each
    byte that is not UTF-8 (a ref name holds no backslash: no branch can be named so), one scene
    per branch, and JSON can carry it."""
    import json

    from conftest import GIT_ENV

    repo = make_repo(tmp_path / "repo")
    git(repo, "checkout", "-q", "-b", os.fsdecode(b"caf\xe9"))
    assert svc.resolve_scope(repo).branch == "caf\\xe9"
    saved = svc.save_handoff("Latin-1 branch scene.", cwd=repo)
    assert saved.target is not None and saved.target.branch == "caf\\xe9"
    git(repo, "checkout", "-q", "-b", os.fsdecode(b"caf\xe8"))  # another byte: another scene
    assert svc.save_handoff("Another one.", cwd=repo).path != saved.path
    git(repo, "checkout", "-q", os.fsdecode(b"caf\xe9"))
    scene = svc.resume(cwd=repo).scene
    assert scene is not None and scene.text == "Latin-1 branch scene."
    assert sorted(s.branch for s in svc.handoffs(cwd=repo)) == ["caf\\xe8", "caf\\xe9"]
    coffer = Path(sys.executable).parent / "coffer"
    env = {**os.environ, **GIT_ENV}
    proc = subprocess.run(
        [str(coffer), "--home", str(svc.settings.home), "resume", "--json"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["branch"] == "caf\\xe9"


@pytest.mark.parametrize("branch", ["\udce9", "a\ud800b"])
def test_deleting_a_handoff_of_a_lone_surrogate_is_invalid_input(
    svc: MemoryService, tmp_path: Path, branch: str
) -> None:
    from coffer_memory import InvalidInput

    repo = make_repo(tmp_path / "repo")
    with pytest.raises(InvalidInput) as caught:
        svc.delete_handoff(branch, cwd=repo)
    assert caught.value.field == "branch"


def test_a_renamed_branch_resumes_the_scene_saved_under_its_old_name(
    svc: MemoryService, tmp_path: Path
) -> None:
    """``git branch -m feature/login feature/signin`` after a handoff: ``resume`` said "No handoff
    saved for branch 'feature/signin'" though the scene was there under the old name. git moves
    the branch's reflog to the new name and notes the rename in it; resume follows it, through
    every earlier name, in a linked worktree too (renamed from the main checkout)."""
    repo = make_repo(tmp_path / "repo")
    worktree = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "feature/login", str(worktree))
    svc.save_handoff("Login form renders; the cookie is not set yet.", cwd=worktree)
    git(repo, "branch", "-m", "feature/login", "feature/signin")
    git(worktree, "branch", "-m", "feature/signin", "feature/auth")
    res = svc.resume(cwd=worktree)
    assert res.branch == "feature/auth"
    assert res.scene is not None and res.scene.text == "Login form renders; the cookie is not set yet."
    assert (res.scene.branch, res.scene.saved_as) == ("feature/auth", "feature/login")
    assert "'feature/login'" in res.summary and "'feature/auth'" in res.summary
    # Saved on the new name, that scene is the branch's own from then on.
    svc.save_handoff("Cookie set; next: logout.", cwd=worktree)
    res = svc.resume(cwd=worktree)
    assert (
        res.scene is not None
        and res.scene.branch == "feature/auth"
        and res.scene.text == "Cookie set; next: logout."
    )
    # A branch that was never renamed does not take another branch's scene.
    git(repo, "checkout", "-q", "-b", "other")
    assert svc.resume(cwd=repo).scene is None


def test_resume_without_a_scene_names_the_branches_that_have_one(svc: MemoryService, tmp_path: Path) -> None:
    """A handoff saved on one branch and resumed on another: "No handoff saved for branch 'main'."
    and nothing else, so the user (or the agent, through ``coffer__resume``) could not tell that a
    scene waited on ``feature/login``. The summary now names the branches that have one, newest
    first, and the command that prints them; the CLI prints the same."""
    repo = make_repo(tmp_path / "repo")
    git(repo, "checkout", "-q", "-b", "feature/login")
    svc.save_handoff("Login form renders.", cwd=repo)
    git(repo, "checkout", "-q", "main")
    res = svc.resume(cwd=repo)
    assert res.scene is None
    assert "feature/login" in res.summary and "coffer handoff show" in res.summary
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "coffer"), "--home", str(svc.settings.home), "resume"],
        cwd=repo,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("No handoff saved for branch 'main'.") and "feature/login" in proc.stdout


def test_a_new_branch_given_the_old_name_keeps_its_scene_to_itself(
    svc: MemoryService, tmp_path: Path
) -> None:
    """After `git branch -m login signin`, a new branch may be named `login` and save a scene of
    its own: `resume` on `signin` must not take that one (it was saved after the rename), only
    the scene `login` had when it was renamed."""
    import time

    repo = make_repo(tmp_path / "repo")
    git(repo, "checkout", "-q", "-b", "login")
    git(repo, "branch", "-m", "login", "signin")
    time.sleep(1.1)  # the reflog counts whole seconds: the new branch's scene is a second later
    git(repo, "checkout", "-q", "-b", "login")
    svc.save_handoff("The new login branch's own scene.", cwd=repo)
    git(repo, "checkout", "-q", "signin")
    res = svc.resume(cwd=repo)
    assert res.scene is None and "'login'" in res.summary  # named among the other branches
