"""Left sessions picked up at a session start whose hook talks to a running ``coffer-api``
(``COFFER_API_URL``): a real ``coffer-api`` on 127.0.0.1, ``coffer-hook`` in a subprocess fed
Claude Code's SessionStart payload, a scripted model on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.error import HTTPError
from urllib.request import Request, urlopen

from agent_samples import AgentSamples
from http_scripted import ScriptedServer
from served import Served
from test_distill_family import home, llm, samples
from test_ledger_left_open import left_session, picked_up_but

from coffer_memory import MemoryService

__all__ = ["home", "llm", "samples"]

AGENT = "claude-code"
TOKEN = "left-sessions-token"


def hook_session_start(hook_home: Path, api: str, session_id: str, transcript: Path, cwd: Path) -> bytes:
    """Claude Code's SessionStart payload fed to ``coffer-hook`` with ``COFFER_API_URL`` set."""
    stdin = json.dumps(
        {
            "session_id": session_id,
            "transcript_path": str(transcript),
            "cwd": str(cwd),
            "hook_event_name": "SessionStart",
            "source": "startup",
        }
    ).encode()
    env = {**os.environ, "COFFER_HOME": str(hook_home), "COFFER_API_URL": api, "COFFER_API_TOKEN": TOKEN}
    hook = str(Path(sys.executable).parent / "coffer-hook")
    proc = subprocess.run([hook, "--agent", AGENT], input=stdin, env=env, capture_output=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (0, b""), proc.stderr
    log = hook_home / "logs" / "hook.log"
    assert not log.exists(), log.read_text()
    return proc.stdout


def test_a_session_start_through_the_rest_app_picks_up_left_sessions(
    home: Path, samples: AgentSamples, llm: ScriptedServer, tmp_path: Path
) -> None:
    """With ``COFFER_API_URL`` set, Claude Code's session start did not pick up the sessions earlier
    ends left ``in_progress`` (no REST route did it): they waited for the next session end. The
    hook now asks the server, which distils them in the background (the session starting left
    out) while the hook prints the rules as before."""
    with MemoryService(home) as svc:
        svc.append_rule("Run make lint before committing.", store="global")
    left = [left_session(home, samples, mark) for mark in ("MARK-LEFTA", "MARK-LEFTB")]
    resumed = left_session(home, samples, "MARK-RESUMED")
    transcript = next((samples.homes().claude / "projects").rglob(f"{resumed}.jsonl"))
    env = {**os.environ, "COFFER_HOME": str(home), "COFFER_API_TOKEN": TOKEN}
    with Served([str(Path(sys.executable).parent / "coffer-api"), "--log-level", "warning"], env) as api:
        # The hook's own home is another one: what is picked up is the server's.
        printed = json.loads(
            hook_session_start(tmp_path / "hook-home", api.base, resumed, transcript, samples.project_dir)
        )
        assert "make lint" in printed["hookSpecificOutput"]["additionalContext"]
        picked_up_but(home, samples, left, resumed)
        # Guarded as every route: no token, no pick-up. An agent with nothing left: 204, no operation.
        assert post(f"{api.base}/api/v1/agents/{AGENT}/sessions/left/pick-up", None) == 401
        assert post(f"{api.base}/api/v1/agents/codex/sessions/left/pick-up", TOKEN) == 204


def post(url: str, token: str | None) -> int:
    """The status of an empty-bodied JSON POST to ``url``."""
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    try:
        with urlopen(Request(url, data=b"{}", headers=headers, method="POST"), timeout=60) as response:
            return int(response.status)
    except HTTPError as exc:
        return exc.code
