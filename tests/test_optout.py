"""Per-project opt-out: a ``.coffer-optout`` file or ``[projects] exclude`` keeps the hooks, distillation
and sweeps out of a repository; explicit commands keep working."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import test_distill
from agent_samples import AgentSamples
from conftest import CliRunner, git, make_repo
from http_scripted import ScriptedServer, answer, serve
from test_distill import write_llm_config

from coffer_memory import MemoryService, Settings
from coffer_memory._agents.hook import run as hook_run
from coffer_memory._optout import OPTOUT_FILE, exclude_patterns, optout_for


def _hook(home: Path, event: str, cwd: Path, **extra: str) -> str:
    payload = {"hook_event_name": event, "cwd": str(cwd), "session_id": "s-1", **extra}
    out = io.StringIO()
    assert (
        hook_run(
            ["--agent", "claude-code", "--home", str(home)], io.BytesIO(json.dumps(payload).encode()), out
        )
        == 0
    )
    return out.getvalue()


def _rules(home: Path, repo: Path) -> None:
    with MemoryService(home) as svc:
        svc.append_rule("always run the migrations first", cwd=repo)


def test_the_marker_file_silences_session_start(tmp_home: Path, repo: Path) -> None:
    _rules(tmp_home, repo)
    assert "run the migrations first" in _hook(tmp_home, "SessionStart", repo)
    (repo / OPTOUT_FILE).write_text("")
    assert _hook(tmp_home, "SessionStart", repo) == ""
    (repo / "src").mkdir()
    assert _hook(tmp_home, "SessionStart", repo / "src") == ""
    with MemoryService(tmp_home) as svc:
        assert svc.assemble_session_context(repo) == ""
        optout = svc.project_optout(repo)
        assert optout is not None and optout.source == str(repo.resolve() / OPTOUT_FILE)
        # Explicit commands keep working in an opted-out repository.
        assert svc.remember("asked for on purpose", cwd=repo).fact.id
        assert svc.recall("purpose", cwd=repo).hits


def test_a_worktree_of_an_opted_out_repository_is_opted_out(
    tmp_home: Path, repo: Path, tmp_path: Path
) -> None:
    (repo / OPTOUT_FILE).write_text("this checkout only\n")  # untracked: the worktree lacks it
    worktree = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(worktree), "-b", "feature")
    assert not (worktree / OPTOUT_FILE).exists()
    assert optout_for(worktree, []) is not None


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    """A loopback server standing in for coffer-api: records what the hook sends."""
    yield from serve(monkeypatch, answer("{}"))


def test_session_end_hands_nothing_over_in_an_opted_out_repository(
    tmp_home: Path, repo: Path, tmp_path: Path, api: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COFFER_API_URL", api.url.removesuffix("/v1"))
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("{}\n")
    other = make_repo(tmp_path / "other")
    (repo / OPTOUT_FILE).write_text("")
    _hook(tmp_home, "SessionEnd", repo, transcript_path=str(transcript))
    assert api.requests == []
    _hook(tmp_home, "SessionEnd", other, transcript_path=str(transcript))
    assert len(api.requests) == 1  # the same call from a repository that takes part goes out


def test_config_patterns_match_a_folder_above_or_a_glob(
    tmp_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clients = make_repo(tmp_path / "clients" / "acme")
    secret = make_repo(tmp_path / "work" / "billing-secret")
    plain = make_repo(tmp_path / "work" / "billing")
    tmp_home.mkdir()
    (tmp_home / "config.toml").write_text(
        f'[projects]\nexclude = ["{tmp_path / "clients"}", "{tmp_path}/work/*-secret"]\n'
    )
    patterns = exclude_patterns(tmp_home)  # the hook's light reader agrees with Settings
    assert patterns == Settings.load(tmp_home).projects.exclude
    assert optout_for(clients, patterns) is not None and optout_for(secret, patterns) is not None
    assert optout_for(plain, patterns) is None and optout_for(tmp_path, patterns) is None
    monkeypatch.setenv("COFFER_PROJECTS_EXCLUDE", f"{plain}, ~/nowhere")
    assert exclude_patterns(tmp_home) == Settings.load(tmp_home).projects.exclude == [str(plain), "~/nowhere"]
    found = optout_for(plain, exclude_patterns(tmp_home))
    assert found is not None and str(plain) in found.source
    assert _hook(tmp_home, "SessionStart", plain) == ""


# The distillation tests' fixtures: a scripted model on 127.0.0.1 and sample sessions of three agents.
llm = test_distill.llm
samples = test_distill.samples


def test_an_opted_out_project_is_never_distilled_or_swept(
    tmp_home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    write_llm_config(tmp_home, llm.url)
    (samples.project_dir / OPTOUT_FILE).write_text("")
    mine = [e for e in samples.expected if e.project_path == str(samples.project_dir)]
    assert mine
    with MemoryService(tmp_home) as svc:
        result = svc.distill_session(mine[0].agent, mine[0].session_id)
        assert result.status == "opted_out" and OPTOUT_FILE in (result.detail or "")
        swept = svc.sweep(limit=50, min_idle_seconds=0)
        assert swept.skipped_opted_out == len(mine)
        assert all(r.session_id not in {e.session_id for e in mine} for r in swept.results)
        assert not {e.session_id for e in svc.distilled_sessions()} & {m.session_id for m in mine}
        assert not svc.paths(result.store or "global").journal.exists()
    prompts = [json.dumps(r.body) for r in llm.requests]
    assert not any(str(samples.project_dir) in p for p in prompts)


def test_agents_status_and_doctor_show_the_opt_out(cli: CliRunner, repo: Path) -> None:
    assert cli("remember", "a fact", cwd=repo).returncode == 0
    (repo / OPTOUT_FILE).write_text("")
    status = cli("agents", "status", "claude-code", "--no-check", "--cwd", str(repo))
    assert "opted out by" in status.stdout and OPTOUT_FILE in status.stdout
    as_json = json.loads(cli("agents", "status", "claude-code", "--no-check", "--json", cwd=repo).stdout)
    assert any("opted out" in n for n in as_json["notes"])
    doctor = cli("doctor")
    assert "opted out: project-" in doctor.stdout and str(repo.resolve()) in doctor.stdout
    assert doctor.returncode == 0  # a choice, not a problem
    context = cli("session-context", "--cwd", str(repo))
    assert context.stdout.strip() == "" and "opted out by" in context.stderr
    # `coffer remember` still works there.
    assert cli("remember", "asked for on purpose", cwd=repo).returncode == 0
