"""A JSON integer longer than Python converts, in a file coffer reads but did not write.

``json.loads`` raises a plain ``ValueError`` (``Exceeds the limit (4300 digits) for integer
string conversion``) for a number of 5,000 digits, not the ``json.JSONDecodeError`` its callers
catch: an agent's ``settings.json`` or coffer's own ``agents.json`` holding one made ``coffer
agents`` an ``unexpected ValueError`` and the REST agent routes a ``500 INTERNAL``. It is now broken
JSON like any other (``AGENT_CONFIG_INVALID``), and the file is left as it was.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

DIGITS = "9" * (sys.get_int_max_str_digits() + 700)


def test_an_agent_settings_file_with_a_huge_number_is_agent_config_invalid(client: Any) -> None:
    settings = Path(os.environ["CLAUDE_CONFIG_DIR"]) / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(f'{{"model": "x", "n": {DIGITS}}}\n', encoding="utf-8")
    before = settings.read_bytes()
    answer = client.post("/api/v1/agents/claude-code/hook-install", json={})
    assert answer.status_code == 409, answer.text[:300]
    error = answer.json()["error"]
    assert error["code"] == "AGENT_CONFIG_INVALID"
    assert "more than" in error["message"] and "digits" in error["message"]
    assert settings.read_bytes() == before


def test_coffers_own_agent_registry_with_a_huge_number_is_agent_config_invalid(
    cli: Any, tmp_home: Path
) -> None:
    tmp_home.mkdir(parents=True, exist_ok=True)
    (tmp_home / "agents.json").write_text(f'{{"agents": {{"x": {DIGITS}}}}}', encoding="utf-8")
    result = cli("agents", "list")
    assert result.returncode != 0
    assert "AGENT_CONFIG_INVALID" in result.stderr and "unexpected" not in result.stderr, result.stderr
