"""Provenance per insight: every journal entry says when, by whom and from which session, on every face."""

from __future__ import annotations

import json
from pathlib import Path

import test_distill
from agent_samples import AgentSamples
from http_scripted import ScriptedServer
from test_distill import write_llm_config

from coffer_memory import MemoryService
from coffer_memory._store.files import parse_time
from coffer_memory._store.lanes import journal_entries, journal_entry, journal_header, journal_sessions

# The distillation tests' fixtures: a scripted model on 127.0.0.1 and sample sessions of three agents.
llm = test_distill.llm
samples = test_distill.samples

AT = parse_time("2026-06-01T10:00:00+00:00")


def test_entries_are_parsed_from_coffer_headings_only() -> None:
    assert AT is not None
    text = (
        journal_header("2026-06-01").decode()
        + "a preamble someone typed\n"
        + journal_entry("first, distilled", at=AT, actor="agent", origin_session_id="sess-A").decode()
        + "\n## a hand-written section\n\nstill the first entry\n"
        + journal_entry("second, by hand", at=AT, actor="user", origin_session_id=None).decode()
        + journal_entry("third", at=AT, actor="agent", origin_session_id="sess-B").decode()
    )
    entries = journal_entries(text)
    assert [(e.actor, e.origin_session_id) for e in entries] == [
        ("agent", "sess-A"),
        ("user", None),
        ("agent", "sess-B"),
    ]
    assert entries[0].text.startswith("first, distilled") and "still the first entry" in entries[0].text
    assert entries[1].text == "second, by hand" and entries[0].at == AT
    assert journal_sessions(text) == ["sess-A", "sess-B"]


def test_distilled_entries_carry_their_session_on_every_face(
    tmp_home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    from fastapi.testclient import TestClient

    from coffer_memory_fastapi import create_app

    write_llm_config(tmp_home, llm.url)
    mine = [e for e in samples.expected if e.project_path == str(samples.project_dir)]
    with MemoryService(tmp_home) as svc:
        svc.journal_append("typed by the user", cwd=samples.project_dir, actor="user")
        for expected in mine[:2]:
            assert svc.distill_session(expected.agent, expected.session_id).status == "distilled"
        sessions = [e.session_id for e in mine[:2]]
        [day] = svc.journal(cwd=samples.project_dir, limit=1)
        assert day.entries[0].actor == "user" and day.entries[0].origin_session_id is None
        distilled = day.entries[1:]
        assert distilled and {e.origin_session_id for e in distilled} == set(sessions)
        assert all(e.actor == "agent" and e.text for e in distilled)
        assert list(day.origin_session_ids) == sessions
        # The journal document's metadata in the index lists them too.
        store = svc.resolve_store(cwd=samples.project_dir)
        meta = json.loads(
            svc.db.scalar(
                "SELECT metadata FROM documents WHERE resource_name = ? AND path LIKE '%journal/%'", (store,)
            )
        )
        assert meta["origin_session_ids"] == sessions
        with TestClient(create_app(svc)) as client:
            body = client.get(f"/api/v1/memory_stores/{store}/journal", params={"limit": 1}).json()
        [out] = body["files"]
        assert [e["origin_session_id"] for e in out["entries"]] == [e.origin_session_id for e in day.entries]
        assert out["origin_session_ids"] == sessions and out["entries"][1]["actor"] == "agent"
