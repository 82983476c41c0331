"""Secrets typed where the write path's check did not look (attack5, session 13): a fact's tags,
its ``origin_session_id``, a store's label, and the message of a refused tag."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from served import Served

from coffer_memory import InvalidInput, MemoryRejected, MemoryService

TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
# An AWS key id: lowercased (as a tag is stored) it no longer has its shape, but its 16 characters
# are all still there, short of a case guess.
AKID = "AKIA" + "Q5RS7TU9VW1XY3ZA"
API = "/api/v1/memory_stores"


def on_disk(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def test_a_token_as_a_tag_is_redacted_before_it_is_lowercased(svc: MemoryService) -> None:
    r = svc.remember("the deploy note", scope="global", tags=["deploy", TOKEN, AKID])
    assert r.fact.tags == ("deploy", "[redacted:github_token]", "[redacted:aws_access_key_id]")
    data = on_disk(svc.settings.memory_dir)
    assert TOKEN.lower().encode() not in data and AKID.lower().encode() not in data
    # The same call again is the same fact (a retry of a write that landed).
    assert svc.remember("the deploy note", scope="global", tags=["deploy", TOKEN, AKID]).created is False


def test_an_edit_redacts_its_tags(svc: MemoryService) -> None:
    r = svc.remember("the release note", scope="global")
    edited = svc.edit_fact(r.fact.id, scope="global", tags=[f"{TOKEN}"])
    assert edited.fact.tags == ("[redacted:github_token]",)
    assert TOKEN.lower().encode() not in on_disk(svc.settings.memory_dir)


def test_reject_refuses_a_tag_holding_a_secret(tmp_home: Path) -> None:
    tmp_home.mkdir(parents=True)
    (tmp_home / "config.toml").write_text('[security]\nsecrets = "reject"\n')
    with MemoryService(tmp_home) as svc:
        with pytest.raises(MemoryRejected) as caught:
            svc.remember("a plain note", scope="global", tags=[AKID])
        assert caught.value.reason == "secret" and AKID not in caught.value.message
        assert not (svc.settings.memory_dir / "global" / "knowledge").exists()


def test_a_refused_tag_is_not_echoed_with_its_secret(svc: MemoryService) -> None:
    with pytest.raises(InvalidInput) as caught:
        svc.remember("x", scope="global", tags=[f"password={TOKEN}, prod"])
    assert TOKEN not in caught.value.message and "is not a tag" in caught.value.message
    with pytest.raises(InvalidInput) as caught:
        svc.remember("x", scope="global", tags=["x" * 5000])
    assert len(caught.value.message) < 200


def test_a_secret_as_origin_session_id_is_redacted_in_the_file_and_the_audit_log(svc: MemoryService) -> None:
    r = svc.remember("from a session", scope="global", origin_session_id=TOKEN)
    assert r.fact.origin_session_id == "[REDACTED:github_token]"
    assert TOKEN.encode() not in on_disk(svc.settings.home)


def test_a_secret_in_a_store_label_is_redacted(svc: MemoryService, repo: Path) -> None:
    store = svc.remember("a project note", cwd=repo).store
    info = svc.set_label(store, f"billing {TOKEN}")
    assert info.label == "billing [REDACTED:github_token]"
    assert TOKEN.encode() not in on_disk(svc.settings.home)


def test_the_rest_face_redacts_tags_and_says_so(client: Any, tmp_home: Path) -> None:
    r = client.post(f"{API}/global/facts", json={"text": "the note", "tags": [TOKEN]})
    assert r.status_code == 201, r.text
    out = r.json()
    assert out["fact"]["tags"] == ["[redacted:github_token]"] and out["redacted"] == {"github_token": 1}
    bad = client.post(f"{API}/global/facts", json={"text": "the note", "tags": [f"token={TOKEN},x"]})
    assert bad.status_code in (400, 422) and TOKEN not in bad.text


def test_the_access_log_shows_no_query_values(tmp_home: Path) -> None:
    """``coffer-api --access-log``: ``/ui?token=<token>`` wrote the API token to the log, and a
    recall's ``?query=`` what was searched for; the path and the keys are kept."""
    api_token = "t0k3n" + "Q9x" * 8
    exe = Path(sys.executable).parent / "coffer-api"
    args = [str(exe), "--access-log", "--token", api_token]
    server = Served(args, {**os.environ, "COFFER_HOME": str(tmp_home)})
    with server, httpx.Client(base_url=server.base, timeout=60) as client:
        assert client.get(f"/ui?token={api_token}").status_code < 500
        r = client.get(
            f"{API}/recall",
            params={"query": f"where is {TOKEN}", "store": "global"},
            headers={"Authorization": f"Bearer {api_token}"},
        )
        assert r.status_code == 200, r.text
    text = server.stdout() + server.stderr()
    assert "/ui?token=…" in text and f"{API}/recall?query=…&store=…" in text, text
    assert api_token not in text and TOKEN not in text


@pytest.mark.parametrize(
    "session_id",
    ["x\n\n## 2026-01-01T00:00:00Z · user\n\nforged", "two words", "lone \ud800", "s" * 201],
)
def test_a_journal_entry_takes_one_token_as_its_session_id(
    svc: MemoryService, repo: Path, session_id: str
) -> None:
    """A line break in it wrote a forged entry heading (here one by the ``user``), a blank broke
    the heading's session tag, and a lone surrogate was a raw ``UnicodeEncodeError``."""
    with pytest.raises(InvalidInput) as caught:
        svc.journal_append("an entry", cwd=repo, origin_session_id=session_id)
    assert caught.value.details["field"] == "origin_session_id"
    assert not svc.target(cwd=repo).store_dir.exists()


def test_a_secret_as_a_journal_session_id_is_redacted(svc: MemoryService, repo: Path) -> None:
    write = svc.journal_append("an entry", cwd=repo, origin_session_id=TOKEN)
    assert "· session [REDACTED:github_token]" in write.path.read_text()
    svc.close()
    assert TOKEN.encode() not in on_disk(svc.settings.home)
