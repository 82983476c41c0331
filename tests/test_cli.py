"""The ``coffer`` command, run in-process through ``main(argv)`` against a temp home.

Only the console-script smoke tests start real processes: one per installed command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CliRunner

from coffer_memory import demo

SCRIPTS = Path(sys.executable).parent


def test_remember_recall_show_edit_rm(cli: CliRunner, tmp_home: Path, repo: Path) -> None:
    out = cli("remember", "Deploy with make release", "--title", "deploy", "--json", cwd=repo)
    assert out.returncode == 0, out.stderr
    fact = json.loads(out.stdout)
    fid, path = fact["fact"]["id"], fact["path"]
    assert Path(path).is_file() and fact["store"].startswith("project-")

    out = cli("recall", "how do we deploy?", cwd=repo)
    assert out.returncode == 0 and "deploy" in out.stdout and "mode: keyword" in out.stdout

    out = cli("recall", "deploy", "--mode", "grep", "--json", cwd=repo)
    assert [h["id"] for h in json.loads(out.stdout)["hits"]] == [fid]

    shown = json.loads(cli("facts", "show", fid, "--json", cwd=repo).stdout)
    assert shown["fact"]["body"] == "Deploy with make release" and shown["folder_path"] == str(
        Path(path).parent
    )

    out = cli("facts", "edit", fid, "--text", "-", "--expect-sha256", "0" * 64, cwd=repo, stdin="x")
    assert out.returncode == 1 and "MEMORY_CONFLICT" in out.stderr
    out = cli(
        "facts",
        "edit",
        fid,
        "--text",
        "-",
        "--expect-sha256",
        shown["sha256"],
        cwd=repo,
        stdin="Deploy with make ship",
    )
    assert out.returncode == 0, out.stderr
    assert "make ship" in Path(path).read_text()

    assert cli("facts", "rm", fid, cwd=repo).returncode == 0
    out = cli("facts", "show", fid, "--json", cwd=repo)
    assert out.returncode == 1 and json.loads(out.stderr)["error"]["code"] == "MEMORY_NOT_FOUND"


def test_lists_stores_labels_clear_reindex_doctor(cli: CliRunner, tmp_home: Path, repo: Path) -> None:
    for i in range(3):
        assert cli("remember", f"global fact {i}", "--global").returncode == 0
    cli("remember", "project fact", cwd=repo)

    page = json.loads(cli("facts", "list", "--global", "--limit", "2", "--json").stdout)
    assert len(page["items"]) == 2 and page["next_cursor"]
    rest = json.loads(cli("facts", "list", "--global", "--cursor", page["next_cursor"], "--json").stdout)
    assert len(rest["items"]) == 1 and rest["next_cursor"] is None

    stores = json.loads(cli("stores", "list", "--json").stdout)
    assert {s["name"] for s in stores} == {"global", next(s["name"] for s in stores if s["name"] != "global")}
    project = next(s for s in stores if s["name"] != "global")
    assert project["fact_count"] == 1 and project["project_root"] == str(repo.resolve())

    out = cli("stores", "label", project["name"], "Acme API")
    assert out.returncode == 0 and "Acme API" in out.stdout
    assert "Acme API" in cli("stores", "list").stdout
    assert cli("stores", "label", project["name"], "--clear").stdout.strip().endswith("repo")

    out = cli("clear", "--global")
    assert out.returncode == 1 and "--yes" in out.stderr
    assert "cleared 3" in cli("clear", "--global", "--yes").stdout

    (tmp_home / "index.db").unlink()
    out = cli("reindex", "--json")
    assert out.returncode == 0, out.stderr
    assert sum(r["added"] for r in json.loads(out.stdout)) == 1

    out = cli("doctor")
    assert out.returncode == 0 and "ok" in out.stdout and "grep backend: ripgrep" in out.stdout


def test_errors_exit_nonzero_with_the_code(cli: CliRunner, tmp_home: Path, tmp_path: Path) -> None:
    out = cli("remember", "x", cwd=tmp_path)
    assert out.returncode == 1 and out.stderr.startswith("error: SCOPE_UNRESOLVED:")
    out = cli("remember", "   ", "--global")
    assert out.returncode == 1 and "MEMORY_REJECTED" in out.stderr
    out = cli("facts", "list", "--store", "../etc")
    assert out.returncode == 1 and "MEMORY_STORE_NOT_FOUND" in out.stderr
    out = cli("recall", "x", "--mode", "vector")
    assert out.returncode == 1 and "INVALID_INPUT" in out.stderr
    assert not (tmp_home / "memory").exists()


def test_remember_reads_stdin(cli: CliRunner) -> None:
    out = cli("remember", "-", "--global", "--json", stdin="from stdin\n")
    assert json.loads(out.stdout)["fact"]["body"] == "from stdin"


def test_demo_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main([]) == 0
    out = capsys.readouterr().out
    assert "mode=keyword" in out and "mode=grep" in out and "deploy-via-make-release" in out
    session_start = out.split("session start:", 1)[1]
    assert (
        session_start.index("make lint")
        < session_start.index("short paragraphs")
        < session_start.index("coffer__resume")
    )


def test_lane_commands(cli: CliRunner, tmp_home: Path, repo: Path) -> None:
    assert cli("journal", "add", "Deployed v2 to staging", cwd=repo).returncode == 0
    days = json.loads(cli("journal", "--json", cwd=repo).stdout)
    assert len(days) == 1 and "Deployed v2" in days[0]["text"]
    assert cli("handoff", "save", "-", cwd=repo, stdin="WIP: parser").returncode == 0
    out = cli("resume", cwd=repo)
    assert "WIP: parser" in out.stdout and "'main'" in out.stdout
    assert cli("memory", "rules", "--add", "Never force-push main", cwd=repo).returncode == 0
    assert cli("memory", "rules", "--add", "Answer in English", "--global").returncode == 0
    bundle = json.loads(cli("session-context", "--json", cwd=repo).stdout)["additional_context"]
    assert bundle.index("force-push") < bundle.index("English") < bundle.index("coffer__resume")
    assert cli("memory", "rules", "--delete", cwd=repo).returncode == 1  # needs --yes
    assert cli("memory", "rules", "--delete", "--yes", cwd=repo).returncode == 0
    assert "deleted: rules/rules.md" in cli("memory", "log", cwd=repo).stdout
    out = cli("journal", "rm", "2001-01-01", cwd=repo)
    assert out.returncode == 1 and "MEMORY_NOT_FOUND" in out.stderr


def test_organize_without_a_model_says_so(cli: CliRunner) -> None:
    cli("remember", "an inbox item", "--global")
    out = cli("organize", "--global", "--dry-run")
    assert out.returncode == 0 and "no LLM is configured" in out.stdout
    assert json.loads(cli("reorg", "--global", "--json").stdout)["status"] == "no_model"


# -- the installed console scripts, as real processes (one smoke test each) -------------------------


def test_coffer_console_script_round_trip(tmp_home: Path, repo: Path) -> None:
    env = {**os.environ, "COFFER_HOME": str(tmp_home)}
    run = [str(SCRIPTS / "coffer")]
    out = subprocess.run(
        [*run, "remember", "-", "--title", "deploy"],
        input="Deploy with make release",
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    out = subprocess.run(
        [*run, "recall", "deploy", "--json"], cwd=repo, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert [h["title"] for h in json.loads(out.stdout)["hits"]] == ["deploy"]


@pytest.mark.parametrize("script", ["coffer-hook", "coffer-api", "coffer-mcp"])
def test_console_script_prints_help(script: str) -> None:
    out = subprocess.run([str(SCRIPTS / script), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"usage: {script}")
