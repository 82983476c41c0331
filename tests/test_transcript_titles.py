"""Session titles never show a secret in a listing (CLI, REST, Python) that ``show`` would redact.

Fake tokens are assembled at run time from pieces and random characters.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path
from typing import Any

import pytest
from agent_samples import _ClaudeFile, claude_project_folder

from coffer_memory import MemoryService
from coffer_memory._agents.homes import AgentHomes
from coffer_memory._cli import main as cli_main
from coffer_memory._transcripts.listing import SessionLister
from coffer_memory._transcripts.readers import TITLE_MAX_CHARS

_RNG = random.Random(1612)
ALNUM = string.ascii_letters + string.digits

TITLED, UNTITLED = "5c1b2a9e-0000-4000-8000-000000000001", "5c1b2a9e-0000-4000-8000-000000000002"


def _token() -> str:
    return "gh" + "p_" + "".join(_RNG.choice(ALNUM) for _ in range(36))


@pytest.fixture
def tokens(tmp_path: Path) -> dict[str, str]:
    """Two Claude Code sessions: one titled with a token, one whose first prompt (its fallback
    title) has a token right across the title's length cut."""
    cwd = tmp_path / "proj"
    cwd.mkdir()
    folder = AgentHomes.from_env().claude / "projects" / claude_project_folder(cwd)
    in_title, in_prompt = _token(), _token()
    titled = _ClaudeFile(TITLED, cwd)
    titled.user("2026-11-20T10:00:00.000Z", "how do I rotate the CI token?")
    titled.say("2026-11-20T10:00:05.000Z", "t1", "Revoke it in the settings, then update the secret.")
    titled.raw({"type": "custom-title", "customTitle": f"rotate {in_title} today", "sessionId": TITLED})
    titled.write(folder / f"{TITLED}.jsonl")
    untitled = _ClaudeFile(UNTITLED, cwd)
    lead = "word " * ((TITLE_MAX_CHARS - 20) // 5)
    untitled.user("2026-11-21T10:00:00.000Z", f"{lead}use {in_prompt} for the release job")
    untitled.say("2026-11-21T10:00:05.000Z", "u1", "Store it as a repository secret instead.")
    untitled.write(folder / f"{UNTITLED}.jsonl")
    return {TITLED: in_title, UNTITLED: in_prompt}


def _assert_clean(titles: dict[str, str | None], tokens: dict[str, str]) -> None:
    assert set(titles) == set(tokens)
    for session_id, token in tokens.items():
        title = titles[session_id] or ""
        assert token[:8] not in title, title  # not even the part before a cut
    assert titles[TITLED] == "rotate [REDACTED:github_token] today"


def test_the_listing_redacts_titles_as_show_does(svc: MemoryService, tokens: dict[str, str]) -> None:
    page = SessionLister().list_sessions("claude-code")
    _assert_clean({s.session_id: s.title for s in page.items}, tokens)
    listed = {s.session_id: s.title for s in svc.list_transcripts("claude-code").items}
    _assert_clean(listed, tokens)
    assert svc.show_transcript("claude-code", TITLED).summary.title == listed[TITLED]
    assert svc.transcript_summary("claude-code", TITLED).title == listed[TITLED]


def test_the_cli_listing_redacts_titles(
    tmp_home: Path, tokens: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    tmp_home.mkdir(exist_ok=True)
    assert cli_main(["--home", str(tmp_home), "transcripts", "list", "--agent", "claude-code", "--json"]) == 0
    out = capsys.readouterr().out
    _assert_clean({s["session_id"]: s["title"] for s in json.loads(out)}, tokens)
    assert cli_main(["--home", str(tmp_home), "transcripts", "list", "--agent", "claude-code"]) == 0
    out = capsys.readouterr().out
    assert not any(token[:8] in out for token in tokens.values())


def test_the_rest_listing_redacts_titles(client: Any, tokens: dict[str, str]) -> None:
    r = client.get("/api/v1/agents/claude-code/transcripts")
    assert r.status_code == 200
    _assert_clean({s["session_id"]: s["title"] for s in r.json()["items"]}, tokens)
    assert not any(token[:8] in r.text for token in tokens.values())
