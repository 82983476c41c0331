"""The ``coffer`` command, run as a real subprocess against a temp home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def coffer(
    home: Path, *args: str, cwd: Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COFFER_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "coffer_memory.cli", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )


def test_remember_recall_show_edit_rm(tmp_home: Path, repo: Path) -> None:
    out = coffer(tmp_home, "remember", "Deploy with make release", "--title", "deploy", "--json", cwd=repo)
    assert out.returncode == 0, out.stderr
    fact = json.loads(out.stdout)
    fid, path = fact["fact"]["id"], fact["path"]
    assert Path(path).is_file() and fact["store"].startswith("project-")

    out = coffer(tmp_home, "recall", "how do we deploy?", cwd=repo)
    assert out.returncode == 0 and "deploy" in out.stdout and "mode: keyword" in out.stdout

    out = coffer(tmp_home, "recall", "deploy", "--mode", "grep", "--json", cwd=repo)
    assert [h["id"] for h in json.loads(out.stdout)["hits"]] == [fid]

    shown = json.loads(coffer(tmp_home, "facts", "show", fid, "--json", cwd=repo).stdout)
    assert shown["fact"]["body"] == "Deploy with make release" and shown["folder_path"] == str(
        Path(path).parent
    )

    out = coffer(
        tmp_home, "facts", "edit", fid, "--text", "-", "--expect-sha256", "0" * 64, cwd=repo, stdin="x"
    )
    assert out.returncode == 1 and "MEMORY_CONFLICT" in out.stderr
    out = coffer(
        tmp_home,
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

    assert coffer(tmp_home, "facts", "rm", fid, cwd=repo).returncode == 0
    out = coffer(tmp_home, "facts", "show", fid, "--json", cwd=repo)
    assert out.returncode == 1 and json.loads(out.stderr)["error"]["code"] == "MEMORY_NOT_FOUND"


def test_lists_stores_labels_clear_reindex_doctor(tmp_home: Path, repo: Path) -> None:
    for i in range(3):
        assert coffer(tmp_home, "remember", f"global fact {i}", "--global").returncode == 0
    coffer(tmp_home, "remember", "project fact", cwd=repo)

    page = json.loads(coffer(tmp_home, "facts", "list", "--global", "--limit", "2", "--json").stdout)
    assert len(page["items"]) == 2 and page["next_cursor"]
    rest = json.loads(
        coffer(tmp_home, "facts", "list", "--global", "--cursor", page["next_cursor"], "--json").stdout
    )
    assert len(rest["items"]) == 1 and rest["next_cursor"] is None

    stores = json.loads(coffer(tmp_home, "stores", "list", "--json").stdout)
    assert {s["name"] for s in stores} == {"global", next(s["name"] for s in stores if s["name"] != "global")}
    project = next(s for s in stores if s["name"] != "global")
    assert project["fact_count"] == 1 and project["project_root"] == str(repo.resolve())

    out = coffer(tmp_home, "stores", "label", project["name"], "Acme API")
    assert out.returncode == 0 and "Acme API" in out.stdout
    assert "Acme API" in coffer(tmp_home, "stores", "list").stdout
    assert coffer(tmp_home, "stores", "label", project["name"], "--clear").stdout.strip().endswith("repo")

    out = coffer(tmp_home, "clear", "--global")
    assert out.returncode == 1 and "--yes" in out.stderr
    assert "cleared 3" in coffer(tmp_home, "clear", "--global", "--yes").stdout

    (tmp_home / "index.db").unlink()
    out = coffer(tmp_home, "reindex", "--json")
    assert out.returncode == 0, out.stderr
    assert sum(r["added"] for r in json.loads(out.stdout)) == 1

    out = coffer(tmp_home, "doctor")
    assert out.returncode == 0 and "ok" in out.stdout and "grep backend: ripgrep" in out.stdout


def test_errors_exit_nonzero_with_the_code(tmp_home: Path, tmp_path: Path) -> None:
    out = coffer(tmp_home, "remember", "x", cwd=tmp_path)
    assert out.returncode == 1 and out.stderr.startswith("error: SCOPE_UNRESOLVED:")
    out = coffer(tmp_home, "remember", "   ", "--global")
    assert out.returncode == 1 and "MEMORY_REJECTED" in out.stderr
    out = coffer(tmp_home, "facts", "list", "--store", "../etc")
    assert out.returncode == 1 and "MEMORY_STORE_NOT_FOUND" in out.stderr
    out = coffer(tmp_home, "recall", "x", "--mode", "vector")
    assert out.returncode == 1 and "INVALID_INPUT" in out.stderr
    assert not (tmp_home / "memory").exists()


def test_remember_reads_stdin(tmp_home: Path) -> None:
    out = coffer(tmp_home, "remember", "-", "--global", "--json", stdin="from stdin\n")
    assert json.loads(out.stdout)["fact"]["body"] == "from stdin"


def test_demo_runs(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "coffer_memory.demo"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert (
        "mode=keyword" in out.stdout and "mode=grep" in out.stdout and "deploy-via-make-release" in out.stdout
    )
    session_start = out.stdout.split("session start:", 1)[1]
    assert (
        session_start.index("make lint")
        < session_start.index("short paragraphs")
        < session_start.index("coffer__resume")
    )


def test_lane_commands(tmp_home: Path, repo: Path) -> None:
    assert coffer(tmp_home, "journal", "add", "Deployed v2 to staging", cwd=repo).returncode == 0
    days = json.loads(coffer(tmp_home, "journal", "--json", cwd=repo).stdout)
    assert len(days) == 1 and "Deployed v2" in days[0]["text"]
    assert coffer(tmp_home, "handoff", "save", "-", cwd=repo, stdin="WIP: parser").returncode == 0
    out = coffer(tmp_home, "resume", cwd=repo)
    assert "WIP: parser" in out.stdout and "'main'" in out.stdout
    assert coffer(tmp_home, "memory", "rules", "--add", "Never force-push main", cwd=repo).returncode == 0
    assert coffer(tmp_home, "memory", "rules", "--add", "Answer in English", "--global").returncode == 0
    bundle = json.loads(coffer(tmp_home, "session-context", "--json", cwd=repo).stdout)["additional_context"]
    assert bundle.index("force-push") < bundle.index("English") < bundle.index("coffer__resume")
    assert coffer(tmp_home, "memory", "rules", "--delete", cwd=repo).returncode == 1  # needs --yes
    assert coffer(tmp_home, "memory", "rules", "--delete", "--yes", cwd=repo).returncode == 0
    assert "deleted: rules/rules.md" in coffer(tmp_home, "memory", "log", cwd=repo).stdout
    out = coffer(tmp_home, "journal", "rm", "2001-01-01", cwd=repo)
    assert out.returncode == 1 and "MEMORY_NOT_FOUND" in out.stderr


def test_organize_without_a_model_says_so(tmp_home: Path) -> None:
    coffer(tmp_home, "remember", "an inbox item", "--global")
    out = coffer(tmp_home, "organize", "--global", "--dry-run")
    assert out.returncode == 0 and "no LLM is configured" in out.stdout
    assert json.loads(coffer(tmp_home, "reorg", "--global", "--json").stdout)["status"] == "no_model"
