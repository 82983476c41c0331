"""Distillation end to end: realistic sessions of three agents, a scripted OpenAI-compatible model on
127.0.0.1 that records every request, and the journal, index, ledger and audit it leaves behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from agent_samples import FAKE_SECRETS, SECRET_CORES, AgentSamples, build
from conftest import make_repo, poll
from http_scripted import Reply, ScriptedServer, answer, fail, serve

from coffer_memory import InvalidInput, MemoryService
from coffer_memory._cli import main as cli_main
from coffer_memory._errors import SessionNotFound
from coffer_memory._scope import project_id_for
from coffer_memory._store.paths import store_name_for_project
from coffer_memory._transcripts.ledger import Ledger

USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def insights_from_prompt(body: Any) -> Reply:
    """Two insights, the second echoing the start of the prompt: anything that leaked into the
    request would land in the journal too, where the test looks for it."""
    prompt = body["messages"][-1]["content"]
    payload = {
        "insights": [
            {
                "name": "use-make-release",
                "description": "Tag and push releases through make release.",
                "body": "## Why\n\nThe Makefile target runs the release checks before tagging.",
            },
            {"name": "session-echo", "description": "What the model was shown.", "body": prompt[:1500]},
        ]
    }
    return answer(json.dumps(payload), usage=USAGE)(body)


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    yield from serve(monkeypatch, insights_from_prompt)


@pytest.fixture
def samples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentSamples:
    project = make_repo(tmp_path / "work" / "demo-repo")
    written = build(tmp_path / "agents", project_dir=project)
    for key, value in written.env.items():
        if key != "HOME":
            monkeypatch.setenv(key, value)
    return written


def write_llm_config(home: Path, url: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'[llm]\nprovider = "openai"\nmodel = "test-chat"\nbase_url = "{url}"\n'
        "max_retries = 0\ntimeout_seconds = 10\n"
    )


@pytest.fixture
def svc(tmp_home: Path, llm: ScriptedServer) -> Iterator[MemoryService]:
    write_llm_config(tmp_home, llm.url)
    with MemoryService(tmp_home) as service:
        yield service


def project_store(samples: AgentSamples) -> str:
    return store_name_for_project(project_id_for(samples.project_dir))


def all_bytes_under(root: Path) -> Iterator[tuple[Path, bytes]]:
    for path in root.rglob("*"):
        if path.is_file():
            yield path, path.read_bytes()


def assert_no_secret(blob: bytes, where: str) -> None:
    for kind, value in {**FAKE_SECRETS, **{f"core:{k}": v for k, v in SECRET_CORES.items()}}.items():
        assert value.encode() not in blob, f"{kind} leaked into {where}"


def test_every_sample_session_distills_without_leaking_a_secret(
    svc: MemoryService, samples: AgentSamples, llm: ScriptedServer, tmp_home: Path
) -> None:
    statuses = {}
    for expected in samples.expected:
        result = svc.distill_session(expected.agent, expected.session_id)
        statuses[(expected.agent, expected.session_id)] = result.status
        in_project = expected.project_path == str(samples.project_dir)
        assert result.status == ("distilled" if in_project else "not_git"), (expected, result)
        if in_project:
            assert result.store == project_store(samples) and len(result.insights) == 2
            assert result.prompt_tokens == 11 and result.completion_tokens == 7
            assert all(v > 0 for v in result.scrubbed.values())
    assert "distilled" in statuses.values() and len({a for a, _ in statuses}) == 3
    # Nothing secret in what left the process ...
    assert llm.requests, "the model was never asked"
    for seen in llm.requests:
        assert_no_secret(seen.raw, f"a request to {seen.path}")
    # ... nor in any file of the coffer home (journal, index, ledger, logs).
    svc.close()
    for path, data in all_bytes_under(tmp_home):
        assert_no_secret(data, str(path))


def test_insights_land_in_the_journal_with_their_session(svc: MemoryService, samples: AgentSamples) -> None:
    expected = next(e for e in samples.expected if e.project_path == str(samples.project_dir))
    result = svc.distill_session(expected.agent, expected.session_id)
    (path,) = result.paths
    text = Path(path).read_text()
    assert f"· agent · session {expected.session_id}" in text
    assert "**use-make-release**: Tag and push releases through make release." in text
    assert "### Why" in text and "\n## Why" not in text  # headings inside an insight are demoted
    hits = svc.recall("release checks before tagging", cwd=samples.project_dir, mode="keyword").hits
    assert hits and hits[0].path == Path(path)
    store = project_store(samples)
    (meta,) = svc.db.rows("SELECT metadata FROM documents WHERE path = ?", (svc.db.key(Path(path)),))
    assert json.loads(meta[0])["origin_session_ids"] == [expected.session_id]
    audits = [a for a in svc.audit_events(store) if a["event"] == "memory_added"]
    assert {a["details"]["origin_session_id"] for a in audits} == {expected.session_id}
    assert {a["details"]["lane"] for a in audits} == {"journal"}


def test_same_content_is_never_distilled_twice(
    svc: MemoryService, samples: AgentSamples, llm: ScriptedServer
) -> None:
    expected = next(e for e in samples.expected if e.project_path == str(samples.project_dir))
    first = svc.distill_session(expected.agent, expected.session_id)
    calls = len(llm.requests)
    again = svc.distill_session(expected.agent, expected.session_id)
    assert (first.status, again.status, len(llm.requests)) == ("distilled", "already_distilled", calls)
    journal = Path(first.paths[0]).read_text()
    sweep = svc.sweep(expected.agent)
    assert expected.session_id not in {r.session_id for r in sweep.results}
    assert Path(first.paths[0]).read_text().count(f"session {expected.session_id}") == journal.count(
        f"session {expected.session_id}"
    )
    (entry,) = svc.distilled_sessions(expected.agent, expected.session_id)
    assert (entry.status, entry.insights, entry.prompt_tokens) == ("done", 2, 11)


def test_malformed_answer_writes_nothing_and_is_retried_later(
    svc: MemoryService, samples: AgentSamples, llm: ScriptedServer
) -> None:
    expected = next(e for e in samples.expected if e.project_path == str(samples.project_dir))
    llm.script.append(answer('{"insights": [{"name": "x", "description": "no body"'))  # truncated
    llm.script.append(answer('{"insights": [{"name": "x", "description": "", "body": "b"}]}'))
    for _ in range(2):
        bad = svc.distill_session(expected.agent, expected.session_id)
        assert bad.status == "invalid_output" and bad.detail and not bad.paths
    assert not (svc.paths(project_store(samples)).journal).exists()
    assert svc.distilled_sessions(expected.agent) == []
    assert svc.distill_session(expected.agent, expected.session_id).status == "distilled"


def test_no_model_and_not_git_are_no_ops(tmp_home: Path, samples: AgentSamples, tmp_path: Path) -> None:
    expected = next(e for e in samples.expected if e.project_path == str(samples.project_dir))
    with MemoryService(tmp_home) as plain:
        result = plain.distill_session(expected.agent, expected.session_id)
        assert result.status == "no_model" and not result.paths
        elsewhere = tmp_path / "not-a-repo"
        elsewhere.mkdir()
        assert plain.distill_session(expected.agent, expected.session_id, cwd=elsewhere).status == "not_git"
        assert not (tmp_home / "ledger.db").exists()  # a no-op writes nothing, not even the ledger
        assert plain.distilled_sessions() == []


def test_dry_run_shows_insights_and_writes_nothing(
    svc: MemoryService, samples: AgentSamples, tmp_home: Path
) -> None:
    expected = next(e for e in samples.expected if e.project_path == str(samples.project_dir))
    result = svc.distill_session(expected.agent, expected.session_id, dry_run=True)
    assert result.status == "dry_run" and [i.name for i in result.insights] == [
        "use-make-release",
        "session-echo",
    ]
    assert not result.paths and svc.distilled_sessions() == []
    assert not svc.paths(project_store(samples)).journal.exists()


def test_sweep_is_bounded_and_skips_active_sessions(svc: MemoryService, samples: AgentSamples) -> None:
    in_project = [e for e in samples.expected if e.project_path == str(samples.project_dir)]
    first = svc.sweep(limit=1)
    assert len(first.results) == 1 and first.remaining == len(samples.expected) - 1
    # Everything in the samples is old; a huge idle window makes every session "active".
    assert svc.sweep(min_idle_seconds=10**10).skipped_active == len(samples.expected)
    rest = svc.sweep(limit=100)
    done = {(r.agent, r.session_id) for r in (*first.results, *rest.results) if r.status == "distilled"}
    assert done == {(e.agent, e.session_id) for e in in_project}
    assert svc.sweep(limit=100).remaining == 0
    with pytest.raises(InvalidInput):
        svc.sweep(limit=0)
    with pytest.raises(InvalidInput):
        svc.sweep("cursor")


def test_forget_session_removes_what_it_produced(svc: MemoryService, samples: AgentSamples) -> None:
    project = [e for e in samples.expected if e.project_path == str(samples.project_dir)][:2]
    for e in project:
        svc.distill_session(e.agent, e.session_id)
    gone, kept = project
    writes = svc.forget_session(gone.session_id, cwd=samples.project_dir)
    assert len(writes) == 1
    text = writes[0].path.read_text()
    assert f"session {gone.session_id}" not in text and f"session {kept.session_id}" in text
    (meta,) = svc.db.rows("SELECT metadata FROM documents WHERE path = ?", (svc.db.key(writes[0].path),))
    assert json.loads(meta[0])["origin_session_ids"] == [kept.session_id]
    assert svc.forget_session(gone.session_id, cwd=samples.project_dir) == []
    # The ledger remembers it was distilled: a sweep does not bring it back.
    assert gone.session_id not in {r.session_id for r in svc.sweep(limit=100).results}


def test_forget_session_says_exactly_what_it_leaves(
    svc: MemoryService, samples: AgentSamples, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/transcripts.md said forget-session deletes "what a session produced"; it deletes the
    distilled journal entries only. The facts an agent remembered in that session (MCP
    ``session_id``), the ledger row and the logs stay: the command names them (new-user pass)."""
    e = next(x for x in samples.expected if x.project_path == str(samples.project_dir))
    svc.distill_session(e.agent, e.session_id)
    kept = svc.remember(
        "Deploys go through make release.", cwd=samples.project_dir, origin_session_id=e.session_id
    )
    glob = svc.remember("The user prefers uv.", scope="global", origin_session_id=e.session_id)
    svc.remember("Unrelated fact.", cwd=samples.project_dir, origin_session_id="another-session")
    assert [r.fact.id for r in svc.session_facts(e.session_id, cwd=samples.project_dir)] == [
        kept.fact.id,
        glob.fact.id,
    ]
    home = ["--home", str(svc.settings.home)]
    capsys.readouterr()
    assert cli_main([*home, "forget-session", e.session_id, "--cwd", str(samples.project_dir)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"removed session {e.session_id} entries from ")
    assert out[1].startswith("kept: 2 fact(s) remembered in this session; `coffer facts rm ID --store STORE`")
    assert out[2].split()[:2] == [kept.fact.id, project_store(samples)]
    assert out[3].split()[:2] == [glob.fact.id, "global"]
    assert (
        out[4]
        == "kept: the ledger row (so the session is not distilled again), the audit and consolidation logs"
    )
    assert kept.path.exists() and glob.path.exists()  # facts are the user's to delete, one by one
    assert not any(e.session_id in j.origin_session_ids for j in svc.journal(cwd=samples.project_dir))
    assert svc.distilled_sessions(e.agent, e.session_id)  # the ledger row stays
    assert cli_main([*home, "forget-session", e.session_id, "--cwd", str(samples.project_dir)]) == 0
    again = capsys.readouterr().out
    assert f"no journal entries came from session {e.session_id}" in again and "kept: 2 fact(s)" in again


def test_unknown_session_and_agent(svc: MemoryService, samples: AgentSamples) -> None:
    with pytest.raises(SessionNotFound) as info:
        svc.distill_session("codex", "no-such-session")
    assert info.value.code == "SESSION_NOT_FOUND"
    with pytest.raises(InvalidInput):
        svc.list_transcripts("cursor")
    assert svc.find_session(samples.expected[0].session_id).agent == samples.expected[0].agent


def test_a_live_claim_holds_the_whole_session(tmp_path: Path) -> None:
    """Two ends of one session read it at different lengths (different contents): the second
    cannot claim until the first is finished or released."""
    a, b = Ledger(tmp_path / "ledger.db"), Ledger(tmp_path / "ledger.db")
    assert a.claim("codex", "s", "short") and not b.claim("codex", "s", "longer")
    assert b.claim("codex", "other-session", "longer")
    a.release("codex", "s", "short")
    assert b.claim("codex", "s", "longer") and not a.claim("codex", "s", "short")
    b.finish("codex", "s", "longer", store=None, insights=0, prompt_tokens=0, completion_tokens=0)
    assert a.claim("codex", "s", "short")
    a.close()
    b.close()


def test_two_ledgers_never_both_claim(tmp_path: Path) -> None:
    a, b = Ledger(tmp_path / "ledger.db"), Ledger(tmp_path / "ledger.db")
    assert a.claim("codex", "s", "sha") and not b.claim("codex", "s", "sha")
    b.release("codex", "s", "sha")  # the other process's claim is not released by a stranger's
    assert not a.claim("codex", "s", "sha")
    a.finish("codex", "s", "sha", store=None, insights=0, prompt_tokens=1, completion_tokens=1)
    assert b.is_done("codex", "s", "sha") and not b.claim("codex", "s", "sha")
    assert b.claim("codex", "s", "other-content")
    conn = apsw.Connection(str(tmp_path / "ledger.db"))
    conn.execute(
        "UPDATE distilled_sessions SET claimed_at = '2000-01-01' WHERE content_sha256 = 'other-content'"
    )
    conn.close()
    assert a.claim("codex", "s", "other-content")  # a dead process's stale claim is taken over
    assert oct((tmp_path / "ledger.db").stat().st_mode & 0o777) == "0o600"
    a.close()
    b.close()


def test_cli_list_show_and_distill(
    svc: MemoryService, samples: AgentSamples, tmp_home: Path, capsys: Any
) -> None:
    home = ["--home", str(tmp_home)]
    assert cli_main([*home, "transcripts", "list", "--agent", "codex", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {s["session_id"] for s in listed} == {e.session_id for e in samples.expected_for("codex")}
    target = next(e for e in samples.expected if e.project_path == str(samples.project_dir))
    assert cli_main([*home, "transcripts", "show", target.session_id]) == 0
    shown = capsys.readouterr().out
    assert "removed before any model sees it" in shown
    assert_no_secret(shown.encode(), "coffer transcripts show")
    assert cli_main([*home, "distill", target.session_id, "--dry-run"]) == 0
    assert "dry_run" in capsys.readouterr().out
    assert cli_main([*home, "distill", "--sweep", "--limit", "100", "--json"]) == 0
    swept = json.loads(capsys.readouterr().out)
    assert {r["status"] for r in swept["results"]} <= {"distilled", "not_git", "empty"}
    assert cli_main([*home, "forget-session", target.session_id, "--cwd", str(samples.project_dir)]) == 0
    assert "removed session" in capsys.readouterr().out


def test_session_end_hook_distills_in_the_background(
    tmp_home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    write_llm_config(tmp_home, llm.url)
    claude = next(
        e for e in samples.expected_for("claude-code") if e.project_path == str(samples.project_dir)
    )
    stdin = json.dumps(
        {
            "session_id": claude.session_id,
            "cwd": claude.project_path,
            "hook_event_name": "SessionEnd",
            "reason": "prompt_input_exit",
        }
    ).encode()
    env = {**os.environ, "COFFER_HOME": str(tmp_home)}
    hook = str(Path(sys.executable).parent / "coffer-hook")
    proc = subprocess.run(
        [hook, "--agent", "claude-code"], input=stdin, env=env, capture_output=True, timeout=30
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    ledger = Ledger(tmp_home / "ledger.db")
    deadline = time.monotonic() + 60  # a bound on the background worker, not a timing assertion
    while time.monotonic() < deadline and not ledger.entries(session_id=claude.session_id):
        time.sleep(0.2)
    while time.monotonic() < deadline and ledger.entries(session_id=claude.session_id)[0].status != "done":
        time.sleep(0.2)
    (entry,) = ledger.entries(session_id=claude.session_id)
    ledger.close()
    assert entry.status == "done" and entry.insights == 2
    assert not (tmp_home / "logs" / "hook.log").exists()


# -- REST ---------------------------------------------------------------------------------------
def test_rest_list_search_sort_paginate(client: Any, samples: AgentSamples) -> None:
    url = "/api/v1/agents/claude-code/transcripts"
    everything = client.get(url, params={"limit": 500}).json()
    claude = samples.expected_for("claude-code")
    assert everything["total"] == len(claude) and len(everything["items"]) == len(claude)
    by_count = client.get(url, params={"sort": "message_count", "order": "asc", "limit": 500}).json()["items"]
    counts = [s["message_count"] for s in by_count]
    assert counts == sorted(counts)
    page = client.get(url, params={"limit": 1, "offset": 1, "sort": "message_count", "order": "asc"}).json()
    assert page["items"] == by_count[1:2] and page["total"] == len(claude)
    project = client.get(url, params={"project": str(samples.project_dir), "limit": 500}).json()["items"]
    assert {s["project_path"] for s in project} == {str(samples.project_dir)}
    other = next(e for e in claude if e.project_path != str(samples.project_dir))
    found = client.get(url, params={"search": Path(other.project_path).name.upper()}).json()["items"]
    assert other.session_id in {s["session_id"] for s in found}
    assert client.get(url, params={"sort": "title"}).status_code == 422
    assert client.get("/api/v1/agents/cursor/transcripts").json()["error"]["code"] == "INVALID_INPUT"


def test_rest_scrubbed_view_and_missing_session(client: Any, samples: AgentSamples) -> None:
    target = samples.expected_for("codex")[0]
    r = client.get(f"/api/v1/agents/codex/transcripts/{target.session_id}")
    assert r.status_code == 200 and r.json()["session"]["session_id"] == target.session_id
    assert_no_secret(r.content, "the scrubbed view")
    missing = client.get("/api/v1/agents/codex/transcripts/nope")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "SESSION_NOT_FOUND"


def test_rest_session_end_distills_once(client: Any, samples: AgentSamples, llm: ScriptedServer) -> None:
    target = next(
        e for e in samples.expected_for("claude-code") if e.project_path == str(samples.project_dir)
    )
    url = f"/api/v1/agents/claude-code/sessions/{target.session_id}/end"
    r = client.post(url, json={"cwd": target.project_path, "transcript_path": "/ignored.jsonl"})
    assert r.status_code == 202 and r.headers["Location"].startswith("/api/v1/operations/")
    op = poll(client, r.headers["Location"])
    assert op["status"] == "succeeded" and op["kind"] == "distill"
    (result,) = op["distill"]["results"]
    assert result["status"] == "distilled" and len(result["insights"]) == 2
    again = poll(client, client.post(url, json={"cwd": target.project_path}).headers["Location"])
    assert again["distill"]["results"][0]["status"] == "already_distilled"
    assert client.post(url, json={"cwd": "relative/path"}).status_code == 422
    started = client.post("/api/v1/agents/codex/transcripts/sweep", params={"limit": 5}, json={})
    sweep = poll(client, started.headers["Location"])
    assert sweep["status"] == "succeeded" and sweep["distill"]["considered"] == len(
        samples.expected_for("codex")
    )


def test_codex_session_start_sweeps_past_sessions_in_the_background(
    tmp_home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    # Codex has no SessionEnd hook: SessionStart starts a bounded sweep, at most once per interval.
    write_llm_config(tmp_home, llm.url)
    stdin = json.dumps(
        {
            "session_id": "new",
            "cwd": str(samples.project_dir),
            "hook_event_name": "SessionStart",
            "source": "startup",
        }
    ).encode()
    env = {**os.environ, "COFFER_HOME": str(tmp_home)}
    hook = str(Path(sys.executable).parent / "coffer-hook")
    for agent in ("claude-code", "codex", "codex"):
        proc = subprocess.run([hook, "--agent", agent], input=stdin, env=env, capture_output=True, timeout=30)
        assert proc.returncode == 0 and b"additionalContext" in proc.stdout
    stamps = sorted(p.name for p in (tmp_home / "logs").glob("sweep-*.stamp"))
    assert stamps == ["sweep-codex.stamp"]
    codex_in_project = {
        e.session_id for e in samples.expected_for("codex") if e.project_path == str(samples.project_dir)
    }
    ledger = Ledger(tmp_home / "ledger.db")
    deadline = time.monotonic() + 90  # a bound on the background worker, not a timing assertion
    done: set[str] = set()
    while time.monotonic() < deadline and done != codex_in_project:
        done = {e.session_id for e in ledger.entries("codex") if e.status == "done"}
        time.sleep(0.2)
    ledger.close()
    assert done == codex_in_project
    assert not (tmp_home / "logs" / "hook.log").exists()


# -- a distillation killed and run again -----------------------------------------------------------
def _distill_cli(home: Path, session_id: str) -> subprocess.Popen[str]:
    env = {**os.environ, "COFFER_HOME": str(home)}
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "coffer"), "distill", session_id, "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _journal_text(home: Path, store: str) -> str:
    with MemoryService(home) as svc:
        folder = svc.paths(store).journal
    return "".join(p.read_text() for p in sorted(folder.glob("*.md"))) if folder.is_dir() else ""


def test_a_killed_distillation_run_again_leaves_each_entry_once(
    tmp_home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """``coffer distill`` SIGKILLed while the model answers, after its journal write but before
    its ledger records it (the ledger held by another process), and at once, then run to the end:
    each insight is in the journal exactly once, whole, and the ledger says done. Before, the run
    after a kill that came between the journal and the ledger wrote every entry a second time."""
    write_llm_config(tmp_home, llm.url)
    target = next(e for e in samples.expected if e.project_path == str(samples.project_dir))
    store = project_store(samples)
    ledger_path = tmp_home / "ledger.db"
    asked, release = threading.Event(), threading.Event()
    holder: list[apsw.Connection] = []

    def model_waits(body: Any) -> Reply:  # kill 1: the model has the request and has not answered
        asked.set()
        release.wait(60)
        return insights_from_prompt(body)

    def ledger_held(body: Any) -> Reply:  # kill 2: the ledger is busy when the run wants to record
        conn = apsw.Connection(str(ledger_path))
        conn.execute("BEGIN EXCLUSIVE")
        holder.append(conn)
        return insights_from_prompt(body)

    llm.script.extend([model_waits, ledger_held])
    proc = _distill_cli(tmp_home, target.session_id)
    assert asked.wait(60)
    proc.kill()
    proc.wait(60)
    release.set()
    assert "use-make-release" not in _journal_text(tmp_home, store)

    proc = _distill_cli(tmp_home, target.session_id)
    deadline = time.monotonic() + 60  # a bound on the child, not a timing assertion
    while "use-make-release" not in _journal_text(tmp_home, store) and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.kill()
    proc.wait(60)
    holder[0].execute("ROLLBACK")
    holder[0].close()
    assert _journal_text(tmp_home, store).count("**use-make-release**") == 1

    proc = _distill_cli(tmp_home, target.session_id)  # kill 3: wherever it is
    time.sleep(0.3)
    proc.kill()
    proc.wait(60)

    proc = _distill_cli(tmp_home, target.session_id)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out)["status"] in ("already_distilled", "distilled")
    text = _journal_text(tmp_home, store)
    assert text.count("**use-make-release**") == 1
    assert text.count("**session-echo**") == 1
    assert text.count(f"session {target.session_id}") == 2
    with MemoryService(tmp_home) as svc:
        (entry,) = svc.distilled_sessions(target.agent, target.session_id)
        assert entry.status == "done"
        journal = svc.journal(cwd=samples.project_dir)
        assert sum(len(day.entries) for day in journal) == 2
        assert not svc.doctor().index_mismatches


@pytest.mark.parametrize(("sort", "order"), [("last_activity_at", "desc"), ("started_at", "asc")])
def test_cli_list_of_every_agent_is_one_sorted_list(
    svc: MemoryService, samples: AgentSamples, tmp_home: Path, capsys: Any, sort: str, order: str
) -> None:
    # "coffer transcripts list: every agent, most recent first" printed Claude Code's sessions, then
    # Codex's, then OpenCode's, each sorted on its own: the most recent session could be in the middle.
    args = ["--home", str(tmp_home), "transcripts", "list", "--sort", sort, "--order", order, "--json"]
    assert cli_main(args) == 0
    listed = json.loads(capsys.readouterr().out)
    assert len({s["agent"] for s in listed}) == 3
    keys = [s[sort] for s in listed]
    assert keys == sorted(keys, reverse=order == "desc")


def test_cli_list_limit_caps_the_one_list(
    svc: MemoryService, samples: AgentSamples, tmp_home: Path, capsys: Any
) -> None:
    # `coffer transcripts list --limit 2` printed up to 2 sessions of each agent (6 rows with three
    # agents): the limit was applied per agent, before the lists were merged into one. It caps the
    # one list now, so it gives the 2 most recent sessions whichever agents had them.
    args = ["--home", str(tmp_home), "transcripts", "list", "--json"]
    assert cli_main(args) == 0
    every = json.loads(capsys.readouterr().out)
    assert len(every) > 2 and len({s["agent"] for s in every}) == 3
    assert cli_main([*args, "--limit", "2"]) == 0
    assert json.loads(capsys.readouterr().out) == every[:2]


def test_cli_distill_exits_1_when_the_configured_model_fails(
    svc: MemoryService, samples: AgentSamples, llm: ScriptedServer, tmp_home: Path, capsys: Any
) -> None:
    # A refused key (HTTP 401) was reported as status no_model and the command exited 0, like a
    # home with no model at all: a sweep run by cron looked fine while nothing was distilled.
    target = next(e for e in samples.expected if e.project_path == str(samples.project_dir))
    home = ["--home", str(tmp_home)]
    llm.script.extend([fail(401, "Incorrect API key provided")] * 2)
    assert cli_main([*home, "distill", target.session_id]) == 1
    assert "HTTP 401" in capsys.readouterr().out
    assert cli_main([*home, "distill", "--sweep", "--limit", "1"]) == 1
    out = capsys.readouterr().out
    assert "HTTP 401" in out and "0 distilled" in out
    (tmp_home / "config.toml").unlink()  # no model configured: a no-op that says so, exit 0
    assert cli_main([*home, "distill", target.session_id]) == 0
    assert "no_model" in capsys.readouterr().out
