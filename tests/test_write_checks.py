"""The Writer's content checks and failure modes (issue #12 items 2, 3, 7, 9), through every face."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coffer_memory import InvalidInput, MemoryRejected, MemoryService, Settings
from coffer_memory._agents.context import session_context

TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
API = "/api/v1/memory_stores"


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- item 9: lone surrogates and NUL --------------------------------------------------------------
@pytest.mark.parametrize("bad", ["\ud83d", "a\x00b"])
def test_unwritable_text_is_invalid_input_over_rest(client: Any, tmp_home: Path, bad: str) -> None:
    body = json.dumps({"text": f"fact {bad}", "title": "t"})  # ensure_ascii keeps the surrogate escaped
    r = client.post(f"{API}/global/facts", content=body, headers={"content-type": "application/json"})
    assert r.status_code in (400, 422), r.text
    assert r.json()["error"]["code"] == "INVALID_INPUT"
    assert not (tmp_home / "memory" / "global" / "knowledge").exists()


@pytest.mark.parametrize("method", ["journal_append", "append_rule", "save_handoff"])
def test_a_lone_surrogate_never_reaches_a_lane(svc: MemoryService, repo: Path, method: str) -> None:
    with pytest.raises(InvalidInput):
        getattr(svc, method)("where \udc80 stands", cwd=repo)
    assert not svc.target(cwd=repo).store_dir.exists()


# -- item 2: symbolic links in the lanes ----------------------------------------------------------
@pytest.fixture
def secret_outside(tmp_path: Path) -> Path:
    path = tmp_path / "id_rsa"
    path.write_text("-----BEGIN OPENSSH PRIVATE KEY----- outside the store\n")
    return path


def test_a_symlinked_rules_file_reaches_no_reader(
    svc: MemoryService, repo: Path, secret_outside: Path
) -> None:
    svc.append_rule("run make test before committing", cwd=repo)
    rules = svc.target(cwd=repo).store_dir / "rules"
    (rules / "keys.md").symlink_to(secret_outside)
    global_rules = svc.target(scope="global").store_dir / "rules"
    global_rules.mkdir(parents=True)
    (global_rules / "rules.md").symlink_to(secret_outside)
    view = svc.rules(cwd=repo)
    assert "make test" in view.text and "PRIVATE KEY" not in view.text
    assert [p.name for p in view.files] == ["rules.md"]
    assert "PRIVATE KEY" not in svc.assemble_session_context(repo)
    assert "PRIVATE KEY" not in session_context(svc.settings.memory_dir, repo)  # the SessionStart bundle
    assert svc.rules(scope="global").text == ""
    assert set(svc.doctor().links) == {rules / "keys.md", global_rules / "rules.md"}
    assert not svc.doctor().ok


def test_a_symlinked_rules_folder_is_neither_read_nor_written(
    svc: MemoryService, repo: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "rules.md").write_text("# Rules\n- from outside\n")
    store = svc.target(cwd=repo).store_dir
    store.mkdir(parents=True)
    (store / "rules").symlink_to(elsewhere, target_is_directory=True)
    assert svc.rules(cwd=repo).text == ""
    with pytest.raises(InvalidInput):
        svc.append_rule("never lands outside", cwd=repo)
    assert (elsewhere / "rules.md").read_text() == "# Rules\n- from outside\n"


def test_lane_reads_and_appends_never_follow_a_link(
    svc: MemoryService, repo: Path, secret_outside: Path, tmp_path: Path
) -> None:
    first = svc.journal_append("the first episode", cwd=repo)
    store = svc.target(cwd=repo).store_dir
    (store / "journal" / "2001-01-01.md").symlink_to(secret_outside)
    (store / "consolidation-log.md").symlink_to(secret_outside)
    assert [j.period for j in svc.journal(cwd=repo)] == [first.path.stem]
    assert svc.consolidation_log(cwd=repo).text is None
    bashrc = tmp_path / ".bashrc"
    bashrc.write_text("export PATH\n")
    first.path.unlink()
    first.path.symlink_to(bashrc)
    with pytest.raises(InvalidInput):
        svc.journal_append("must not reach .bashrc", cwd=repo)
    rules = store / "rules"
    rules.mkdir()
    (rules / "rules.md").symlink_to(bashrc)
    with pytest.raises(InvalidInput):
        svc.append_rule("must not reach .bashrc either", cwd=repo)
    svc.delete_journal("2001-01-01", cwd=repo)  # removes the link itself; the log line is skipped
    assert bashrc.read_text() == "export PATH\n" and secret_outside.read_text().startswith("-----BEGIN")
    assert not (store / "journal" / "2001-01-01.md").is_symlink()


# -- item 3: secrets typed into a memory ----------------------------------------------------------
def test_a_secret_is_redacted_on_every_write_path(svc: MemoryService, repo: Path) -> None:
    fact = svc.remember(f"the CI token is {TOKEN}", title=f"token {TOKEN}", cwd=repo)
    assert fact.receipt is not None and dict(fact.receipt.findings) == {"github_token": 2}
    edited = svc.edit_fact(fact.fact.id, body=f"rotated: {TOKEN}", cwd=repo)
    assert edited.receipt is not None and dict(edited.receipt.findings) == {"github_token": 1}
    svc.journal_append(f"pushed with {TOKEN}", cwd=repo)
    svc.save_handoff(f"next: revoke {TOKEN}", cwd=repo)
    svc.append_rule(f"never print {TOKEN}", cwd=repo)
    on_disk = files_under(svc.settings.memory_dir)
    assert on_disk and all(TOKEN.encode() not in data for data in on_disk.values())
    # title, body (then the edited body and the description derived from it), journal, handoff, rule
    assert sum(data.count(b"[REDACTED:github_token]") for data in on_disk.values()) == 6
    assert svc.recall(TOKEN, cwd=repo, mode="grep").hits == ()
    assert TOKEN.encode() not in svc.settings.index_path.read_bytes()


def test_reject_refuses_the_write_and_allow_keeps_it(tmp_home: Path, repo: Path) -> None:
    tmp_home.mkdir(parents=True, exist_ok=True)
    (tmp_home / "config.toml").write_text('[security]\nsecrets = "reject"\n')
    with MemoryService(tmp_home) as svc:
        with pytest.raises(MemoryRejected) as caught:
            svc.remember(f"token {TOKEN}", cwd=repo)
        assert caught.value.reason == "secret" and caught.value.details["kinds"] == {"github_token": 1}
        assert TOKEN not in caught.value.message
        with pytest.raises(MemoryRejected):
            svc.journal_append(f"token {TOKEN}", cwd=repo)
        assert not svc.target(cwd=repo).store_dir.exists()
    with MemoryService(settings=Settings.load(tmp_home, security={"secrets": "allow"})) as svc:
        kept = svc.remember(f"token {TOKEN}", cwd=repo)
        assert TOKEN in kept.path.read_text()


def test_the_rest_face_redacts_and_says_so(client: Any) -> None:
    r = client.post(f"{API}/global/facts", json={"text": f"key {TOKEN}"})
    assert r.status_code == 201, r.text
    out = r.json()
    assert out["redacted"] == {"github_token": 1} and out["created"] is True
    assert TOKEN.encode() not in Path(out["fact"]["path"]).read_bytes()
    again = client.post(f"{API}/global/facts", json={"text": f"key {TOKEN}"}).json()
    assert again["created"] is False and again["fact"]["id"] == out["fact"]["id"]


# -- item 7: a durable file is a success, retries do not duplicate, a full disk is typed -------
def test_a_failed_index_write_still_answers_success(svc: MemoryService, repo: Path) -> None:
    svc.remember("warms the index up", cwd=repo)
    svc.db.conn.execute(
        "CREATE TEMP TRIGGER fail_index BEFORE INSERT ON documents "
        "BEGIN SELECT RAISE(ABORT, 'database disk image is malformed'); END"
    )
    written = svc.remember("deploys go through the staging cluster", cwd=repo)
    assert written.receipt is not None and written.receipt.index_pending
    assert written.path.is_file()
    svc.db.conn.execute("DROP TRIGGER fail_index")
    hits = svc.recall("staging cluster", cwd=repo, mode="keyword").hits
    assert [h.path for h in hits] == [written.path]  # the next read indexed it


def test_remembering_the_same_fact_twice_writes_it_once(svc: MemoryService, repo: Path) -> None:
    first = svc.remember("the API listens on 8080", title="API port", cwd=repo)
    again = svc.remember("the API listens on 8080", title="API port", cwd=repo)
    other = svc.remember("the API listens on 9090", title="API port", cwd=repo)
    assert first.created and not again.created and other.created
    assert again.fact.id == first.fact.id and again.path == first.path
    assert again.after_sha256 == first.after_sha256
    assert len(svc.list_facts(cwd=repo).items) == 2


CHILD = """
import resource, signal, sys
from pathlib import Path
from coffer_memory import MemoryService, StorageFull
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
home, repo, limit = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
with MemoryService(home) as svc:
    svc.db  # open the index before the limit
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    outcomes = []
    for call in (lambda: svc.journal_append("x" * 6000, cwd=repo), lambda: svc.remember("y" * 6000, cwd=repo)):
        try:
            call()
            outcomes.append("written")
        except StorageFull as exc:
            outcomes.append(exc.code)
print(",".join(outcomes))
"""


def test_a_full_disk_is_a_typed_error_and_leaves_nothing_half_written(tmp_home: Path, repo: Path) -> None:
    with MemoryService(tmp_home) as svc:
        journal = svc.journal_append("a short first entry", cwd=repo).path
        svc.remember("a short first fact", cwd=repo)
    before = files_under(tmp_home / "memory")
    limit = len(journal.read_bytes()) + 1024  # room for less than one more entry
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_home), str(repo), str(limit)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "STORAGE_FULL,STORAGE_FULL"
    assert files_under(tmp_home / "memory") == before  # no torn entry, no temp file, no new fact
