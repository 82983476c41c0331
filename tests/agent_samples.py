"""Realistic Claude Code, Codex and OpenCode session files, written into a temporary agent home.

The shapes follow what the agents really write (see the readers' module docstrings): Claude
Code responses split over lines sharing ``message.id``, tool results as user lines, subagent
files, ``summary`` lines titling *another* file, custom/ai titles; Codex rollouts in the current,
the 0.46 and the pre-envelope shapes, with injected instructions and ``event_msg`` duplicates;
OpenCode's ``opencode.db`` (WAL mode) next to the legacy ``storage/`` tree, with synthetic,
ignored and non-text parts, child sessions and default titles. A truncated last line, garbage
lines and unknown line types are planted too.

Fake secrets are planted in prose, tool output and pasted files. No secret-shaped literal appears
in this source: each is assembled at run time (``FAKE_SECRETS``). ``SECRET_CORES`` holds, per
kind, the part that must never leak (for a URL: its password).

Marker strings (``*_MARKER``) sit only in content a reader must drop (tool I/O, reasoning,
subagents, injected instructions, synthetic parts, compaction summaries), so a test can check
that no transcript message contains one.

    env = write_all(tmp_path)                 # CLAUDE_CONFIG_DIR, CODEX_HOME, XDG_*, HOME
    samples = build(tmp_path)                 # the same, plus the expected session table
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random
import re
import sqlite3
import string
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from coffer_memory._agents.homes import AgentHomes

# -- fake secrets, assembled at run time --------------------------------------------------------


def _chars(seed: str, n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _pem(kind: str, seed: str, lines: int) -> str:
    body = []
    for i in range(lines):
        chunk = hashlib.sha512(f"{seed}-{i}".encode()).digest()
        body.append(base64.b64encode(chunk).decode("ascii")[:64])
    dashes = "-" * 5
    return "\n".join(
        [f"{dashes}BEGIN {kind} " + f"PRIVATE KEY{dashes}", *body, f"{dashes}END {kind} PRIVATE KEY{dashes}"]
    )


def _jwt() -> str:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = {"sub": "ci-deployer", "name": "Demo Deployer", "iat": 1795168800, "exp": 1795255200}
    payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    signature = _b64url(hmac.new(b"coffer-tests", f"{header}.{payload}".encode(), hashlib.sha256).digest())
    return f"{header}.{payload}.{signature}"


_URL_PASSWORD = "Tr0ub4dor-" + "and-3-" + _chars("url", 6)
_PASSWORD = "hunter2-" + "Correct-Horse-" + _chars("pw", 4)
_RSA = _pem("RSA", "rsa", 6)
_OPENSSH = _pem("OPENSSH", "openssh", 4)

_B62 = string.ascii_letters + string.digits
# fmt: off
FAKE_SECRETS: dict[str, str] = {
    "aws_access_key": "AKIA" + "IOSFODNN7" + "Q5ZT3WX",
    "aws_secret": "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYq7Zt2Wd9Xm",
    "github_token": "gh" + "p_" + _chars("ghp", 36),
    "github_oauth": "gh" + "o_" + _chars("gho", 36),
    "github_pat": "github" + "_pat_" + "11" + _chars("pat1", 20, string.ascii_uppercase + string.digits)
                  + "_" + _chars("pat2", 59),
    "openai_key": "sk-" + "proj-" + _chars("oai1", 48) + "T3Blbk" + "FJ" + _chars("oai2", 24),
    "anthropic_key": "sk-" + "ant-" + "api03-" + _chars("ant", 93, _B62 + "-_") + "AA",
    "slack_token": "xo" + "xb-" + _chars("sl1", 12, string.digits) + "-" + _chars("sl2", 13, string.digits)
                   + "-" + _chars("sl3", 24),
    "google_api_key": "AI" + "za" + "Sy" + _chars("goog", 33, _B62 + "-_"),
    "jwt": _jwt(),
    "pem_private_key": _RSA,
    "openssh_private_key": _OPENSSH,
    "password": _PASSWORD,
    "url_with_credentials": "postgres://" + "app_user:" + _URL_PASSWORD + "@db.internal.example:5432/app",
}
# fmt: on
"""Every planted fake secret, by kind (the value exactly as it appears in the sample files)."""

SECRET_CORES: dict[str, str] = {
    **FAKE_SECRETS,
    "pem_private_key": _RSA.splitlines()[2],
    "openssh_private_key": _OPENSSH.splitlines()[2],
    "url_with_credentials": _URL_PASSWORD,
}
"""Per kind, the substring that must never leak (a key body line, the URL's password)."""

# -- markers of content that must never reach a transcript ------------------------------------

TOOL_MARKER = "marker-tool-io-7c1f"
THINKING_MARKER = "marker-reasoning-4b2e"
SIDECHAIN_MARKER = "marker-subagent-9d3a"
INJECTED_MARKER = "marker-injected-2a8c"
SYNTHETIC_MARKER = "marker-synthetic-5e6f"
COMPACT_MARKER = "marker-compact-summary-0b7d"
MARKERS = (TOOL_MARKER, THINKING_MARKER, SIDECHAIN_MARKER, INJECTED_MARKER, SYNTHETIC_MARKER, COMPACT_MARKER)

# -- session ids --------------------------------------------------------------------------------

CLAUDE_A = "3f0c9a52-6d1e-4b7a-9c2e-1a5b7d9e0f11"
CLAUDE_B = "8a4e2b17-0c9d-4f63-a1b8-5e7c3d2f9a02"
CLAUDE_C = "c61d5f80-2a3b-4e9c-8d7f-0b1a2c3d4e03"
CLAUDE_D = "d2e8b4a1-7f6c-4b5d-9e0a-3c1b2a4d5e04"
CLAUDE_EMPTY = "e5f1c3d2-8b7a-4c6d-a0e9-4d2c3b5a6f05"
CODEX_NEW = "019aa3f2-5c1e-7d40-8b6a-2f1e9c3d4a01"
CODEX_OLD = "019aa4b8-0e7c-7a21-9f3d-6c2b8e1a5d02"
CODEX_BARE = "5973b6c0-94b8-487b-a530-2aeb6098ae03"
CODEX_ARCHIVED = "019a9e10-3b2c-7f45-8a6d-9c0b1e2f3a04"
CODEX_EMPTY = "019aa9c1-6d5e-7b30-9c8f-1e0d2c3b4a05"
OC_MAIN = "ses_e0763047fffeOgOujKzmQA0LZO"
OC_DEFAULT_TITLE = "ses_e07561b2fffdH3kLmN0pQrStUv"
OC_CHILD = "ses_e0762f90fffcAbCdEfGhIjKlMn"
OC_EMPTY = "ses_e0745a11fffbZyXwVuTsRqPoNm"
OC_ARCHIVED = "ses_e0744000fffaArchived000001"
OC_LEGACY_ONLY = "ses_e0a11b22fffaLegacyOnly0001"
OC_LEGACY_CHILD = "ses_e0a11a00fff9LegacyChild001"
OC_PROJECT = "a1c3e5f7093b2d4f6a8c0e1f3b5d7092c4e6a8b0"

CLAUDE_VERSION = "2.1.42"
CLAUDE_MODEL = "claude-opus-4-5-20251101"


@dataclass(frozen=True)
class ExpectedSession:
    """What a correct reader lists for one sample session."""

    agent: str
    session_id: str
    title: str
    project_path: str
    message_count: int
    started_at: str
    """ISO-8601 UTC."""
    last_activity_at: str


@dataclass(frozen=True)
class AgentSamples:
    """A written sample home: the environment to use and what listing it must give."""

    root: Path
    env: dict[str, str]
    project_dir: Path
    other_project_dir: Path
    expected: tuple[ExpectedSession, ...]

    def homes(self) -> AgentHomes:
        """The agent directories of this sample home."""
        return AgentHomes.from_env(self.env)

    def expected_for(self, agent: str) -> list[ExpectedSession]:
        """The sessions ``agent`` must list."""
        return [e for e in self.expected if e.agent == agent]

    def agent_dirs(self) -> list[Path]:
        """Every directory the readers may look at (all must stay untouched)."""
        homes = self.homes()
        return [homes.claude, homes.codex, homes.opencode_data]


# -- small writers ------------------------------------------------------------------------------


def _dump(row: dict[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


def _write_jsonl(path: Path, rows: list[dict[str, Any] | str], *, tail: str | None = None) -> None:
    """Rows as JSON lines; a ``str`` row is written raw (garbage), ``tail`` without a newline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join((row if isinstance(row, str) else _dump(row)) + "\n" for row in rows)
    path.write_text(text + (tail or ""), encoding="utf-8")


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def claude_project_folder(cwd: Path) -> str:
    """Claude Code's folder name for a cwd: every non-alphanumeric character becomes '-' (lossy)."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(cwd))


def text(value: str) -> dict[str, Any]:
    """A ``text`` content block."""
    return {"type": "text", "text": value}


def thinking(value: str) -> dict[str, Any]:
    """A ``thinking`` block (its signature is opaque)."""
    return {"type": "thinking", "thinking": value, "signature": "EqQB" + _chars(value, 40)}


def tool_use(tool_id: str, name: str, **tool_input: Any) -> dict[str, Any]:
    """A ``tool_use`` block."""
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


class _ClaudeFile:
    """Builds one Claude Code session file line by line, chaining ``parentUuid`` like the CLI."""

    def __init__(self, session_id: str, cwd: Path, branch: str = "main") -> None:
        self.session_id = session_id
        self.cwd = str(cwd)
        self.branch = branch
        self.rows: list[dict[str, Any] | str] = []
        self.last: str | None = None
        self._n = 0

    def raw(self, row: dict[str, Any] | str) -> None:
        """A line as is: a dict as JSON, a str verbatim (garbage)."""
        self.rows.append(row)

    def _line(self, kind: str, ts: str, *, side: bool, extra: dict[str, Any]) -> dict[str, Any]:
        self._n += 1
        row: dict[str, Any] = {
            "parentUuid": None if side else self.last,
            "isSidechain": side,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": CLAUDE_VERSION,
            "gitBranch": self.branch,
            "type": kind,
            **({"agentId": "a3f9c21"} if side else {}),
            **extra,
            "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"claude/{self.session_id}/{self._n}")),
            "timestamp": ts,
        }
        self.rows.append(row)
        if not side:
            self.last = row["uuid"]
        return row

    def user(
        self, ts: str, content: str | list[dict[str, Any]], *, side: bool = False, **flags: Any
    ) -> dict[str, Any]:
        """A user line (prompt, meta line, command echo...)."""
        return self._line(
            "user", ts, side=side, extra={**flags, "message": {"role": "user", "content": content}}
        )

    def assistant(
        self, ts: str, msg_id: str, *blocks: dict[str, Any], stop: str | None = None, side: bool = False
    ) -> dict[str, Any]:
        """One line of the API response ``msg_id`` (a response is often spread over several)."""
        message = {
            "model": CLAUDE_MODEL,
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "content": list(blocks),
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 4, "cache_read_input_tokens": 18234, "output_tokens": 212},
        }
        extra = {"message": message, "requestId": "req_011C" + _chars(msg_id, 20)}
        return self._line("assistant", ts, side=side, extra=extra)

    def say(self, ts: str, seed: str, words: str, *, side: bool = False) -> dict[str, Any]:
        """A whole one-line text response."""
        return self.assistant(ts, _msg_id(seed), text(words), stop="end_turn", side=side)

    def call(self, ts: str, seed: str, name: str, **tool_input: Any) -> str:
        """A tool-only response; returns the tool_use id."""
        tool_id = _tool_id(seed)
        self.assistant(ts, _msg_id(seed), tool_use(tool_id, name, **tool_input), stop="tool_use")
        return tool_id

    def tool_result(self, ts: str, tool_id: str, content: Any, *, is_error: bool = False) -> dict[str, Any]:
        """The tool's answer, logged as a *user* line (with ``toolUseResult``)."""
        block: dict[str, Any] = {"tool_use_id": tool_id, "type": "tool_result", "content": content}
        if is_error:
            block["is_error"] = True
        stdout = content if isinstance(content, str) else ""
        return self.user(ts, [block], toolUseResult={"stdout": stdout, "stderr": "", "interrupted": False})

    def system(self, ts: str, subtype: str, **fields: Any) -> dict[str, Any]:
        """A ``system`` line (turn_duration, compact_boundary...)."""
        return self._line("system", ts, side=False, extra={"subtype": subtype, **fields})

    def write(self, path: Path, *, tail: str | None = None) -> None:
        """Write the file; ``tail`` is a last line without its newline (still being written)."""
        _write_jsonl(path, self.rows, tail=tail)


def _msg_id(seed: str) -> str:
    return "msg_01" + _chars(seed, 22)


def _tool_id(seed: str) -> str:
    return "toolu_01" + _chars(seed, 22)


def _command_trio(f: _ClaudeFile, ts: str) -> None:
    """The lines ``/model opus`` leaves: a meta caveat, the command echo, its local output."""
    caveat = (
        "<local-command-caveat>Caveat: The messages below were generated by the user while running local "
    )
    f.user(
        ts + "2.114Z",
        caveat + "commands. DO NOT respond to these messages.</local-command-caveat>",
        isMeta=True,
    )
    # Logged 1 ms *before* the previous line: real files are not strictly in time order.
    echo = "<command-name>/model</command-name>\n<command-message>model</command-message>\n<command-args>opus</command-args>"
    f.user(ts + "2.113Z", echo)
    f.user(
        ts + "2.120Z",
        "<local-command-stdout>Set model to opus (claude-opus-4-5-20251101)</local-command-stdout>",
    )


# -- Claude Code --------------------------------------------------------------------------------


def _claude_session_c(folder: Path, cwd: Path) -> str:
    """No title of its own: a summary line in session B's file names it. Returns its last uuid."""
    s = FAKE_SECRETS
    f = _ClaudeFile(CLAUDE_C, cwd, branch="fix/slack-bot")
    # Points into B once B is written (see _claude_session_b): it must not title C.
    f.raw({"type": "summary", "summary": "Old summary of another session", "leafUuid": "placeholder"})
    f.user(
        "2026-11-21T08:30:05.100Z",
        f"The Slack bot stopped posting to #deploys. Its config has SLACK_BOT_TOKEN={s['slack_token']} and the "
        f"maps widget uses GOOGLE_MAPS_KEY={s['google_api_key']}. Why would both fail at once?",
    )
    f.say(
        "2026-11-21T08:30:12.400Z",
        "c1",
        f"The bot also sends `Authorization: Bearer {s['jwt']}`; that token expired yesterday, "
        "and the Google key was restricted to another referrer.",
    )
    # A reminder glued in front of the prompt, in the same text: only the prompt is prose.
    glued = f"<system-reminder>\nPlan mode is off. {INJECTED_MARKER}\n</system-reminder>\n"
    f.user("2026-11-21T08:31:00.000Z", glued + "rotate them and move both to the secret store")
    tool = f.call(
        "2026-11-21T08:31:04.000Z", "c2", "Bash", command=f"vault kv put secret/slack {TOOL_MARKER}=1"
    )
    f.tool_result(
        "2026-11-21T08:31:05.000Z", tool, f"{TOOL_MARKER}\nSuccess! Data written ({s['slack_token']})"
    )
    f.say(
        "2026-11-21T08:31:09.900Z", "c3", "Both keys are now read from the secret store; revoke the old ones."
    )
    assert f.last is not None
    f.write(folder / f"{CLAUDE_C}.jsonl")
    return f.last


def _claude_session_a(folder: Path, cwd: Path) -> None:
    """The long one: command noise, a 3-line response, tool results, a sidechain, compaction, an ai-title."""
    s = FAKE_SECRETS
    f = _ClaudeFile(CLAUDE_A, cwd)
    f.raw({"type": "permission-mode", "permissionMode": "default", "sessionId": CLAUDE_A})
    _command_trio(f, "2026-11-20T09:58:0")
    prompt = f.user(
        "2026-11-20T09:58:41.530Z",
        "scripts/deploy.sh fails with AccessDenied on PutObject since this morning. Here is my "
        "~/.aws/credentials so you can see which profile it picks up:\n\n[default]\n"
        f"aws_access_key_id = {s['aws_access_key']}\naws_secret_access_key = {s['aws_secret']}\n\n"
        f"CI uses GITHUB_TOKEN={s['github_token']} for the release step. Please find the cause.",
    )
    snapshot = {
        "messageId": prompt["uuid"],
        "trackedFileBackups": {},
        "timestamp": "2026-11-20T09:58:41.531Z",
    }
    f.rows.insert(1, {"type": "file-history-snapshot", "messageId": prompt["uuid"], "snapshot": snapshot})
    # One API response logged as three lines sharing message.id: thinking, text, tool_use.
    m1, read_id = _msg_id("a1"), _tool_id("a1")
    f.assistant("2026-11-20T09:58:47.002Z", m1, thinking(f"{THINKING_MARKER} read the script"))
    f.assistant("2026-11-20T09:58:47.880Z", m1, text("I'll start by reading the deploy script."))
    f.assistant(
        "2026-11-20T09:58:48.311Z", m1, tool_use(read_id, "Read", file_path=f"{cwd}/scripts/deploy.sh")
    )
    pasted = "\n".join(
        f"{n:>6}\u2192{line}"
        for n, line in enumerate(
            ["#!/usr/bin/env bash", f"# {TOOL_MARKER}", f"export AWS_ACCESS_KEY_ID={s['aws_access_key']}"], 1
        )
    )
    f.tool_result("2026-11-20T09:58:48.402Z", read_id, pasted)
    bash_id = f.call(
        "2026-11-20T09:58:53.774Z", "a2", "Bash", command="./scripts/deploy.sh 2>&1 | tail -n 200"
    )
    log = [f"[deploy] credentials source: ~/.aws/credentials (key id {s['aws_access_key']}) {TOOL_MARKER}"]
    log += [f"[deploy] sync dist/assets/chunk-{i:03d}.js  {i * 7 % 900}KiB" for i in range(1, 161)]
    log += ["upload failed: dist/index.html (AccessDenied) when calling the PutObject operation"]
    f.tool_result("2026-11-20T09:59:21.018Z", bash_id, "\n".join(log))
    task_prompt = f"Find the IAM policy of ci-deployer. {SIDECHAIN_MARKER}"
    task_id = f.call("2026-11-20T09:59:25.440Z", "a3", "Task", prompt=task_prompt, subagent_type="Explore")
    # Older builds logged the subagent inline, as sidechain lines of the main file.
    f.user("2026-11-20T09:59:25.601Z", task_prompt, side=True)
    f.say(
        "2026-11-20T09:59:31.912Z",
        "side",
        f"ci-deployer.json covers staging only. {SIDECHAIN_MARKER}",
        side=True,
    )
    f.tool_result(
        "2026-11-20T09:59:32.050Z", task_id, [text(f"ci-deployer.json covers staging only. {TOOL_MARKER}")]
    )
    f.say(
        "2026-11-20T09:59:40.219Z",
        "a4",
        "The ci-deployer policy only allows s3:PutObject on the staging bucket.",
    )
    f.system("2026-11-20T09:59:40.301Z", "turn_duration", durationMs=58689, isMeta=False)
    reminder = (
        f"<system-reminder>The TodoWrite tool hasn't been used recently. {INJECTED_MARKER}</system-reminder>"
    )
    ask = "ok. add a --profile flag to deploy.sh so CI can pass AWS_PROFILE explicitly"
    f.user("2026-11-20T10:03:12.775Z", [text(ask), text(reminder)])
    edit_id = f.call(
        "2026-11-20T10:03:19.006Z", "a5", "Edit", file_path=f"{cwd}/scripts/deploy.sh", new_string=TOOL_MARKER
    )
    f.tool_result(
        "2026-11-20T10:03:19.210Z",
        edit_id,
        f"The file {cwd}/scripts/deploy.sh has been updated. {TOOL_MARKER}",
    )
    meta = {"trigger": "manual", "preTokens": 48211}
    f.system(
        "2026-11-20T10:05:00.114Z", "compact_boundary", content="Conversation compacted", compactMetadata=meta
    )
    summary = (
        f"This session is being continued from a previous conversation. Summary: deploy fix. {COMPACT_MARKER}"
    )
    f.user("2026-11-20T10:05:00.118Z", summary, isCompactSummary=True, isVisibleInTranscriptOnly=True)
    f.user("2026-11-20T10:05:31.902Z", "run shellcheck on it")
    sc_id = _tool_id("a6")
    check = tool_use(sc_id, "Bash", command="shellcheck scripts/deploy.sh")
    f.assistant(
        "2026-11-20T10:05:36.650Z", _msg_id("a6"), text("Running shellcheck."), check, stop="tool_use"
    )
    lint = f"Exit code 1\nSC2154 (warning): $2 is referenced but not assigned. {TOOL_MARKER}"
    f.tool_result("2026-11-20T10:05:37.981Z", sc_id, lint, is_error=True)
    f.say("2026-11-20T10:05:44.430Z", "a7", "shellcheck flags SC2154: use `${2:?--profile needs a value}`.")
    f.raw(
        {
            "type": "ai-title",
            "aiTitle": "Fix deploy.sh AccessDenied and add --profile flag",
            "sessionId": CLAUDE_A,
        }
    )
    f.raw(
        {
            "type": "last-prompt",
            "lastPrompt": "run shellcheck on it",
            "leafUuid": f.last,
            "sessionId": CLAUDE_A,
        }
    )
    f.write(folder / f"{CLAUDE_A}.jsonl")

    # Subagent transcripts, newer and older layout: neither is a session.
    for path in (folder / CLAUDE_A / "subagents" / "agent-a3f9c21.jsonl", folder / "agent-b7e4d10.jsonl"):
        sub = _ClaudeFile(CLAUDE_A, cwd)
        sub.user("2026-11-20T09:59:25.601Z", task_prompt, side=True)
        sub.say("2026-11-20T09:59:31.912Z", path.name, f"Found it. {SIDECHAIN_MARKER}", side=True)
        sub.write(path)


def _claude_session_b(folder: Path, cwd: Path, leaf_of_c: str) -> None:
    """Image + PEM prompt, an interruption, ai-title then custom-title, and the summary that titles C."""
    s = FAKE_SECRETS
    f = _ClaudeFile(CLAUDE_B, cwd, branch="fix/remove-dev-key")
    # Claude Code writes summaries of *other* conversations at the top of a later file.
    f.raw({"type": "summary", "summary": "Rotate leaked Slack and Google keys", "leafUuid": leaf_of_c})
    png = base64.b64encode(hashlib.sha256(b"png").digest()).decode("ascii")
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}
    ask = f"The secret scanner flags config/dev.pem:\n\n{s['pem_private_key']}\n\nRemove it and ignore *.pem."
    f.user("2026-11-20T14:11:05.310Z", [image, text(ask)], imagePasteIds=[1])
    rm_id = _tool_id("b1")
    rm = tool_use(rm_id, "Bash", command="git rm --cached config/dev.pem")
    f.assistant("2026-11-20T14:11:12.004Z", _msg_id("b1"), thinking(f"Untrack it. {THINKING_MARKER}"), rm)
    f.tool_result("2026-11-20T14:11:13.420Z", rm_id, [text(f"rm 'config/dev.pem' {TOOL_MARKER}")])
    f.say("2026-11-20T14:11:25.640Z", "b2", "Done: config/dev.pem is untracked and ignored. Revoke the key.")
    f.user("2026-11-20T14:12:02.018Z", "also purge it from history with git filter-repo")
    f.assistant(
        "2026-11-20T14:12:04.900Z", _msg_id("b3"), text("I'll rewrite history with git filter-repo. This")
    )
    f.user("2026-11-20T14:12:05.731Z", [text("[Request interrupted by user]")])
    f.raw({"type": "ai-title", "aiTitle": "Remove committed dev.pem private key", "sessionId": CLAUDE_B})
    f.raw({"type": "custom-title", "customTitle": "pem key cleanup", "sessionId": CLAUDE_B})
    f.write(folder / f"{CLAUDE_B}.jsonl")
    # C's own summary line points at B's last line: it is about B, never C's title.
    path_c = folder / f"{CLAUDE_C}.jsonl"
    content = path_c.read_text(encoding="utf-8").replace('"leafUuid":"placeholder"', f'"leafUuid":"{f.last}"')
    path_c.write_text(content, encoding="utf-8")


def _claude_session_d(folder: Path, cwd: Path) -> None:
    """Other project; a response split in two text lines, garbage, an unknown type, a cut last line."""
    s = FAKE_SECRETS
    f = _ClaudeFile(CLAUDE_D, cwd)
    f.user(
        "2026-11-22T16:00:00.000Z",
        "Migrations fail on the staging database after the Postgres 16 upgrade,\nand the app logs show "
        f"connection resets.\n\nThe app connects with DATABASE_URL={s['url_with_credentials']} and "
        f"DB_PASSWORD={s['password']}; what changed?",
    )
    mid = _msg_id("d1")
    f.assistant(
        "2026-11-22T16:00:06.000Z", mid, text("Postgres 16 defaults password_encryption to scram-sha-256.")
    )
    f.raw('{"type":"user","message":{"role":"user","content":"not json')
    again = text("Reset the role's password so it is stored as SCRAM, then retry.")
    f.assistant("2026-11-22T16:00:07.000Z", mid, again, stop="end_turn")
    f.raw(
        {
            "type": "future-line-type",
            "payload": {"what": "unknown today"},
            "timestamp": "2026-11-22T16:00:08.000Z",
        }
    )
    f.user("2026-11-22T16:01:00.000Z", "that fixed it, thanks")
    f.say("2026-11-22T16:01:03.500Z", "d2", "Good. Keep password = ... out of the compose file.")
    # Claude Code was writing the next line when we read: half a JSON object, no newline.
    f.write(
        folder / f"{CLAUDE_D}.jsonl",
        tail='{"parentUuid":"x","type":"user","message":{"role":"user","content":"half wri',
    )


def _claude_session_empty(folder: Path, cwd: Path) -> None:
    f = _ClaudeFile(CLAUDE_EMPTY, cwd)
    f.raw({"type": "permission-mode", "permissionMode": "default", "sessionId": CLAUDE_EMPTY})
    _command_trio(f, "2026-11-23T07:00:0")
    f.write(folder / f"{CLAUDE_EMPTY}.jsonl")


def write_claude(claude_dir: Path, project_dir: Path, other_project_dir: Path) -> None:
    """Sessions A-D, an empty one and two subagent files under ``<claude_dir>/projects``."""
    main = claude_dir / "projects" / claude_project_folder(project_dir)
    other = claude_dir / "projects" / claude_project_folder(other_project_dir)
    leaf_of_c = _claude_session_c(main, project_dir)
    _claude_session_a(main, project_dir)
    _claude_session_b(main, project_dir, leaf_of_c)
    _claude_session_d(other, other_project_dir)
    _claude_session_empty(main, project_dir)
    (main / "memory").mkdir(parents=True, exist_ok=True)
    (main / "memory" / "MEMORY.md").write_text("# Auto memory\n- deploy uses --profile\n", encoding="utf-8")


# -- Codex --------------------------------------------------------------------------------------


class _Rollout:
    """Builds one rollout file: ``{timestamp, type, payload}`` lines."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any] | str] = []

    def line(self, ts: str, kind: str, payload: dict[str, Any]) -> None:
        self.rows.append({"timestamp": ts, "type": kind, "payload": payload})

    def item(self, ts: str, item_type: str, **fields: Any) -> None:
        self.line(ts, "response_item", {"type": item_type, **fields})

    def event(self, ts: str, event_type: str, **fields: Any) -> None:
        self.line(ts, "event_msg", {"type": event_type, **fields})

    def message(self, ts: str, role: str, words: str) -> None:
        block = "output_text" if role == "assistant" else "input_text"
        self.item(ts, "message", role=role, content=[{"type": block, "text": words}])

    def turn(self, ts: str, role: str, words: str) -> None:
        """A prompt or an answer: the response item and its ``event_msg`` twin, as Codex logs them."""
        self.message(ts, role, words)
        self.event(ts, "user_message" if role == "user" else "agent_message", message=words)

    def call(self, ts: str, call_id: str, name: str, arguments: dict[str, Any], output: str) -> None:
        self.item(ts, "function_call", name=name, arguments=json.dumps(arguments), call_id=call_id)
        self.item(ts, "function_call_output", call_id=call_id, output=output)


def _env_context(cwd: Path, extra: str = "") -> str:
    return (
        f"<environment_context>\n  <cwd>{cwd}</cwd>\n  <approval_policy>on-request</approval_policy>\n"
        f"  <sandbox_mode>workspace-write</sandbox_mode>\n  <shell>bash</shell>{extra}\n</environment_context>"
    )


def _reasoning(words: str) -> dict[str, Any]:
    summary = [{"type": "summary_text", "text": words}]
    return {"summary": summary, "content": None, "encrypted_content": "gAAAAAB" + _chars(words, 60)}


def _codex_new(path: Path, cwd: Path) -> None:
    """A recent CLI rollout: developer + AGENTS.md + environment items, two turns, tools, a garbage line."""
    s = FAKE_SECRETS
    r = _Rollout()
    git = {"commit_hash": "9c1e4b7a2f0d5e8c3b6a9f1d4e7c0b3a6f9d2e5c", "branch": "main"}
    meta = {
        "id": CODEX_NEW,
        "timestamp": "2026-11-20T10:00:00.398Z",
        "cwd": str(cwd),
        "cli_version": "0.98.0",
    }
    r.line(
        "2026-11-20T10:00:00.412Z",
        "session_meta",
        {**meta, "originator": "codex_cli_rs", "source": "cli", "model_provider": "openai", "git": git}
        | {"base_instructions": {"text": f"You are Codex, a coding agent. {INJECTED_MARKER}"}},
    )
    permissions = (
        f"<permissions instructions>\nworkspace-write. {INJECTED_MARKER}\n</permissions instructions>"
    )
    r.message("2026-11-20T10:00:00.413Z", "developer", permissions)
    agents_md = f"# AGENTS.md instructions for {cwd}\n\n<INSTRUCTIONS>\n- Run `make lint`. {INJECTED_MARKER}\n</INSTRUCTIONS>"
    r.message("2026-11-20T10:00:00.413Z", "user", agents_md)
    r.message("2026-11-20T10:00:00.413Z", "user", _env_context(cwd, INJECTED_MARKER))
    context = {
        "cwd": str(cwd),
        "approval_policy": "on-request",
        "sandbox_policy": {"type": "workspace-write"},
    }
    r.event("2026-11-20T10:00:15.101Z", "task_started", turn_id="turn-1", model_context_window=258400)
    r.line(
        "2026-11-20T10:00:15.102Z", "turn_context", {"turn_id": "turn-1", **context, "model": "gpt-5.1-codex"}
    )
    prompt = (
        "Our release workflow leaks credentials; find every hard-coded one and replace it with GitHub secrets. "
        f".github/workflows/release.yml has\n  RELEASE_PAT: {s['github_pat']}\n  OPENAI_API_KEY: {s['openai_key']}"
    )
    r.turn("2026-11-20T10:00:15.103Z", "user", prompt)
    r.event("2026-11-20T10:00:19.877Z", "agent_reasoning", text=f"**Scanning** {THINKING_MARKER}")
    r.item("2026-11-20T10:00:19.880Z", "reasoning", **_reasoning(f"**Scanning** {THINKING_MARKER}"))
    found = f"Exit code: 0\nOutput:\n{TOOL_MARKER} deploy/aws.env:1:AWS_SECRET_ACCESS_KEY={s['aws_secret']}\n"
    r.call("2026-11-20T10:00:20.012Z", "call_1", "shell_command", {"command": "rg -n 'AKIA|ghp_|sk-'"}, found)
    r.rows.append("this line is not JSON at all {")
    usage = {"total_token_usage": {"input_tokens": 14230, "output_tokens": 388}}
    r.event("2026-11-20T10:00:20.611Z", "token_count", info=usage, rate_limits=None)
    patch = f'*** Begin Patch\n-OPENAI_API_KEY = "{s["openai_key"]}"\n+# {TOOL_MARKER}\n*** End Patch\n'
    r.item(
        "2026-11-20T10:00:41.050Z",
        "custom_tool_call",
        status="completed",
        call_id="c2",
        name="apply_patch",
        input=patch,
    )
    r.item(
        "2026-11-20T10:00:41.322Z", "custom_tool_call_output", call_id="c2", output=f"Success. {TOOL_MARKER}"
    )
    answer1 = "I replaced the hard-coded values with `secrets.*` lookups. Revoke the PAT and the OpenAI key."
    r.turn("2026-11-20T10:00:44.903Z", "assistant", answer1)
    r.event("2026-11-20T10:00:45.001Z", "task_complete", turn_id="turn-1", last_agent_message=answer1)
    r.event("2026-11-20T10:05:00.220Z", "task_started", turn_id="turn-2")
    r.line("2026-11-20T10:05:00.221Z", "turn_context", {"turn_id": "turn-2", **context})
    r.turn("2026-11-20T10:05:00.222Z", "user", "thanks. move the postgres password to .env too")
    grep = f"Process exited with code 0\nOutput:\nPOSTGRES_PASSWORD: {s['password']} {TOOL_MARKER}\n"
    r.call("2026-11-20T10:05:06.110Z", "call_3", "exec_command", {"cmd": "grep -n POSTGRES_PASSWORD ."}, grep)
    answer2 = "Created `.env` (git-ignored) with `POSTGRES_PASSWORD` and changed the compose file to use it."
    r.turn("2026-11-20T10:05:19.331Z", "assistant", answer2)
    r.event("2026-11-20T10:05:19.400Z", "task_complete", turn_id="turn-2", last_agent_message=answer2)
    _write_jsonl(path, r.rows)


def _codex_old(path: Path, cwd: Path) -> None:
    """An exec-mode rollout of the 0.46 era: ``instructions: null``, argv ``shell`` calls."""
    s = FAKE_SECRETS
    r = _Rollout()
    meta = {
        "id": CODEX_OLD,
        "timestamp": "2026-11-20T15:42:07.521Z",
        "cwd": str(cwd),
        "cli_version": "0.46.0",
    }
    r.line(
        "2026-11-20T15:42:07.530Z",
        "session_meta",
        {**meta, "originator": "codex_exec", "instructions": None, "git": {}},
    )
    r.message("2026-11-20T15:42:07.530Z", "user", _env_context(cwd))
    ask = f"the nightly backup is encrypted to this key, can you check it decrypts?\nkey:\n{s['openssh_private_key']}"
    r.turn("2026-11-20T15:42:07.531Z", "user", ask + "\n(dont commit it)")
    policy = {"cwd": str(cwd), "approval_policy": "never", "sandbox_policy": {"mode": "workspace-write"}}
    r.line("2026-11-20T15:42:07.532Z", "turn_context", {**policy, "model": "gpt-5-codex", "effort": "high"})
    r.item("2026-11-20T15:42:10.120Z", "reasoning", **_reasoning(f"**Inspecting** {THINKING_MARKER}"))
    listing = json.dumps({"output": f"db.tar.age {TOOL_MARKER}\n", "metadata": {"exit_code": 0}})
    r.call(
        "2026-11-20T15:42:10.121Z", "call_a", "shell", {"command": ["bash", "-lc", "ls -la backups"]}, listing
    )
    action = {"type": "exec", "command": ["age", "--version"]}
    r.item(
        "2026-11-20T15:42:13.870Z", "local_shell_call", call_id="call_b", status="completed", action=action
    )
    answer = "`age` is not installed here, so I could not test decryption. Rotate this key: it was pasted in a chat."
    r.turn("2026-11-20T15:42:18.510Z", "assistant", answer)
    r.event("2026-11-20T15:42:18.600Z", "token_count", info=None, rate_limits=None)
    _write_jsonl(path, r.rows)


def _codex_bare(path: Path, cwd: Path) -> None:
    """A rollout from before the ``{timestamp,type,payload}`` envelope (mid-2025 builds, shape [U]).

    The first line is the meta object itself, items are bare, state lines carry ``record_type``;
    only the meta has a timestamp and the cwd is only in the injected environment context.
    """
    s = FAKE_SECRETS

    def message(role: str, block: str, words: str) -> dict[str, Any]:
        return {"type": "message", "id": None, "role": role, "content": [{"type": block, "text": words}]}

    output = json.dumps(
        {"output": f"x-cache: MISS {TOOL_MARKER} {s['slack_token']}", "metadata": {"exit_code": 0}}
    )
    curl = json.dumps({"command": ["curl", "-sI", "https://cdn.example.com"]})
    rows: list[dict[str, Any] | str] = [
        {
            "id": CODEX_BARE,
            "timestamp": "2025-06-02T09:15:00.000Z",
            "instructions": None,
            "git": {"branch": "main"},
        },
        {"record_type": "state"},
        message("user", "input_text", _env_context(cwd)),
        message("user", "input_text", "why is the cache hit rate so low on the CDN?"),
        {"record_type": "state"},
        {"type": "reasoning", "id": "rs_1", **_reasoning(THINKING_MARKER)},
        {"type": "function_call", "id": "fc_1", "name": "shell", "arguments": curl, "call_id": "call_x"},
        {"type": "function_call_output", "call_id": "call_x", "output": output},
        message(
            "assistant",
            "output_text",
            "Every response sets `Cache-Control: private`, so the CDN never caches.",
        ),
    ]
    _write_jsonl(path, rows)


def write_codex(codex_dir: Path, project_dir: Path, other_project_dir: Path) -> None:
    """Three listed rollouts (new, 0.46, pre-envelope), an archived one and an empty one."""
    sessions = codex_dir / "sessions"
    day = sessions / "2026" / "11" / "20"
    _codex_new(day / f"rollout-2026-11-20T10-00-00-{CODEX_NEW}.jsonl", project_dir)
    _codex_old(day / f"rollout-2026-11-20T15-42-07-{CODEX_OLD}.jsonl", other_project_dir)
    _codex_bare(
        sessions / "2025" / "06" / "02" / f"rollout-2025-06-02T09-15-00-{CODEX_BARE}.jsonl", project_dir
    )
    archived = _Rollout()
    archived.line("2026-11-19T08:00:00.000Z", "session_meta", {"id": CODEX_ARCHIVED, "cwd": str(project_dir)})
    archived.turn("2026-11-19T08:00:01.000Z", "user", "an archived session: never listed")
    archived.turn("2026-11-19T08:00:02.000Z", "assistant", "ok")
    name = f"rollout-2026-11-19T08-00-00-{CODEX_ARCHIVED}.jsonl"
    _write_jsonl(codex_dir / "archived_sessions" / name, archived.rows)
    empty = _Rollout()  # only injected items: nothing to list
    empty.line("2026-11-21T09:00:00.000Z", "session_meta", {"id": CODEX_EMPTY, "cwd": str(project_dir)})
    empty.message("2026-11-21T09:00:00.100Z", "developer", f"<permissions instructions>{INJECTED_MARKER}")
    empty.message("2026-11-21T09:00:00.100Z", "user", _env_context(project_dir))
    name = f"rollout-2026-11-21T09-00-00-{CODEX_EMPTY}.jsonl"
    _write_jsonl(sessions / "2026" / "11" / "21" / name, empty.rows)
    (codex_dir / "session_index.jsonl").write_text(_dump({"id": CODEX_NEW, "thread_name": "creds"}) + "\n")


# -- OpenCode -----------------------------------------------------------------------------------

T0 = 1795172400000  # 2026-11-20T11:00:00Z, in ms like OpenCode


@dataclass
class _OcSession:
    id: str
    directory: str
    title: str
    created: int
    updated: int
    parent_id: str | None = None
    archived: int | None = None
    messages: list[dict[str, Any]] | None = None
    parts: list[dict[str, Any]] | None = None


class _OcBuilder:
    """Messages and parts of one OpenCode session, with ids that sort by time like OpenCode's."""

    def __init__(self, session: _OcSession) -> None:
        self.session = session
        session.messages, session.parts = [], []
        self._n = 0

    def _id(self, prefix: str, ms: int) -> str:
        self._n += 1
        stamp = (ms * 0x1000 + self._n) & 0xFFFFFFFFFFFF
        return f"{prefix}_{stamp:012x}" + _chars(f"{self.session.id}{self._n}", 14)

    def msg(self, role: str, ms: int, done: int | None = None, **fields: Any) -> dict[str, Any]:
        times = {"created": ms} if done is None else {"created": ms, "completed": done}
        m = {"id": self._id("msg", ms), "sessionID": self.session.id, "role": role, "time": times, **fields}
        assert self.session.messages is not None
        self.session.messages.append(m)
        return m

    def part(self, m: dict[str, Any], ms: int, kind: str, **fields: Any) -> None:
        p = {
            "id": self._id("prt", ms),
            "sessionID": self.session.id,
            "messageID": m["id"],
            "type": kind,
            **fields,
        }
        assert self.session.parts is not None
        self.session.parts.append(p)

    def tool(self, m: dict[str, Any], ms: int, tool: str, **state: Any) -> None:
        self.part(m, ms, "tool", callID="toolu_" + _chars(f"{tool}{ms}", 20), tool=tool, state=state)


def _oc_main(directory: str) -> _OcSession:
    """Synthetic and ignored text, file/reasoning/tool/step/patch parts, an aborted last answer."""
    s = FAKE_SECRETS
    session = _OcSession(OC_MAIN, directory, "Remove hard-coded AWS keys from deploy", T0, T0 + 95_000)
    b = _OcBuilder(session)
    model = {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"}
    common = {**model, "mode": "build", "agent": "build", "path": {"cwd": directory, "root": directory}}
    u1 = b.msg("user", T0 + 1000, agent="build", model=model)
    ask = "@scripts/deploy.sh has my keys inline, move them to env vars. "
    b.part(
        u1, T0 + 1000, "text", text=ask + f"AWS_ACCESS_KEY_ID={s['aws_access_key']}, bot: {s['github_oauth']}"
    )
    call = f'Called the Read tool with the following input: {{"filePath":"{directory}/scripts/deploy.sh"}}'
    b.part(u1, T0 + 1001, "text", synthetic=True, text=f"{call} {SYNTHETIC_MARKER}")
    pasted = (
        f"<file>\n00001| export AWS_ACCESS_KEY_ID={s['aws_access_key']}\n00002| # {SYNTHETIC_MARKER}\n</file>"
    )
    b.part(u1, T0 + 1002, "text", synthetic=True, text=pasted)
    b.part(
        u1,
        T0 + 1003,
        "file",
        mime="text/plain",
        filename="deploy.sh",
        url=f"file://{directory}/scripts/deploy.sh",
    )
    a1 = b.msg("assistant", T0 + 2000, T0 + 19000, parentID=u1["id"], finish="tool-calls", **common)
    b.part(a1, T0 + 2100, "step-start", snapshot="5d41402abc4b2a76b9719d911017c592ae1f2b6c")
    b.part(a1, T0 + 2200, "reasoning", text=f"Check the references first. {THINKING_MARKER}")
    b.part(a1, T0 + 4200, "text", text="I'll check where these variables are used before editing.")
    out = f"scripts/deploy.sh:2:export AWS_ACCESS_KEY_ID={s['aws_access_key']} {TOOL_MARKER}\n"
    out += "\n".join(f"node_modules/.cache/deploy-{i:03d}.log:1:<redacted>" for i in range(120))
    b.tool(
        a1,
        T0 + 5000,
        "bash",
        status="completed",
        input={"command": "grep -rn AWS ."},
        output=out,
        metadata={"output": out},
    )
    b.part(
        a1, T0 + 19000, "step-finish", reason="tool-calls", cost=0.0214, tokens={"input": 9120, "output": 402}
    )
    a2 = b.msg("assistant", T0 + 20000, T0 + 41000, parentID=u1["id"], finish="stop", **common)
    b.part(a2, T0 + 20100, "step-start")
    b.tool(
        a2,
        T0 + 22000,
        "bash",
        status="error",
        input={"command": "shellcheck x"},
        error=f"not found {TOOL_MARKER}",
    )
    b.part(
        a2, T0 + 40000, "patch", hash="5d41402abc4b2a76b9719d911017c592ae1f2b6c", files=["scripts/deploy.sh"]
    )
    b.part(
        a2,
        T0 + 40100,
        "text",
        text="`scripts/deploy.sh` now reads the keys from the environment. Rotate them.",
    )
    b.part(a2, T0 + 41000, "step-finish", reason="stop", cost=0.0117)
    u2 = b.msg("user", T0 + 80000, agent="build", model=model)
    b.part(
        u2,
        T0 + 80000,
        "text",
        text=f"the notifier still has ANTHROPIC_API_KEY={s['anthropic_key']}, remove it too",
    )
    b.part(u2, T0 + 80001, "text", ignored=True, text=f"(ignored by the user) {SYNTHETIC_MARKER}")
    aborted = {"name": "MessageAbortedError", "data": {"message": "The operation was aborted."}}
    a3 = b.msg("assistant", T0 + 81000, T0 + 95000, parentID=u2["id"], error=aborted, **common)
    b.part(a3, T0 + 81100, "step-start")
    b.part(a3, T0 + 82000, "text", text="Removing the key from `scripts/notify.py` and")
    return session


def simple_opencode_session(
    sid: str, directory: str, title: str, start: int, prompt: str, answer: str, parent: str | None = None
) -> _OcSession:
    """A prompt and an answer (with a tool part), spanning 30 s from ``start`` (epoch ms)."""
    session = _OcSession(sid, directory, title, start, start + 30_000, parent_id=parent)
    b = _OcBuilder(session)
    u = b.msg("user", start + 1000, agent="build")
    b.part(u, start + 1000, "text", text=prompt)
    a = b.msg("assistant", start + 2000, start + 9000, parentID=u["id"])
    b.part(a, start + 2100, "step-start")
    b.tool(a, start + 2200, "read", status="completed", output=TOOL_MARKER)
    b.part(a, start + 9000, "text", text=answer)
    return session


def _write_legacy(storage: Path, session: _OcSession) -> None:
    record: dict[str, Any] = {
        "id": session.id,
        "version": "1.1.53",
        "projectID": OC_PROJECT,
        "directory": session.directory,
        "title": session.title,
        "time": {"created": session.created, "updated": session.updated},
    }
    if session.parent_id:
        record["parentID"] = session.parent_id
    _write_json(storage / "session" / OC_PROJECT / f"{session.id}.json", record)
    for m in session.messages or []:
        _write_json(storage / "message" / session.id / f"{m['id']}.json", m)
    for p in session.parts or []:
        _write_json(storage / "part" / p["messageID"] / f"{p['id']}.json", p)


_OC_SCHEMA = """
CREATE TABLE project (id text PRIMARY KEY, worktree text NOT NULL, vcs text, name text,
  time_created integer NOT NULL, time_updated integer NOT NULL, time_initialized integer,
  sandboxes text NOT NULL DEFAULT '[]');
CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL REFERENCES project(id) ON DELETE CASCADE,
  workspace_id text, parent_id text, slug text NOT NULL, directory text NOT NULL, path text,
  title text NOT NULL, version text NOT NULL, share_url text,
  summary_additions integer, summary_deletions integer, summary_files integer, summary_diffs text,
  cost real NOT NULL DEFAULT 0, revert text, permission text,
  time_created integer NOT NULL, time_updated integer NOT NULL, time_compacting integer, time_archived integer);
CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL REFERENCES session(id) ON DELETE CASCADE,
  time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL REFERENCES message(id) ON DELETE CASCADE,
  session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE INDEX message_session_time_created_id_idx ON message (session_id, time_created, id);
CREATE INDEX part_message_id_id_idx ON part (message_id, id);
"""


def insert_opencode_session(connection: sqlite3.Connection, session: _OcSession) -> None:
    """One session with its messages and parts, in the v1.2 layout (``data`` minus the ids)."""
    row = (session.id, OC_PROJECT, session.parent_id, "", session.directory, session.title, "1.2.3")
    connection.execute(
        "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, time_created,"
        " time_updated, time_archived) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (*row, session.created, session.updated, session.archived),
    )
    created: dict[str, int] = {}
    for m in session.messages or []:
        data = {k: v for k, v in m.items() if k not in ("id", "sessionID")}
        times = m["time"]
        created[m["id"]] = times["created"]
        updated = times.get("completed", times["created"])
        connection.execute(
            "INSERT INTO message VALUES (?,?,?,?,?)",
            (m["id"], session.id, times["created"], updated, json.dumps(data)),
        )
    for p in session.parts or []:
        data = {k: v for k, v in p.items() if k not in ("id", "sessionID", "messageID")}
        t = created[p["messageID"]]
        connection.execute(
            "INSERT INTO part VALUES (?,?,?,?,?,?)",
            (p["id"], p["messageID"], session.id, t, t, json.dumps(data)),
        )


def create_opencode_db(path: Path) -> sqlite3.Connection:
    """An empty v1.2-layout database in WAL mode (what OpenCode uses), with the sample project row."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.executescript(_OC_SCHEMA)
    connection.execute(
        "INSERT INTO project (id, worktree, vcs, time_created, time_updated) VALUES (?,?,?,?,?)",
        (OC_PROJECT, "/", "git", T0 - 86_400_000, T0 - 86_400_000),
    )
    return connection


def write_opencode(data_dir: Path, project_dir: Path, other_project_dir: Path) -> None:
    """``opencode.db`` (closed cleanly: no -wal/-shm) and the legacy ``storage/`` tree."""
    main = _oc_main(str(project_dir))
    default_title = simple_opencode_session(
        OC_DEFAULT_TITLE,
        str(other_project_dir),
        "New session - 2026-11-21T12:00:00.000Z",
        T0 + 90_000_000,
        "Why does the nightly export job run twice on Sundays?",
        "The cron line has both `0 2 * * 0` and `0 2 * * *`.",
    )
    child = simple_opencode_session(
        OC_CHILD,
        str(project_dir),
        "Child session - 2026-11-20T11:00:30.000Z",
        T0 + 30_000,
        f"Search for AWS keys. {SIDECHAIN_MARKER}",
        f"Found two. {SIDECHAIN_MARKER}",
        parent=OC_MAIN,
    )
    empty = _OcSession(
        OC_EMPTY,
        str(project_dir),
        "New session - 2026-11-22T08:00:00.000Z",
        T0 + 2 * 86_400_000,
        T0 + 2 * 86_400_000,
    )
    archived = simple_opencode_session(
        OC_ARCHIVED, str(project_dir), "Archived by the user", T0 - 86_400_000, "old question", "old answer"
    )
    archived.archived = T0
    connection = create_opencode_db(data_dir / "opencode.db")
    with connection:
        for session in (main, default_title, child, empty, archived):
            insert_opencode_session(connection, session)
    connection.close()

    storage = data_dir / "storage"
    _write_json(
        storage / "project" / f"{OC_PROJECT}.json",
        {"id": OC_PROJECT, "worktree": str(project_dir), "vcs": "git", "time": {"created": T0 - 86_400_000}},
    )
    # The same session as in the database, as the migration left it behind (stale title): the DB wins.
    stale = _oc_main(str(project_dir))
    stale.title = "stale legacy title"
    _write_legacy(storage, stale)
    legacy_only = simple_opencode_session(
        OC_LEGACY_ONLY,
        str(project_dir),
        "Bump Node to 22 in CI",
        T0 - 3 * 86_400_000,
        "bump node to 22 in the CI matrix",
        "Done: `.github/workflows/ci.yml` now tests Node 22.",
    )
    _write_legacy(storage, legacy_only)
    legacy_child = simple_opencode_session(
        OC_LEGACY_CHILD,
        str(project_dir),
        "Child session - 2026-11-17T11:00:00.000Z",
        T0 - 3 * 86_400_000 + 5000,
        f"look up the node matrix {SIDECHAIN_MARKER}",
        f"found it {SIDECHAIN_MARKER}",
        parent=OC_LEGACY_ONLY,
    )
    _write_legacy(storage, legacy_child)
    _write_json(
        storage / "todo" / f"{OC_MAIN}.json",
        [{"id": "1", "content": "Replace inline keys", "status": "completed"}],
    )


# -- entry points -------------------------------------------------------------------------------


def _iso_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat()


def _expected(project_dir: Path, other: Path) -> tuple[ExpectedSession, ...]:
    p, q = str(project_dir), str(other)
    day = 86_400_000
    # fmt: off
    rows = [
        ("claude-code", CLAUDE_A, "Fix deploy.sh AccessDenied and add --profile flag", p, 7,
         "2026-11-20T09:58:02.113+00:00", "2026-11-20T10:05:44.430+00:00"),
        ("claude-code", CLAUDE_B, "pem key cleanup", p, 4,
         "2026-11-20T14:11:05.310+00:00", "2026-11-20T14:12:05.731+00:00"),
        ("claude-code", CLAUDE_C, "Rotate leaked Slack and Google keys", p, 4,
         "2026-11-21T08:30:05.100+00:00", "2026-11-21T08:31:09.900+00:00"),
        ("claude-code", CLAUDE_D, "Migrations fail on the staging database after the Postgres 16 upgrade, and the…",
         q, 4, "2026-11-22T16:00:00+00:00", "2026-11-22T16:01:03.500+00:00"),
        ("codex", CODEX_NEW, "Our release workflow leaks credentials; find every hard-coded one and replace…",
         p, 4, "2026-11-20T10:00:00.398+00:00", "2026-11-20T10:05:19.400+00:00"),
        ("codex", CODEX_OLD, "the nightly backup is encrypted to this key, can you check it decrypts? key:…",
         q, 2, "2026-11-20T15:42:07.521+00:00", "2026-11-20T15:42:18.600+00:00"),
        ("codex", CODEX_BARE, "why is the cache hit rate so low on the CDN?", p, 2,
         "2025-06-02T09:15:00+00:00", "2025-06-02T09:15:00+00:00"),
        ("opencode", OC_MAIN, "Remove hard-coded AWS keys from deploy", p, 5, _iso_ms(T0), _iso_ms(T0 + 95_000)),
        ("opencode", OC_DEFAULT_TITLE, "Why does the nightly export job run twice on Sundays?", q, 2,
         _iso_ms(T0 + 90_000_000), _iso_ms(T0 + 90_030_000)),
        ("opencode", OC_LEGACY_ONLY, "Bump Node to 22 in CI", p, 2,
         _iso_ms(T0 - 3 * day), _iso_ms(T0 - 3 * day + 30_000)),
    ]
    # fmt: on
    return tuple(ExpectedSession(*row) for row in rows)


def build(root: Path, project_dir: Path | None = None) -> AgentSamples:
    """Write every sample under ``root`` and return the environment and the expected listing.

    ``project_dir`` (default ``root/work/demo-repo``) is the main project's cwd; a second project
    lives at ``root/work/infra_tools.v2`` (a name Claude Code's folder encoding cannot undo).
    Both directories are created, empty, so a caller can ``git init`` them.
    """
    root = root.absolute()
    project = (project_dir or root / "work" / "demo-repo").absolute()
    other = root / "work" / "infra_tools.v2"
    for folder in (project, other):
        folder.mkdir(parents=True, exist_ok=True)
    env = {
        "HOME": str(root / "home"),
        "CLAUDE_CONFIG_DIR": str(root / "claude"),
        "CODEX_HOME": str(root / "codex"),
        "XDG_DATA_HOME": str(root / "data"),
        "XDG_CONFIG_HOME": str(root / "config"),
    }
    (root / "home").mkdir(parents=True, exist_ok=True)
    (root / "config").mkdir(parents=True, exist_ok=True)
    homes = AgentHomes.from_env(env)
    write_claude(homes.claude, project, other)
    write_codex(homes.codex, project, other)
    write_opencode(homes.opencode_data, project, other)
    return AgentSamples(
        root=root, env=env, project_dir=project, other_project_dir=other, expected=_expected(project, other)
    )


def write_all(root: Path, project_dir: Path | None = None) -> dict[str, str]:
    """Write every sample under ``root``; the environment variables that point the agents there.

    The expected listing is ``build(root).expected`` (or ``expected(root)``).
    """
    return build(root, project_dir).env


def expected(root: Path, project_dir: Path | None = None) -> tuple[ExpectedSession, ...]:
    """The sessions a correct reader lists for samples written by ``write_all(root, project_dir)``."""
    root = root.absolute()
    project = (project_dir or root / "work" / "demo-repo").absolute()
    return _expected(project, root / "work" / "infra_tools.v2")
