"""Session 27: the REST face's ``If-Match`` (RFC 9110: strong comparison, a list of tags, ``*``),
the organizer's failure when its model cannot be reached, and ``config set`` of values no
provider or server can use: review26's walk, run on a real ``coffer-api`` and the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from served import Served, closed_port

SCRIPTS = Path(sys.executable).parent


def _coffer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPTS / "coffer"), "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home whose LLM is an OpenAI-compatible server on a port where nothing listens."""
    home = tmp_path_factory.mktemp("faces27") / "home"
    for key, value in [
        ("llm.provider", "openai"),
        ("llm.model", "m"),
        ("llm.base_url", f"http://127.0.0.1:{closed_port()}/v1"),
        ("llm.max_retries", "0"),
    ]:
        assert _coffer(home, "config", "set", key, value).returncode == 0
    return home


@pytest.fixture(scope="module")
def api(home: Path) -> Iterator[Served]:
    env = {k: v for k, v in os.environ.items() if k != "COFFER_API_TOKEN"}
    with Served([str(SCRIPTS / "coffer-api"), "--home", str(home), "--log-level", "warning"], env) as served:
        yield served


def _fact(api: Served, text: str) -> dict[str, Any]:
    r = httpx.post(f"{api.base}/api/v1/memory_stores/global/facts", json={"text": text}, timeout=60)
    assert r.status_code == 201, r.text
    fact: dict[str, Any] = r.json()["fact"]
    return fact


def _patch(api: Served, fact: dict[str, Any], match: str, text: str) -> httpx.Response:
    url = f"{api.base}/api/v1/memory_stores/global/facts/{fact['id']}"
    return httpx.patch(url, json={"text": text}, headers={"If-Match": match}, timeout=60)


def test_a_weak_etag_never_matches(api: Served) -> None:
    """RFC 9110 13.1.1: If-Match compares strongly; ``W/"<sha256>"`` was taken as a match."""
    fact = _fact(api, "the staging host is stg-3")
    r = _patch(api, fact, f'W/"{fact["sha256"]}"', "the staging host is stg-4")
    assert r.status_code == 412, r.text
    assert r.json()["error"]["code"] == "MEMORY_CONFLICT"
    assert Path(fact["path"]).read_text().rstrip().endswith("stg-3")
    r = httpx.delete(
        f"{api.base}/api/v1/memory_stores/global/facts/{fact['id']}",
        headers={"If-Match": f'W/"{fact["sha256"]}"'},
        timeout=60,
    )
    assert r.status_code == 412 and Path(fact["path"]).exists()


def test_a_list_of_etags_matches_when_any_member_does(api: Served) -> None:
    """``If-Match: "a", "b"`` was refused with 422; it matches when the file has any of them."""
    fact = _fact(api, "the queue is rabbitmq")
    other = "0" * 64
    r = _patch(api, fact, f'"{other}", W/"{fact["sha256"]}"', "the queue is kafka")
    assert r.status_code == 412, r.text  # the only match is weak
    r = _patch(api, fact, f'"{other}", "{fact["sha256"]}"', "the queue is kafka")
    assert r.status_code == 200, r.text
    edited = r.json()
    assert edited["before_sha256"] == fact["sha256"]
    r = _patch(api, fact, f'"{other}" ,"{fact["sha256"]}"', "the queue is nats")  # the old tag: stale
    assert r.status_code == 412 and r.json()["error"]["details"]["actual_sha256"] == edited["after_sha256"]
    r = _patch(api, fact, f'"{other}", *', "the queue is nats")
    assert r.status_code == 200, r.text
    r = _patch(api, fact, '"a", garbage', "x")
    assert r.status_code == 422 and r.json()["error"]["code"] == "INVALID_INPUT"


def test_the_openapi_document_says_how_if_match_compares(api: Served) -> None:
    spec = httpx.get(f"{api.base}/openapi.json", timeout=60).json()
    operation = spec["paths"]["/api/v1/memory_stores/{name}/facts/{fact_id}"]["patch"]
    header = next(p for p in operation["parameters"] if p["name"] == "If-Match")
    assert "weak" in header["description"] and "list" in header["description"]
    assert "412" in operation["responses"]


def test_organize_with_an_unreachable_model_fails_typed_on_the_cli_and_rest(home: Path, api: Served) -> None:
    """Connection refused on the model's port: ``coffer organize`` exited 0 with every item
    'skipped'; it is one ``LLM_UNAVAILABLE`` line and exit status 1, and the REST operation fails
    with that code. The inbox item stays."""
    _fact(api, "deploys go through make release")
    inbox = list((home / "memory" / "global" / "knowledge" / "inbox").glob("*.md"))
    assert inbox
    out = _coffer(home, "organize", "--global")
    assert out.returncode == 1, out
    assert out.stderr.startswith("error: LLM_UNAVAILABLE: ") and out.stderr.count("\n") == 1, out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert all(p.exists() for p in inbox)
    r = httpx.post(f"{api.base}/api/v1/memory_stores/global/organize", json={}, timeout=60)
    assert r.status_code == 202, r.text
    location = f"{api.base}{r.headers['location']}"
    deadline = time.monotonic() + 120  # a bound on a loaded machine, not a timing assertion
    while (op := httpx.get(location, timeout=60).json())["status"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline, op
        time.sleep(0.05)
    assert op["status"] == "failed" and op["error"]["code"] == "LLM_UNAVAILABLE", op
    assert all(p.exists() for p in inbox)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("llm.provider", "bogus"),
        ("embedding.provider", "bogus"),
        ("llm.base_url", "not a url"),
        ("llm.base_url", "ftp://x"),
        ("llm.base_url", "http://"),
        ("embedding.base_url", "ftp://x"),
        ("embedding.base_url", "http://"),
    ],
)
def test_config_set_refuses_a_provider_or_url_nothing_can_use(tmp_path: Path, key: str, value: str) -> None:
    """Both were saved, and failed only when a model was first asked; now INVALID_INPUT naming the
    key (and, for a provider, the ones installed), with config.toml unchanged."""
    home = tmp_path / "home"
    assert _coffer(home, "config", "set", "llm.model", "m").returncode == 0
    before = (home / "config.toml").read_bytes()
    out = _coffer(home, "config", "set", key, value)
    assert out.returncode == 1, out
    assert out.stderr.startswith(f"error: INVALID_INPUT: not saved: {key} must be "), out.stderr
    if key.endswith("provider"):
        assert "none" in out.stderr and "openai" in out.stderr
    else:
        assert "http:// or https://" in out.stderr
    assert (home / "config.toml").read_bytes() == before
    assert (
        _coffer(
            home, "config", "set", key, "openai" if key.endswith("provider") else "http://127.0.0.1:1/v1"
        ).returncode
        == 0
    )
