"""Session 27, the CLI and REST faces (review26's walk): agent config files that may not be
written, ``--since -1d``, an export path that holds a line break or a terminal escape, and
``resume`` after a repository's first commit. Real console scripts in real subprocesses; the
read-only cases run in a private mount namespace (``unshare -rm``) and skip where none can be made.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from conftest import git
from served import Served

SCRIPTS = Path(sys.executable).parent


def _coffer(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPTS / "coffer"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


# -- 3: an agent config file that may not be written ---------------------------------------------


def _namespaces_work(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    try:
        proc = subprocess.run(
            [
                "unshare",
                "-rm",
                "sh",
                "-c",
                f"mount --bind '{probe}' '{probe}' && mount -o remount,bind,ro '{probe}'",
            ],
            capture_output=True,
        )
    except FileNotFoundError:
        return False
    return proc.returncode == 0


@pytest.fixture
def agent_home(tmp_path: Path) -> Path:
    """A user folder with Claude Code's settings.json and .claude.json (skips without namespaces)."""
    if not _namespaces_work(tmp_path):
        pytest.skip("no private mount namespace here (unshare -rm): cannot make a folder read-only for root")
    user = tmp_path / "user"
    (user / ".claude").mkdir(parents=True)
    (user / ".claude" / "settings.json").write_text('{"theme": "dark"}\n')
    (user / ".claude.json").write_text('{"numStartups": 3}\n')
    return user


def _read_only(paths: list[Path]) -> str:
    """A shell prefix that bind-mounts each of ``paths`` read-only over itself (a file or a folder)."""
    return "".join(f"mount --bind '{p}' '{p}' && mount -o remount,bind,ro '{p}' && " for p in paths)


def _env(user: Path) -> dict[str, str]:
    env = {**os.environ, "HOME": str(user)}
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        env.pop(name, None)
    return env


@pytest.mark.parametrize("read_only", ["folder", "later-file"])
def test_an_agent_config_that_may_not_be_written_is_storage_not_writable_and_nothing_is_half_written(
    agent_home: Path, tmp_path: Path, read_only: str
) -> None:
    """``~/.claude`` read-only: the install said AGENT_CONFIG_INVALID (409), as for a file that does
    not parse. ``~/.claude.json`` read-only (written after settings.json): settings.json was
    written, then the same error said 'nothing was written'. Now STORAGE_NOT_WRITABLE naming the
    path, and no file changed."""
    target = agent_home / ".claude" if read_only == "folder" else agent_home / ".claude.json"
    before = {
        p: p.read_bytes() for p in (agent_home / ".claude" / "settings.json", agent_home / ".claude.json")
    }
    script = _read_only([target]) + 'exec "$@"'
    coffer = [
        str(SCRIPTS / "coffer"),
        "--home",
        str(tmp_path / "home"),
        "agents",
        "install",
        "claude-code",
        "--json",
    ]
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", *coffer],
        env=_env(agent_home),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc
    error = json.loads(proc.stderr)["error"]
    assert error["code"] == "STORAGE_NOT_WRITABLE", error
    assert str(target) in error["message"] and "read-only" in error["message"]
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(p.name for p in (agent_home / ".claude").iterdir()) == ["settings.json"]


def test_rest_answers_an_agent_config_that_may_not_be_written_with_503(
    agent_home: Path, tmp_path: Path
) -> None:
    script = _read_only([agent_home / ".claude"]) + 'exec "$@"'
    args = [
        "unshare",
        "-rm",
        "sh",
        "-c",
        script,
        "sh",
        str(SCRIPTS / "coffer-api"),
        "--home",
        str(tmp_path / "home"),
    ]
    with Served(args, {k: v for k, v in _env(agent_home).items() if k != "COFFER_API_TOKEN"}) as api:
        r = httpx.post(f"{api.base}/api/v1/agents/claude-code/hook-install", json={}, timeout=120)
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == "STORAGE_NOT_WRITABLE"
    assert (agent_home / ".claude" / "settings.json").read_text() == '{"theme": "dark"}\n'


# -- 7: --since -1d --------------------------------------------------------------------------------


def test_since_takes_a_negative_duration_and_every_command_words_the_forms_alike(tmp_path: Path) -> None:
    """``--since -1d`` was read by argparse as an option ('expected one argument'); it is the
    same as ``1d`` now, after ``--since`` or ``--since=``, for recall, facts list and audit; and
    their help and errors word the accepted forms (and the years) the same way."""
    home = str(tmp_path / "home")
    assert _coffer("--home", home, "remember", "--global", "the kiln runs hot").returncode == 0
    for args in (
        ["recall", "kiln", "--store", "global", "--since", "-1d"],
        ["recall", "kiln", "--store", "global", "--since=-1d", "--until", "-0s"],
        ["facts", "list", "--global", "--since", "-2h"],
    ):
        out = _coffer("--home", home, *args)
        assert out.returncode == 0, (args, out.stderr)
        assert "the kiln runs hot" in out.stdout
    out = _coffer("--home", home, "audit", "--since", "-1w")
    assert out.returncode == 0 and "memory_added" in out.stdout, out.stderr
    out = _coffer("--home", home, "facts", "list", "--global", "--since", "-2d", "--until", "-1d")
    assert out.returncode == 0 and "kiln" not in out.stdout
    helps = {
        " ".join(c): " ".join(_coffer(*c, "--help").stdout.split())
        for c in (["recall"], ["facts", "list"], ["audit"])
    }
    errors = [
        _coffer("--home", home, *c, "--since", "1y").stderr
        for c in (["recall", "x", "--store", "global"], ["audit"])
    ]
    errors.append(_coffer("--home", home, "facts", "list", "--global", "--since", "99999999d").stderr)
    forms = "a whole number of s, m, h, d or w, such as 30m, 12h, 7d or 2w (-7d reads as 7d)"
    assert all(forms in text and "years 1 to 9999" in text for text in helps.values()), helps
    assert all(forms in text and "years 1 to 9999" in text for text in errors), errors


# -- 8: the export path ---------------------------------------------------------------------------


def test_export_prints_its_path_quoted_when_it_holds_a_line_break_or_an_escape(tmp_path: Path) -> None:
    """The path went out as typed: a newline in it began a line of its own, an ESC ] 0 ; ... BEL
    retitled the terminal. It is printed on one line, in quotes, each control written \\xNN."""
    home = str(tmp_path / "home")
    assert _coffer("--home", home, "remember", "--global", "the kiln runs hot").returncode == 0
    name = "out\nDONE\x1b]0;owned\x07.zip"
    out = _coffer("--home", home, "export", "--all", "-o", str(tmp_path / name))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / name).is_file()
    assert out.stdout.count("\n") == 1 and "\x1b" not in out.stdout and "\x07" not in out.stdout, out.stdout
    shown = str(tmp_path) + "/out\\x0aDONE\\x1b]0;owned\\x07.zip"
    assert f'to "{shown}" (zip, ' in out.stdout
    plain = _coffer("--home", home, "export", "--all", "-o", str(tmp_path / "plain.zip"))
    assert f"to {tmp_path / 'plain.zip'} (zip, " in plain.stdout  # an ordinary path as it is


# -- 10: resume after the first commit ----------------------------------------------------------


def test_resume_says_head_moved_when_the_handoff_predates_the_first_commit(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    home = str(tmp_path / "home")
    assert _coffer("--home", home, "handoff", "save", "wip: the parser", cwd=repo).returncode == 0
    before = _coffer("--home", home, "resume", "--json", cwd=repo)
    assert json.loads(before.stdout)["head_moved"] is False
    (repo / "parser.py").write_text("x = 1\n")
    git(repo, "add", "parser.py")
    git(repo, "commit", "-q", "-m", "the parser")
    out = _coffer("--home", home, "resume", cwd=repo)
    assert out.returncode == 0, out.stderr
    assert "HEAD moved since then; 1 new commit(s):" in out.stdout
    assert "the parser" in out.stdout.splitlines()[-1]
    result = json.loads(_coffer("--home", home, "resume", "--json", cwd=repo).stdout)
    assert result["head_moved"] is True and len(result["new_commits"]) == 1
