"""Session 29, findings left open in the CLI faces (faces29): an empty ``--since``/``--until``,
``forget-session`` of a session that names nothing, ``transcripts list`` showing the date it is
sorted by and cutting titles with an ellipsis, and ``handoff show`` after ``git branch -m``. Real
``coffer`` console scripts in real subprocesses, on temp homes, with real git repositories.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from agent_samples import build
from conftest import GIT_ENV, git, make_repo

from coffer_memory._render import width

SCRIPTS = Path(sys.executable).parent


def _coffer(
    home: Path, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPTS / "coffer"), "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, **GIT_ENV, **(env or {})},
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    """A git repository and a home holding one fact of it."""
    repo = make_repo(tmp_path / "repo")
    home = tmp_path / "home"
    assert _coffer(home, "remember", "Deploy with make deploy", cwd=repo).returncode == 0
    return repo, home


# -- 1. an empty date is no filter -----------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [("recall", "deploy"), ("facts", "list"), ("audit",)],
    ids=["recall", "facts-list", "audit"],
)
@pytest.mark.parametrize("option", ["--since", "--until"])
@pytest.mark.parametrize("value", ["", "  "], ids=["empty", "blank"])
def test_an_empty_date_is_refused_not_read_as_no_filter(
    project: tuple[Path, Path], command: tuple[str, ...], option: str, value: str
) -> None:
    """``coffer recall deploy --since ""`` answered every fact, as if no ``--since`` was given: a
    script whose variable was unset (``--since "$FROM"``) filtered nothing, silently."""
    repo, home = project
    done = _coffer(home, *command, f"{option}={value}", cwd=repo)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ""
    field = option.removeprefix("--")
    assert done.stderr.startswith(f"error: INVALID_INPUT: {field} is empty: give an ISO 8601 date"), (
        done.stderr
    )
    done = _coffer(home, *command, f"{option}={value}", "--json", cwd=repo)
    assert done.returncode == 1
    error = json.loads(done.stderr)["error"]
    assert error["code"] == "INVALID_INPUT" and error["details"]["field"] == field, error


# -- 2. forget-session of a session that names nothing ---------------------------------------------


def test_forget_session_of_a_session_that_names_nothing_is_not_found(
    project: tuple[Path, Path], tmp_path: Path
) -> None:
    """``coffer forget-session nosuch`` said "no journal entries came from session nosuch" and
    exited 0, as for a real session that left none: a typo'd id passed for done. An id that no
    agent's files, no ledger row, no journal entry and no fact name is SESSION_NOT_FOUND (exit 1,
    as every NOT_FOUND of the CLI); a session that is known still exits 0."""
    repo, home = project
    agents = build(tmp_path / "agents", project_dir=tmp_path / "elsewhere")
    env = {k: v for k, v in agents.env.items() if k != "HOME"}
    done = _coffer(home, "forget-session", "nosuch", env=env, cwd=repo)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert done.stderr.startswith("error: SESSION_NOT_FOUND: session 'nosuch' not found"), done.stderr
    done = _coffer(home, "forget-session", "nosuch", "--json", env=env, cwd=repo)
    assert json.loads(done.stderr)["error"]["code"] == "SESSION_NOT_FOUND"
    # A session an agent's files hold, never distilled: nothing to remove, and it is no error.
    real = agents.expected[0].session_id
    done = _coffer(home, "forget-session", real, env=env, cwd=repo)
    assert done.returncode == 0, done.stderr
    assert f"no journal entries came from session {real}" in done.stdout
    # A session whose transcript is gone but which remembered a fact here: known, exit 0.
    assert (
        _coffer(home, "remember", "Tagged by a session", "--session-id", "gone-1", cwd=repo).returncode == 0
    )
    done = _coffer(home, "forget-session", "gone-1", env=env, cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "kept: 1 fact(s) remembered in this session" in done.stdout


# -- 5. transcripts list -----------------------------------------------------------------------------


CJK_ID = "5973b6c0-94b8-487b-a530-2aeb6098ae99"
CJK_TITLE = "为什么夜间备份任务在星期日运行两次并且每次都把同一个归档上传到对象存储里面去"


def _cjk_session(codex: Path, project: Path) -> None:
    """A Codex session (the legacy rollout form) whose title is wide (CJK) text."""
    folder = codex / "sessions" / "2025" / "06" / "03"
    folder.mkdir(parents=True, exist_ok=True)
    head = {
        "id": CJK_ID,
        "timestamp": "2025-06-03T09:15:00.000Z",
        "instructions": None,
        "git": {"branch": "main"},
    }
    cwd = f"<environment_context>\n  <cwd>{project}</cwd>\n</environment_context>"
    rows = [
        head,
        {"type": "message", "id": None, "role": "user", "content": [{"type": "input_text", "text": cwd}]},
        {
            "type": "message",
            "id": None,
            "role": "user",
            "content": [{"type": "input_text", "text": CJK_TITLE}],
        },
    ]
    path = folder / f"rollout-2025-06-03T09-15-00-{CJK_ID}.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _local(at: str, zone: str) -> str:
    return datetime.fromisoformat(at).astimezone(ZoneInfo(zone)).isoformat(sep=" ", timespec="minutes")


def test_transcripts_list_shows_the_date_it_is_sorted_by_under_a_header(tmp_path: Path) -> None:
    """``--sort started_at`` printed each session's last activity: the list looked out of order,
    and nothing said which date a column was. The first column is now the date the list is sorted
    by, named in a header line (last activity otherwise)."""
    project = make_repo(tmp_path / "work" / "demo-repo")
    samples = build(tmp_path / "agents", project_dir=project)
    env = {k: v for k, v in samples.env.items() if k != "HOME"}
    home = tmp_path / "home"
    home.mkdir()
    zone = "Asia/Shanghai"
    env["TZ"] = zone
    # Sessions whose start and last activity differ by minutes, so the two dates tell apart.
    differ = [e for e in samples.expected if _local(e.started_at, zone) != _local(e.last_activity_at, zone)]
    assert differ
    for sort, key, header in (
        ("started_at", "started_at", "started"),
        ("last_activity_at", "last_activity_at", "last activity"),
        ("message_count", "last_activity_at", "last activity"),
    ):
        done = _coffer(home, "transcripts", "list", "--sort", sort, env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0].startswith(header + "  ") and "agent" in lines[0] and "title" in lines[0], lines[0]
        for e in differ:
            line = next(line for line in lines if e.session_id in line)
            assert line.startswith(_local(getattr(e, key), zone) + "  "), (sort, line)


def test_transcripts_list_cuts_long_titles_with_an_ellipsis_by_columns(tmp_path: Path) -> None:
    """A title past 60 characters was cut mid-word with nothing to say so, and a CJK title of 60
    characters took 120 columns. It is cut to 60 columns, ending in "…"."""
    project = make_repo(tmp_path / "work" / "demo-repo")
    samples = build(tmp_path / "agents", project_dir=project)
    _cjk_session(samples.homes().codex, project)
    env = {k: v for k, v in samples.env.items() if k != "HOME"}
    home = tmp_path / "home"
    home.mkdir()
    done = _coffer(home, "transcripts", "list", "--agent", "codex", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    long = [e for e in samples.expected_for("codex") if len(e.title) > 60]
    assert long
    for e in long:
        line = next(line for line in lines if e.session_id in line)
        shown = line.split(e.session_id, 1)[1].strip()
        assert shown.endswith("…") and e.title.startswith(shown[:-1].split("  ")[0]), line
        assert width(shown.split("  ")[0]) <= 60, line
    line = next(line for line in lines if CJK_ID in line)
    shown = line.split(CJK_ID, 1)[1].strip().split("  ")[0]
    assert shown.endswith("…") and CJK_TITLE.startswith(shown[:-1]), line
    assert 56 <= width(shown) <= 60, (width(shown), line)


# -- 6. handoff show after a branch rename -----------------------------------------------------------


def test_handoff_show_follows_a_renamed_branch_as_resume_does(tmp_path: Path) -> None:
    """``git branch -m feature/login feature/signin`` after a handoff: ``resume`` found the scene
    (session 28), but ``handoff show`` still listed it as ``feature/login``'s, a branch that no
    longer exists; once the renamed branch saved its own scene, both were listed, the old one as if
    it were current. The scene is listed once, under the branch's name now, saying the name it was
    saved under; one superseded by the branch's own scene is only named, with how to delete it."""
    repo = make_repo(tmp_path / "repo")
    home = tmp_path / "home"
    git(repo, "checkout", "-q", "-b", "feature/login")
    assert _coffer(home, "handoff", "save", "Login form renders.", cwd=repo).returncode == 0
    git(repo, "checkout", "-q", "main")
    assert _coffer(home, "handoff", "save", "Main is green.", cwd=repo).returncode == 0
    git(repo, "branch", "-m", "feature/login", "feature/signin")

    shown = _coffer(home, "handoff", "show", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    heads = [line for line in shown.stdout.splitlines() if line.startswith("=== ")]
    assert [h.split()[1] for h in heads] == ["main", "feature/signin"], shown.stdout
    assert "(saved as 'feature/login', renamed since)" in heads[1], heads[1]
    assert "Login form renders." in shown.stdout

    git(repo, "checkout", "-q", "feature/signin")
    assert _coffer(home, "handoff", "save", "Signin cookie set.", cwd=repo).returncode == 0
    shown = _coffer(home, "handoff", "show", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    heads = [line for line in shown.stdout.splitlines() if line.startswith("=== ")]
    assert [h.split()[1] for h in heads] == ["feature/signin", "main"], shown.stdout
    assert "Login form renders." not in shown.stdout and "Signin cookie set." in shown.stdout
    assert (
        "not shown: the handoff saved as 'feature/login' before the branch was renamed to "
        "'feature/signin', which has its own now; `coffer handoff rm feature/login` deletes it"
    ) in shown.stdout, shown.stdout
    resumed = _coffer(home, "resume", cwd=repo)
    assert "Signin cookie set." in resumed.stdout
    # From outside the repository (--store), the store's recorded checkout is read (session 30).
    store = json.loads(_coffer(home, "resume", "--json", cwd=repo).stdout)["store"]
    elsewhere = _coffer(home, "handoff", "show", "--store", store, cwd=tmp_path)
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert elsewhere.stdout == shown.stdout
