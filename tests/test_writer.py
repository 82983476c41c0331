"""The one write transaction: every mutation goes through ``store/writer.py``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import coffer_memory
from coffer_memory import InvalidInput, MemoryService
from coffer_memory._store.files import sha256_bytes

PACKAGES = [Path(coffer_memory.__file__).parent]
ADAPTERS = [PACKAGES[0].parent / name for name in ("coffer_memory_fastapi", "coffer_memory_mcp")]
BANNED = {"atomic_write", "append_bytes", "remove_file", "replace", "rename"}
# Every module goes through store/ (a damaged index.db is moved aside by store.files.move_aside).
EXEMPT: set[str] = set()
# The adapters write no memory at all. The one exception: coffer-api --workers N shares the state
# of long-running operations through a temporary folder of the run (never memory, gone with the
# server), replaced whole so that another worker never reads half a state.
ADAPTER_EXEMPT = {"coffer_memory_fastapi/operations.py"}


def _banned_calls(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in BANNED - {"replace", "rename"}:
            found.append(f"{path}:{node.lineno} {func.id}()")
        elif isinstance(func, ast.Attribute) and func.attr in BANNED:
            owner = func.value
            # os.replace / os.rename / Path(...).rename / Path(...).replace, not str.replace
            if func.attr in {"replace", "rename"}:
                if isinstance(owner, ast.Name) and owner.id == "os":
                    found.append(f"{path}:{node.lineno} os.{func.attr}()")
                elif func.attr == "rename":
                    found.append(f"{path}:{node.lineno} .rename()")
            else:
                found.append(f"{path}:{node.lineno} .{func.attr}()")
    return found


def test_no_durable_write_outside_the_truth_layer() -> None:
    root = PACKAGES[0]
    offenders = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] == "_store" or rel.as_posix() in EXEMPT:
            continue
        offenders += _banned_calls(path)
    assert offenders == []


def test_the_adapters_write_no_files_of_their_own() -> None:
    offenders = []
    for package in ADAPTERS:
        for path in sorted(package.rglob("*.py")):
            if path.relative_to(package.parent).as_posix() not in ADAPTER_EXEMPT:
                offenders += _banned_calls(path)
    assert offenders == []


def test_the_check_finds_a_planted_call(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("import os\nos.replace('a', 'b')\nfrom x import atomic_write\natomic_write(1, 2)\n")
    assert len(_banned_calls(planted)) == 2


def test_every_mutation_carries_its_receipt_and_target(tmp_home: Path, repo: Path) -> None:
    with MemoryService(tmp_home) as svc:
        added = svc.remember("the deploy runs from CI", cwd=repo)
        assert added.receipt is not None and added.receipt.action == "created"
        assert added.receipt.after_sha256 == sha256_bytes(added.path.read_bytes()) == added.after_sha256
        assert added.target is not None and added.target.store == added.store
        assert added.target.project_root == repo.resolve() and added.target.branch is not None
        edited = svc.edit_fact(added.fact.id, body="the deploy runs from CI, twice", cwd=repo)
        assert edited.receipt is not None and edited.receipt.action == "replaced"
        assert edited.receipt.before_sha256 == added.after_sha256
        gone = svc.delete_fact(added.fact.id, cwd=repo)
        assert gone.receipt is not None and gone.receipt.action == "deleted" and not added.path.exists()
        journal = svc.journal_append("an episode", cwd=repo)
        assert journal.receipt is not None and journal.receipt.action == "created"
        again = svc.journal_append("another episode", cwd=repo)
        assert again.receipt is not None and again.receipt.action == "appended"
        assert again.before_sha256 == journal.after_sha256
        recall = svc.recall("episode", cwd=repo)
        assert [t.store for t in recall.targets] == [added.store, "global"]
        resume = svc.resume(cwd=repo)
        assert resume.target is not None and resume.target.branch == resume.branch
        page = svc.list_facts(cwd=repo)
        assert page.target == svc.target(cwd=repo) and page.target.worktree == repo.resolve()
        handoff = svc.save_handoff("where work stands", cwd=repo)
        assert handoff.target is not None and handoff.target.branch == resume.branch


def test_a_dry_run_writes_nothing(tmp_home: Path) -> None:
    with MemoryService(tmp_home) as svc:
        before = svc.remember("kept as it is", store="global")
        with svc.writer.transaction("global", dry_run=True) as tx:
            planned = tx.write(before.path, b"---\ntitle: x\n---\n\nchanged\n")
            assert tx.read(before.path) == b"---\ntitle: x\n---\n\nchanged\n"
            deleted = tx.delete(before.path)
            assert tx.read(before.path) is None
            tx.log("dry", "nothing happens")
        assert planned.dry_run and planned.action == "replaced" and deleted.action == "deleted"
        assert sha256_bytes(before.path.read_bytes()) == before.after_sha256
        assert not svc.paths("global").consolidation_log.exists()
        assert svc.audit_events("global", limit=10)[0]["event"] == "memory_added"


@pytest.mark.parametrize("field", ["text", "title", "description"])
@pytest.mark.parametrize("bad", ["\ud800 lone surrogate", "NUL \x00 inside"])
def test_unwritable_text_is_invalid_input_and_writes_nothing(tmp_home: Path, field: str, bad: str) -> None:
    kwargs = {"text": "a fact", field: bad}
    with MemoryService(tmp_home) as svc:
        with pytest.raises(InvalidInput) as caught:
            svc.remember(store="global", **kwargs)
        assert caught.value.code == "INVALID_INPUT" and caught.value.details["field"] == field
        assert not svc.paths("global").inbox.exists() or not list(svc.paths("global").inbox.iterdir())


def test_a_dry_run_journal_append_is_checked_like_a_write(svc: MemoryService, repo: Path) -> None:
    planned = svc.journal_append("an episode that is not written", cwd=repo, dry_run=True)
    assert planned.receipt is not None and planned.receipt.dry_run and planned.receipt.action == "appended"
    assert not planned.path.exists() and not svc.target(cwd=repo).store_dir.exists()
    with pytest.raises(InvalidInput):
        svc.journal_append("half \ud800 a pair", cwd=repo, dry_run=True)
