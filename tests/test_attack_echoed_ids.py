"""An id or a name a caller sends and coffer does not find is repeated in the error (attack6,
session 14): bounded, with terminal escapes, control and format characters removed, on every face (the library, the CLI, REST, MCP)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from coffer_memory import MemoryNotFound, MemoryService, MemoryStoreNotFound, SessionNotFound, safe_echo
from coffer_memory_mcp import build_server

ESCAPES = "\x1b]0;pwned\x07\x1b[31mred\x1b[0m\u202e\x00\x9b2J"
HOSTILE = "01" + ESCAPES + "A" * 100_000


def clean(text: str) -> None:
    assert len(text) < 600, len(text)
    assert not any(c in text for c in "\x1b\x07\x00\x9b\u202e"), repr(text)
    assert "pwned" not in text or "]0;" not in text


def test_a_missing_fact_id_is_echoed_bounded_and_clean(svc: MemoryService) -> None:
    svc.remember("a note", scope="global")
    for fact_id in (HOSTILE, "x" * 300 + ESCAPES):
        with pytest.raises(MemoryNotFound) as caught:
            svc.get_fact(fact_id, scope="global")
        clean(caught.value.message)
        clean(json.dumps(caught.value.to_dict(), ensure_ascii=False))


def test_other_not_found_errors_echo_bounded_and_clean() -> None:
    for exc in (
        MemoryStoreNotFound(HOSTILE),
        SessionNotFound(HOSTILE, HOSTILE),
        MemoryStoreNotFound(ESCAPES * 50),
    ):
        clean(exc.message)
        clean(json.dumps(exc.to_dict(), ensure_ascii=False))


def test_the_cli_echoes_a_missing_id_bounded_and_clean(cli: Any) -> None:
    assert cli("remember", "--global", "a note").returncode == 0
    for args in (("facts", "show"), ("facts", "rm"), ("facts", "show", "--json")):
        r = cli(*args, "--global", "01" + ESCAPES + "A" * 20_000)
        assert r.returncode == 1 and "MEMORY_NOT_FOUND" in (r.stderr + r.stdout)
        clean(r.stderr + r.stdout)


def test_rest_echoes_a_missing_id_bounded_and_clean(client: Any) -> None:
    assert client.post("/api/v1/memory_stores/global/facts", json={"text": "a note"}).status_code < 300
    for fact_id in ("01" + ESCAPES + "A" * 4000, ESCAPES + "B" * 30):
        r = client.get(f"/api/v1/memory_stores/global/facts/{quote(fact_id, safe='')}")
        assert r.status_code == 404
        clean(r.text.encode().decode("unicode_escape", "replace") if "\\u" in r.text else r.text)
        clean(json.dumps(r.json(), ensure_ascii=False))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_mcp_echoes_a_missing_id_bounded_and_clean(svc: MemoryService) -> None:
    svc.remember("a note", scope="global")
    async with Client(build_server(svc)) as client:
        for fact_id in ("01" + "A" * 4000 + "%1B%5B2J", "01" + "A" * 4000 + ESCAPES):
            with pytest.raises(MCPError) as caught:
                await client.read_resource(f"coffer://global/facts/{fact_id}")
            assert "MEMORY_NOT_FOUND" in str(caught.value) or "Unknown resource" in str(caught.value)
            clean(str(caught.value))


def test_safe_echo_keeps_a_plain_id_and_cuts_a_long_one() -> None:
    assert safe_echo("01ARZ3NDEKTSV4RRFFQ69G5FAV") == "01ARZ3NDEKTSV4RRFFQ69G5FAV"
    assert safe_echo("a" * 64) == "a" * 64
    assert safe_echo("a" * 65) == "a" * 63 + "…"
    assert safe_echo("a\x1b[31mb\u200bc") == "abc"


def test_a_usage_error_repeats_what_was_typed_bounded_and_clean(cli: Any) -> None:
    # argparse printed an unrecognised argument raw: an OSC escape retitled the terminal.
    for args in (
        ("facts", "show", "--global", "x", ESCAPES + "A" * 5000),
        ("no-such" + ESCAPES + "B" * 5000,),
    ):
        r = cli(*args)
        assert r.returncode == 2 and "error:" in r.stderr
        assert len(r.stderr) < 2500 and not any(c in r.stderr for c in "\x1b\x07\x00\x9b\u202e")


def test_an_id_of_bytes_that_are_not_utf8_is_named_not_blank(tmp_home: Path, tmp_path: Path) -> None:
    """``coffer facts show $'\\xff\\xfe'`` said "memory '' not found": the bytes, decoded with
    surrogateescape, are lone surrogates, which safe_echo dropped as control characters. The
    real command line, bytes and all (fixes16)."""
    env = {**os.environ, "COFFER_HOME": str(tmp_home), "LC_ALL": "C.UTF-8"}
    run = [sys.executable, "-m", "coffer_memory._cli"]
    subprocess.run(
        [*run, "remember", "--global", "a note"], env=env, cwd=tmp_path, check=True, capture_output=True
    )
    out = subprocess.run(
        [*run, "facts", "show", "--global", b"\xff\xfe"], env=env, cwd=tmp_path, capture_output=True
    )
    err = out.stderr.decode("utf-8")
    assert out.returncode == 1 and "MEMORY_NOT_FOUND" in err, err
    assert "memory ''" not in err and "\\xff\\xfe" in err.replace("\\\\", "\\"), err
    assert "Traceback" not in err


def test_safe_echo_shows_undecodable_bytes_escaped() -> None:
    assert safe_echo("\udcff\udcfe") == "\\xff\\xfe"
    assert safe_echo("a\ud800b") == "a\\ud800b"
    assert len(safe_echo("\udcff" * 1000)) == 64
