"""Session 28, the CLI's wrong-input walk (faces28): what a user who mistypes meets. Usage errors
are one line naming the command and a pointer to its ``--help`` (argparse printed the whole usage
block, and an unknown option was blamed on ``coffer`` itself); with ``--json`` they are the JSON
envelope on stderr, as a coffer error is; conflicting flags are refused. Real ``coffer`` console
scripts in real subprocesses, on a temp home holding real memories.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git

from coffer_memory import MemoryService

SCRIPTS = Path(sys.executable).parent


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository with a project fact and a global one, in the home ``COFFER_HOME`` names."""
    folder = tmp_path / "repo"
    folder.mkdir()
    git(folder, "init", "-q")
    monkeypatch.setenv("COFFER_HOME", str(tmp_path / "home"))
    assert _coffer("remember", "Deploy with make deploy", cwd=folder).returncode == 0
    assert _coffer("remember", "--global", "Use uv", cwd=folder).returncode == 0
    return folder


def _coffer(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPTS / "coffer"), *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=os.environ
    )


def test_an_unknown_option_names_the_command_it_was_given_to(repo: Path) -> None:
    done = _coffer("remember", "a fact", "--bogus", cwd=repo)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "coffer remember: error: unrecognized arguments: --bogus",
        "hint: `coffer remember --help` describes its arguments",
    ], done.stderr
    assert "remember" not in _coffer("recall", "a fact", cwd=repo).stdout  # nothing was written


def test_json_before_the_command_says_where_it_goes(repo: Path) -> None:
    done = _coffer("--json", "recall", "deploy", cwd=repo)
    assert done.returncode == 2 and done.stdout == ""
    error = json.loads(done.stderr)["error"]
    assert error["message"] == "coffer recall: unrecognized arguments: --json", error
    assert error["details"]["hint"] == "`--json` goes after the command name: `coffer recall ... --json`"
    done = _coffer("-v", "recall", "deploy", cwd=repo)
    assert done.stderr.splitlines() == [
        "coffer recall: error: unrecognized arguments: -v",
        "hint: `coffer recall --help` describes its arguments",
    ], done.stderr


@pytest.mark.parametrize(
    ("args", "first"),
    [
        (
            ("recall", "deploy", "--limit", "abc"),
            "coffer recall: error: argument --limit: invalid int value: 'abc'",
        ),
        (("recall",), "coffer recall: error: the following arguments are required: query"),
        (
            ("facts", "list", "--global", "--store", "global"),
            "coffer facts list: error: argument --store: not allowed with argument --global",
        ),
    ],
)
def test_a_usage_error_is_one_line_and_a_pointer_not_the_usage_block(
    repo: Path, args: tuple[str, ...], first: str
) -> None:
    done = _coffer(*args, cwd=repo)
    assert done.returncode == 2 and "usage:" not in done.stderr, done.stderr
    prog = first.split(":")[0]
    assert done.stderr.splitlines() == [first, f"hint: `{prog} --help` describes its arguments"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("recall", "deploy", "--limit", "abc", "--json"),
            "coffer recall: argument --limit: invalid int value: 'abc'",
        ),
        (("remember", "x", "--bogus", "--json"), "coffer remember: unrecognized arguments: --bogus"),
        (
            ("facts", "list", "--json", "--since"),
            "coffer facts list: argument --since: expected one argument",
        ),
    ],
)
def test_with_json_a_usage_error_is_the_json_envelope_on_stderr(
    repo: Path, args: tuple[str, ...], message: str
) -> None:
    done = _coffer(*args, cwd=repo)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    error = json.loads(done.stderr)["error"]
    assert error["code"] == "INVALID_INPUT" and error["message"] == message, error
    assert error["details"]["help"] == f"{message.split(':')[0]} --help"


def test_json_after_double_dash_is_text_not_the_option(repo: Path) -> None:
    done = _coffer("recall", "--limit", "abc", "--", "--json", cwd=repo)
    assert done.returncode == 2 and not done.stderr.startswith("{"), done.stderr


def test_rules_add_and_delete_together_are_refused(repo: Path) -> None:
    done = _coffer("memory", "rules", "--add", "Always run make lint", "--delete", "--yes", cwd=repo)
    assert done.returncode == 2, done.stdout
    assert "argument --delete: not allowed with argument --add" in done.stderr, done.stderr
    shown = _coffer("memory", "rules", cwd=repo)
    assert "Always run make lint" not in shown.stdout


def test_distill_with_neither_or_both_of_an_id_and_sweep_is_a_usage_error(repo: Path) -> None:
    done = _coffer("distill", "--json", cwd=repo)
    assert done.returncode == 2, done.stderr
    assert json.loads(done.stderr)["error"]["message"] == "coffer distill: give a session id, or --sweep"
    done = _coffer("distill", "ses-1", "--sweep", cwd=repo)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert done.stderr.startswith("coffer distill: error: give a session id or --sweep, not both\n"), (
        done.stderr
    )


def test_a_word_for_a_number_setting_names_the_setting(repo: Path, tmp_path: Path) -> None:
    """A float setting given a word said only ``could not convert string to float: 'fast'`` (the
    settings' fast path converted before it checked the type), naming no key and hiding the others."""
    done = _coffer("config", "set", "llm.timeout_seconds", "fast", cwd=repo)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: INVALID_INPUT: not saved: llm.timeout_seconds: "), done.stderr
    assert "could not convert" not in done.stderr
    home = tmp_path / "typed"
    home.mkdir()
    (home / "config.toml").write_text('[llm]\ntimeout_seconds = "fast"\n[memory]\nmax_fact_chars = "many"\n')
    done = _coffer("--home", str(home), "recall", "deploy", cwd=repo)
    assert done.returncode == 1 and "llm.timeout_seconds: " in done.stderr, done.stderr
    assert "memory.max_fact_chars: " in done.stderr, done.stderr


def test_an_expect_sha256_that_is_no_sha256_is_a_usage_error_not_a_conflict(repo: Path) -> None:
    """``--expect-sha256 nothex`` said MEMORY_CONFLICT, 'changed since it was read': a value that
    can never match is a typo, and the fact had not changed."""
    fact = json.loads(_coffer("facts", "list", "--json", cwd=repo).stdout)["items"][0]
    done = _coffer("facts", "rm", fact["fact"]["id"], "--expect-sha256", "nothex", cwd=repo)
    assert done.returncode == 2, done.stderr
    assert "argument --expect-sha256: 'nothex' is not a sha256 (64 hexadecimal digits" in done.stderr
    assert "MEMORY_CONFLICT" not in done.stderr
    done = _coffer("facts", "rm", fact["fact"]["id"], "--expect-sha256", fact["sha256"].upper(), cwd=repo)
    assert done.returncode == 0, done.stderr  # the digest `facts show` prints, in either case


# Zero-width characters between ASCII letters hide a difference (``pay<ZWSP>pal`` reads as
# ``paypal``); in a ZWJ emoji sequence or Persian and Indic words the joiners are the text.
HIDDEN = "login at pay\u200bpal.com, pay\u2060pal, pay\ufeffpal, pay\u200cpal and pay\u200dpal"
JOINED = "on call: \U0001f469\u200d\U0001f4bb, \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645, \u0915\u094d\u200d\u0937"


def test_zero_width_characters_show_on_a_terminal_unless_they_join_non_ascii_text(
    svc: MemoryService, tmp_home: Path
) -> None:
    from test_attack_terminal import _on_a_terminal

    fact = svc.remember(f"{HIDDEN}; {JOINED}", title="pay\u200bpal", scope="global")
    out = _on_a_terminal(tmp_home, "facts", "show", fact.fact.id, "--store", "global").decode()
    assert "pay\\u200bpal" in out and "pay\\u2060pal" in out and "pay\\ufeffpal" in out, out
    assert "pay\\u200cpal" in out and "pay\\u200dpal" in out, out
    assert JOINED in out, out  # the emoji, the Persian and the Devanagari joiners stay as they are
    assert not any(f"pay{c}pal" in out for c in "\u200b\u200c\u200d\u2060\ufeff"), out
    piped = subprocess.run(
        [str(SCRIPTS / "coffer"), "facts", "show", fact.fact.id, "--store", "global"],
        capture_output=True,
        text=True,
        env={**os.environ, "COFFER_HOME": str(tmp_home)},
    )
    assert HIDDEN in piped.stdout  # a pipe gets the text as it is
