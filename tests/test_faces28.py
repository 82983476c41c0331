"""Session 28, the faces' findings left open: ``organize`` with a provider but no model, a broken
plugin's warning, zero-width characters in the web view, Ctrl-C while a console script starts,
the MCP pick-up of left sessions and which session ``--max-sessions`` ends. Real console scripts
in real subprocesses, real temp homes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
from served import Served

SCRIPTS = Path(sys.executable).parent


def _coffer(*args: str, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPTS / "coffer"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COFFER_HOME": str(home), **(env or {})},
    )


# -- 1: organize with a provider and no model ------------------------------------------------------


def test_organize_with_a_provider_but_no_model_is_an_error_naming_the_setting(tmp_path: Path) -> None:
    """``llm.provider = openai`` set without ``llm.model``: ``organize`` and ``reorg`` said "nothing
    to do" and exited 0, as if the half-made setting were fine."""
    home = tmp_path / "home"
    assert _coffer("remember", "--global", "Deploy on Tuesdays.", home=home).returncode == 0
    assert _coffer("config", "set", "llm.provider", "openai", home=home).returncode == 0
    for command in ("organize", "reorg"):
        proc = _coffer(command, "--global", home=home)
        assert proc.returncode == 1, (proc.stdout, proc.stderr)
        assert proc.stdout == ""
        assert proc.stderr.startswith("error: INVALID_INPUT: the [llm] provider 'openai' has no model:"), (
            proc.stderr
        )
        assert "coffer config set llm.model NAME" in proc.stderr
        proc = _coffer(command, "--global", "--json", home=home)
        assert proc.returncode == 1 and proc.stdout == ""
        error = json.loads(proc.stderr)["error"]
        assert error["code"] == "INVALID_INPUT" and error["details"]["field"] == "llm.model", error
    inbox = home / "memory" / "global" / "knowledge" / "inbox"
    assert len(list(inbox.glob("*.md"))) == 1  # nothing was filed
    assert _coffer("config", "unset", "llm.provider", home=home).returncode == 0
    proc = _coffer("organize", "--global", home=home)  # no model at all: still the no-op
    assert proc.returncode == 0 and "nothing to do" in proc.stdout, proc


def test_rest_organize_with_a_provider_but_no_model_is_refused_naming_the_setting(tmp_path: Path) -> None:
    """``POST .../organize`` queued an operation that "succeeded" with status ``no_model``."""
    home = tmp_path / "home"
    assert _coffer("config", "set", "llm.provider", "openai", home=home).returncode == 0
    env = {k: v for k, v in os.environ.items() if k != "COFFER_API_TOKEN"}
    args = [str(SCRIPTS / "coffer-api"), "--home", str(home), "--log-level", "warning"]
    with Served(args, env) as api:
        for kind in ("organize", "reorg"):
            r = httpx.post(f"{api.base}/api/v1/memory_stores/global/{kind}", json={}, timeout=60)
            assert r.status_code == 422, r.text
            error = r.json()["error"]
            assert error["code"] == "INVALID_INPUT" and error["details"]["field"] == "llm.model", error
            assert "coffer config set llm.model NAME" in error["message"]
        assert httpx.get(f"{api.base}/api/v1/operations", timeout=60).json()["items"] == []


# -- 3: zero-width characters in the web view ---------------------------------------------------

ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"


def test_the_web_view_shows_zero_width_characters_written_out(tmp_path: Path) -> None:
    """A title ``pay\\u200bpal`` looked like ``paypal`` on every page (bidi controls were written
    out, zero-width ones were not): each shows as ``\\u200b`` now, and the file keeps them."""
    home = tmp_path / "home"
    text = "send to pay\u200bpal and a\u200cb\u200dc\u2060d\ufeffe"
    made = _coffer("remember", "--global", "--title", "pay\u200bpal", "--json", text, home=home)
    assert made.returncode == 0, made.stderr
    written = json.loads(made.stdout)
    fact = written["fact"]
    env = {k: v for k, v in os.environ.items() if k != "COFFER_API_TOKEN"}
    args = [str(SCRIPTS / "coffer-api"), "--home", str(home), "--log-level", "warning"]
    with Served(args, env) as api:
        for url in (
            "/ui/stores/global",
            f"/ui/stores/global/facts/{fact['id']}",
            "/ui/search?q=send&store=global",
        ):
            r = httpx.get(api.base + url, timeout=60)
            assert r.status_code == 200, (url, r.text)
            assert not any(c in r.text for c in ZERO_WIDTH), url
            assert "pay\\u200bpal" in r.text, url
        shown = httpx.get(f"{api.base}/ui/stores/global/facts/{fact['id']}", timeout=60).text
        assert "a\\u200cb\\u200dc\\u2060d\\ufeffe" in shown
    assert text in Path(written["path"]).read_text(encoding="utf-8")
