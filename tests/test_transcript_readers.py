"""Transcript readers and the session listing, over realistic sample agent homes (tests/agent_samples.py)."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from agent_samples import (
    CLAUDE_A,
    CLAUDE_B,
    CLAUDE_C,
    CLAUDE_D,
    CLAUDE_EMPTY,
    CODEX_ARCHIVED,
    CODEX_BARE,
    CODEX_EMPTY,
    CODEX_NEW,
    CODEX_OLD,
    FAKE_SECRETS,
    MARKERS,
    OC_ARCHIVED,
    OC_CHILD,
    OC_DEFAULT_TITLE,
    OC_EMPTY,
    OC_LEGACY_CHILD,
    OC_LEGACY_ONLY,
    OC_MAIN,
    SECRET_CORES,
    T0,
    AgentSamples,
    build,
    claude_project_folder,
    insert_opencode_session,
    simple_opencode_session,
)

from coffer_memory._agents.homes import AgentHomes
from coffer_memory._errors import InvalidInput, SessionNotFound
from coffer_memory._transcripts.claude_code import ClaudeCodeReader
from coffer_memory._transcripts.listing import SessionLister, reader_for
from coffer_memory._transcripts.models import SessionSummary, Transcript
from coffer_memory._transcripts.opencode import OpenCodeReader, connect_readonly
from coffer_memory._transcripts.readers import SourceScan

AGENT_NAMES = ("claude-code", "codex", "opencode")


@pytest.fixture
def samples(tmp_path: Path) -> AgentSamples:
    return build(tmp_path / "agents")


@pytest.fixture
def lister(samples: AgentSamples) -> SessionLister:
    return SessionLister(samples.homes())


def _all(lister: SessionLister, agent: str) -> dict[str, SessionSummary]:
    return {s.session_id: s for s in lister.all_sessions(agent)}


def _transcripts(lister: SessionLister) -> Iterator[Transcript]:
    for agent in AGENT_NAMES:
        for summary in lister.all_sessions(agent):
            yield lister.load(agent, summary.session_id)


def _texts(transcript: Transcript, role: str) -> list[str]:
    return [m.text for m in transcript.messages if m.role == role]


# -- the expected table -------------------------------------------------------------------------


@pytest.mark.parametrize("agent", AGENT_NAMES)
def test_listing_matches_the_expected_table(samples: AgentSamples, lister: SessionLister, agent: str) -> None:
    got = {
        (s.session_id, s.title, s.project_path, s.message_count, s.started_at, s.last_activity_at)
        for s in lister.all_sessions(agent)
    }
    want = {
        (
            e.session_id,
            e.title,
            e.project_path,
            e.message_count,
            datetime.fromisoformat(e.started_at),
            datetime.fromisoformat(e.last_activity_at),
        )
        for e in samples.expected_for(agent)
    }
    assert got == want


def test_summaries_are_consistent_with_loaded_transcripts(lister: SessionLister) -> None:
    for transcript in _transcripts(lister):
        summary = transcript.summary
        assert summary.message_count == len(transcript.messages) > 0
        assert Path(summary.source_path).is_absolute()
        assert summary.started_at is not None and summary.last_activity_at is not None
        assert summary.started_at.utcoffset() == summary.last_activity_at.utcoffset() == timedelta(0)
        assert summary.started_at <= summary.last_activity_at
        assert all(
            m.timestamp is None or m.timestamp.utcoffset() == timedelta(0) for m in transcript.messages
        )
        assert all(m.text.strip() == m.text and m.text for m in transcript.messages)


def test_no_dropped_content_reaches_a_transcript(lister: SessionLister) -> None:
    """Tool I/O, reasoning, subagents, injected instructions, synthetic parts, compaction summaries."""
    for transcript in _transcripts(lister):
        for message in transcript.messages:
            assert not [marker for marker in MARKERS if marker in message.text], transcript.summary.session_id


def test_prose_is_carried_verbatim_secrets_included(lister: SessionLister) -> None:
    # Readers do not scrub (that is the next stage): every planted secret is in some prose turn.
    prose = "\n".join(m.text for t in _transcripts(lister) for m in t.messages)
    assert {kind for kind, core in SECRET_CORES.items() if core not in prose} == set()


def test_no_secret_literal_in_the_fixture_source() -> None:
    source = (Path(__file__).parent / "agent_samples.py").read_text(encoding="utf-8")
    assert [kind for kind, core in SECRET_CORES.items() if core in source] == []
    assert set(FAKE_SECRETS) >= {
        "aws_access_key",
        "aws_secret",
        "github_token",
        "github_oauth",
        "github_pat",
        "openai_key",
        "anthropic_key",
        "slack_token",
        "google_api_key",
        "jwt",
        "pem_private_key",
        "openssh_private_key",
        "password",
        "url_with_credentials",
    }


# -- Claude Code --------------------------------------------------------------------------------


def test_claude_subagent_files_are_not_sessions(samples: AgentSamples) -> None:
    reader = ClaudeCodeReader(samples.homes().claude)
    names = {p.name for p in reader.sources()}
    assert names == {f"{sid}.jsonl" for sid in (CLAUDE_A, CLAUDE_B, CLAUDE_C, CLAUDE_D, CLAUDE_EMPTY)}
    folder = samples.homes().claude / "projects" / claude_project_folder(samples.project_dir)
    assert (folder / "agent-b7e4d10.jsonl").is_file()
    assert (folder / CLAUDE_A / "subagents" / "agent-a3f9c21.jsonl").is_file()


def test_claude_turns(lister: SessionLister) -> None:
    a = lister.load("claude-code", CLAUDE_A)
    assert _texts(a, "user") == [
        a.messages[0].text,
        "ok. add a --profile flag to deploy.sh so CI can pass AWS_PROFILE explicitly",
        "run shellcheck on it",
    ]
    assert a.messages[0].text.startswith("scripts/deploy.sh fails with AccessDenied")
    # The three lines of the first response (thinking, text, tool_use) are one turn: its text.
    assert _texts(a, "assistant")[0] == "I'll start by reading the deploy script."
    assert _texts(a, "assistant")[2] == "Running shellcheck."
    assert [m.role for m in a.messages] == [
        "user",
        "assistant",
        "assistant",
        "user",
        "user",
        "assistant",
        "assistant",
    ]
    assert a.dropped["tool_result"] == 5
    assert a.dropped["sidechain"] == 2
    assert a.dropped["compact_summary"] == 1
    assert a.messages[0].timestamp == datetime(2026, 11, 20, 9, 58, 41, 530000, tzinfo=UTC)


def test_claude_reminders_are_cut_out_of_prompts(lister: SessionLister) -> None:
    c = lister.load("claude-code", CLAUDE_C)
    assert _texts(c, "user")[1] == "rotate them and move both to the secret store"
    assert c.dropped["system_reminder"] == 1


def test_claude_response_split_over_lines_is_joined(lister: SessionLister) -> None:
    d = lister.load("claude-code", CLAUDE_D)
    assert _texts(d, "assistant")[0] == (
        "Postgres 16 defaults password_encryption to scram-sha-256.\n\n"
        "Reset the role's password so it is stored as SCRAM, then retry."
    )


def test_claude_interruption_and_images_are_not_prose(lister: SessionLister) -> None:
    b = lister.load("claude-code", CLAUDE_B)
    assert _texts(b, "user")[1] == "also purge it from history with git filter-repo"
    assert len(_texts(b, "user")) == 2
    assert b.dropped["image"] == 1
    assert FAKE_SECRETS["pem_private_key"] in _texts(b, "user")[0]


def test_claude_summary_line_titles_the_file_it_points_into(samples: AgentSamples) -> None:
    reader = ClaudeCodeReader(samples.homes().claude)
    path_c = next(p for p in reader.sources() if p.stem == CLAUDE_C)
    path_b = next(p for p in reader.sources() if p.stem == CLAUDE_B)
    # Alone, C only has its own summary line, which points into B: not C's title.
    alone = reader.summaries(path_c)
    assert alone[0].title is not None and alone[0].title.startswith("The Slack bot stopped posting")
    together = {s.session_id: s.title for s in reader.resolve([reader.scan(path_b), reader.scan(path_c)])}
    assert together == {CLAUDE_B: "pem key cleanup", CLAUDE_C: "Rotate leaked Slack and Google keys"}


def test_claude_ai_title_when_no_custom_title(samples: AgentSamples, tmp_path: Path) -> None:
    reader = ClaudeCodeReader(samples.homes().claude)
    path_b = next(p for p in reader.sources() if p.stem == CLAUDE_B)
    copy = tmp_path / "projects" / "x" / path_b.name
    copy.parent.mkdir(parents=True)
    copy.write_text(
        "".join(line + "\n" for line in path_b.read_text().splitlines() if '"custom-title"' not in line)
    )
    assert ClaudeCodeReader(tmp_path).summaries(copy)[0].title == "Remove committed dev.pem private key"


def test_claude_project_path_is_the_real_cwd(samples: AgentSamples, lister: SessionLister) -> None:
    d = lister.find("claude-code", CLAUDE_D)
    assert d.project_path == str(samples.other_project_dir)
    assert "infra_tools.v2" in d.project_path
    assert Path(d.source_path).parent.name == claude_project_folder(samples.other_project_dir)


# -- Codex --------------------------------------------------------------------------------------


def test_codex_event_msg_not_double_counted_and_injected_items_skipped(lister: SessionLister) -> None:
    t = lister.load("codex", CODEX_NEW)
    assert [m.role for m in t.messages] == ["user", "assistant", "user", "assistant"]
    assert t.messages[0].text.startswith("Our release workflow leaks credentials")
    assert t.messages[2].text == "thanks. move the postgres password to .env too"
    assert t.dropped["developer"] == 1
    assert t.dropped["injected_context"] == 2
    assert t.dropped["function_call"] == 2 and t.dropped["function_call_output"] == 2
    assert t.dropped["custom_tool_call"] == 1 and t.dropped["reasoning"] == 1


def test_codex_old_and_pre_envelope_shapes(samples: AgentSamples, lister: SessionLister) -> None:
    old = lister.load("codex", CODEX_OLD)
    assert FAKE_SECRETS["openssh_private_key"] in old.messages[0].text
    assert old.dropped["local_shell_call"] == 1
    bare = lister.find("codex", CODEX_BARE)
    assert bare.project_path == str(samples.project_dir)  # from the injected <environment_context>
    assert _texts(lister.load("codex", CODEX_BARE), "assistant")[0].startswith("Every response sets")


def test_codex_archived_and_empty_rollouts_are_not_listed(lister: SessionLister) -> None:
    ids = set(_all(lister, "codex"))
    assert CODEX_ARCHIVED not in ids and CODEX_EMPTY not in ids
    assert ids == {CODEX_NEW, CODEX_OLD, CODEX_BARE}


def test_codex_session_id_from_file_name_without_meta(tmp_path: Path) -> None:
    folder = tmp_path / "sessions" / "2026" / "01" / "02"
    folder.mkdir(parents=True)
    sid = "019b0000-1111-7222-8333-444455556666"
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}
    line = {"timestamp": "2026-01-02T03:04:05Z", "type": "response_item", "payload": item}
    (folder / f"rollout-2026-01-02T03-04-05-{sid}.jsonl").write_text(json.dumps(line) + "\n")
    (summary,) = reader_for("codex", _homes_with(codex=tmp_path)).summaries(
        folder / f"rollout-2026-01-02T03-04-05-{sid}.jsonl"
    )
    assert (summary.session_id, summary.title, summary.project_path, summary.message_count) == (
        sid,
        "hello",
        None,
        1,
    )


# -- OpenCode -----------------------------------------------------------------------------------


def test_opencode_database_wins_over_legacy_copy(samples: AgentSamples, lister: SessionLister) -> None:
    sessions = lister.all_sessions("opencode")
    assert [s.session_id for s in sessions].count(OC_MAIN) == 1
    main = _all(lister, "opencode")[OC_MAIN]
    assert main.title == "Remove hard-coded AWS keys from deploy"  # the legacy copy says "stale legacy title"
    assert Path(main.source_path) == samples.homes().opencode_data / "opencode.db"
    legacy = _all(lister, "opencode")[OC_LEGACY_ONLY]
    assert Path(legacy.source_path).suffix == ".json"


def test_opencode_children_empty_and_default_titles(lister: SessionLister) -> None:
    listed = _all(lister, "opencode")
    assert set(listed) == {OC_MAIN, OC_DEFAULT_TITLE, OC_LEGACY_ONLY}
    assert not {OC_CHILD, OC_LEGACY_CHILD, OC_EMPTY, OC_ARCHIVED} & set(listed)
    assert listed[OC_DEFAULT_TITLE].title == "Why does the nightly export job run twice on Sundays?"


def test_opencode_prose_parts_only(lister: SessionLister) -> None:
    t = lister.load("opencode", OC_MAIN)
    assert [m.role for m in t.messages] == ["user", "assistant", "assistant", "user", "assistant"]
    assert t.messages[0].text.startswith("@scripts/deploy.sh has my keys inline")
    assert "\n\n" not in t.messages[0].text  # the two synthetic parts are not joined in
    assert t.dropped["synthetic_text"] == 2 and t.dropped["ignored_text"] == 1
    assert t.dropped["tool"] == 2 and t.dropped["reasoning"] == 1 and t.dropped["file"] == 1
    assert t.messages[0].timestamp == datetime(2026, 11, 20, 11, 0, 1, tzinfo=UTC)


def test_opencode_legacy_transcript(lister: SessionLister) -> None:
    t = lister.load("opencode", OC_LEGACY_ONLY)
    assert [(m.role, m.text) for m in t.messages] == [
        ("user", "bump node to 22 in the CI matrix"),
        ("assistant", "Done: `.github/workflows/ci.yml` now tests Node 22."),
    ]


# -- listing: search, filters, sort, pages ------------------------------------------------------


def _ids(page_items: tuple[SessionSummary, ...]) -> list[str]:
    return [s.session_id for s in page_items]


def test_search_is_case_insensitive_on_title_and_project(
    samples: AgentSamples, lister: SessionLister
) -> None:
    assert _ids(lister.list_sessions("claude-code", search="PEM KEY").items) == [CLAUDE_B]
    assert _ids(lister.list_sessions("claude-code", search="infra_TOOLS").items) == [CLAUDE_D]
    assert lister.list_sessions("codex", search="no such thing").total == 0
    assert lister.list_sessions("codex", search="  ").total == 3


def test_project_filter_is_exact(samples: AgentSamples, lister: SessionLister) -> None:
    page = lister.list_sessions("claude-code", project=str(samples.project_dir))
    assert set(_ids(page.items)) == {CLAUDE_A, CLAUDE_B, CLAUDE_C}
    assert lister.list_sessions("claude-code", project=str(samples.project_dir) + "/").total == 0
    assert _ids(lister.list_sessions("opencode", project=str(samples.other_project_dir)).items) == [
        OC_DEFAULT_TITLE
    ]


def test_started_filters(lister: SessionLister) -> None:
    after = datetime(2026, 11, 20, 14, 11, 5, 310000, tzinfo=UTC)
    page = lister.list_sessions("claude-code", started_after=after, sort="started_at", order="asc")
    assert _ids(page.items) == [CLAUDE_B, CLAUDE_C, CLAUDE_D]  # inclusive lower bound
    page = lister.list_sessions("claude-code", started_before=after)
    assert _ids(page.items) == [CLAUDE_A]  # exclusive upper bound
    naive = datetime(2026, 1, 1)  # taken as UTC
    assert _ids(lister.list_sessions("codex", started_before=naive).items) == [CODEX_BARE]


def test_sort_order_and_pages(lister: SessionLister) -> None:
    newest_first = _ids(lister.list_sessions("claude-code").items)
    assert newest_first == [CLAUDE_D, CLAUDE_C, CLAUDE_B, CLAUDE_A]
    assert _ids(lister.list_sessions("claude-code", order="asc").items) == newest_first[::-1]
    by_count = lister.list_sessions("claude-code", sort="message_count", order="desc").items
    assert by_count[0].session_id == CLAUDE_A and [s.message_count for s in by_count] == [7, 4, 4, 4]
    page = lister.list_sessions("claude-code", limit=2, offset=1)
    assert (page.total, _ids(page.items)) == (4, newest_first[1:3])
    assert lister.list_sessions("claude-code", offset=10).items == ()


def test_sessions_without_timestamps_sort_last_either_way(samples: AgentSamples) -> None:
    folder = samples.homes().claude / "projects" / "-no-time"
    folder.mkdir()
    line = {
        "type": "user",
        "cwd": "/x",
        "uuid": "u1",
        "message": {"role": "user", "content": "no clock here"},
    }
    (folder / "0000-no-time.jsonl").write_text(json.dumps(line) + "\n")
    lister = SessionLister(samples.homes())
    for order in ("asc", "desc"):
        for sort in ("started_at", "last_activity_at"):
            items = lister.list_sessions("claude-code", sort=sort, order=order).items
            assert items[-1].session_id == "0000-no-time"
            assert items[-1].started_at is None and items[-1].title == "no clock here"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"sort": "title"}, "sort"),
        ({"order": "up"}, "order"),
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"limit": True}, "limit"),
        ({"limit": "5"}, "limit"),
        ({"offset": -1}, "offset"),
    ],
)
def test_invalid_listing_arguments(lister: SessionLister, kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        lister.list_sessions("codex", **kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_unknown_agent_and_unknown_session(lister: SessionLister) -> None:
    with pytest.raises(InvalidInput) as caught:
        lister.list_sessions("cursor")
    assert caught.value.field == "agent"
    with pytest.raises(ValueError):
        reader_for("cursor", lister.homes)
    with pytest.raises(SessionNotFound) as missing:
        lister.find("codex", "nope")
    assert (
        missing.value.code == "SESSION_NOT_FOUND"
        and missing.value.to_dict()["details"]["session_id"] == "nope"
    )
    with pytest.raises(SessionNotFound):
        lister.load("opencode", OC_CHILD)  # exists on disk, but child sessions are not listed


def test_missing_agent_homes_list_nothing(tmp_path: Path) -> None:
    lister = SessionLister(_homes_with(claude=tmp_path / "a", codex=tmp_path / "b", data=tmp_path / "c"))
    assert [lister.list_sessions(agent).total for agent in AGENT_NAMES] == [0, 0, 0]


# -- the parse cache ----------------------------------------------------------------------------


def test_relisting_parses_only_changed_files(samples: AgentSamples, lister: SessionLister) -> None:
    lister.all_sessions("claude-code")
    assert lister.scans == 5  # A-D and the empty session
    lister.all_sessions("claude-code")
    assert (lister.scans, lister.last_scanned) == (5, [])
    path_d = Path(lister.find("claude-code", CLAUDE_D).source_path)
    extra = {
        "type": "user",
        "cwd": "/elsewhere",
        "uuid": "extra-1",
        "timestamp": "2026-11-22T17:00:00.000Z",
        "message": {"role": "user", "content": "one more question"},
    }
    with open(path_d, "a", encoding="utf-8") as handle:  # completes the half-written line first
        handle.write('"}}\n' + json.dumps(extra) + "\n")
    d = lister.find("claude-code", CLAUDE_D)
    assert lister.last_scanned == [path_d] and lister.scans == 6
    assert d.message_count == 6  # the completed line and the new one
    assert d.last_activity_at == datetime(2026, 11, 22, 17, tzinfo=UTC)


def test_summary_titles_follow_the_file_that_changed(samples: AgentSamples, lister: SessionLister) -> None:
    # C is titled by a line in B's file: editing B alone must re-title C.
    assert lister.find("claude-code", CLAUDE_C).title == "Rotate leaked Slack and Google keys"
    path_b = Path(lister.find("claude-code", CLAUDE_B).source_path)
    kept = [line for line in path_b.read_text().splitlines() if '"type":"summary"' not in line]
    path_b.write_text("\n".join(kept) + "\n")
    assert lister.find("claude-code", CLAUDE_C).title.startswith("The Slack bot stopped posting")
    assert lister.last_scanned == [path_b]


def test_vanished_files_are_evicted(samples: AgentSamples, lister: SessionLister) -> None:
    path_c = Path(lister.find("claude-code", CLAUDE_C).source_path)
    assert path_c in lister.cached_sources("claude-code")
    path_c.unlink()
    assert CLAUDE_C not in _all(lister, "claude-code")
    assert path_c not in lister.cached_sources("claude-code")
    with pytest.raises(SessionNotFound):
        lister.load("claude-code", CLAUDE_C)


class _VanishingReader(ClaudeCodeReader):
    """A real reader over a directory where files disappear between listing and reading."""

    def __init__(self, claude_dir: Path, victim: str) -> None:
        super().__init__(claude_dir)
        self.victim = victim

    def sources(self) -> list[Path]:
        return [*super().sources(), self.projects / "ghost" / "gone.jsonl"]  # listed, never existed

    def scan(self, source: Path) -> SourceScan:
        if source.stem == self.victim:
            source.unlink()  # deleted after the stat, before the open
        return super().scan(source)


def test_files_vanishing_mid_listing_are_skipped(samples: AgentSamples) -> None:
    homes = samples.homes()
    lister = SessionLister(homes, readers={"claude-code": _VanishingReader(homes.claude, CLAUDE_A)})
    assert set(_all(lister, "claude-code")) == {CLAUDE_B, CLAUDE_C, CLAUDE_D}


def test_loading_a_file_deleted_after_listing(samples: AgentSamples, lister: SessionLister) -> None:
    summary = lister.find("codex", CODEX_OLD)
    Path(summary.source_path).unlink()
    with pytest.raises(SessionNotFound):
        lister.load("codex", CODEX_OLD)


def test_garbage_files_do_not_break_listing(samples: AgentSamples) -> None:
    folder = samples.homes().claude / "projects" / claude_project_folder(samples.project_dir)
    (folder / "binary.jsonl").write_bytes(b'\x00\xff\xfe garbage\n[1,2,3]\n"a string"\n{"type":\n')
    (folder / "empty.jsonl").write_bytes(b"")
    day = samples.homes().codex / "sessions" / "2026" / "11" / "20"
    (day / "rollout-2026-11-20T00-00-00-bad.jsonl").write_bytes(b"\xc3\x28 not utf-8\n")
    lister = SessionLister(samples.homes())
    assert len(lister.all_sessions("claude-code")) == 4
    assert len(lister.all_sessions("codex")) == 3


def test_concurrent_listing_parses_each_file_once(samples: AgentSamples) -> None:
    lister = SessionLister(samples.homes())
    results: list[list[str]] = []

    def run() -> None:
        results.append(sorted(s.session_id for s in lister.all_sessions("codex")))

    threads = [threading.Thread(target=run) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 6 and all(r == results[0] for r in results)
    assert lister.scans == 4  # sessions/ holds four rollouts (three listed, one empty): each parsed once


# -- read-only --------------------------------------------------------------------------------------


def _snapshot(dirs: list[Path]) -> dict[str, tuple[str, int, int]]:
    out: dict[str, tuple[str, int, int]] = {}
    for base in dirs:
        for path in sorted(base.rglob("*")):
            st = path.lstat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
            out[str(path)] = (digest, st.st_mtime_ns, stat.S_IMODE(st.st_mode))
    return out


def test_nothing_under_the_agent_homes_is_written(samples: AgentSamples) -> None:
    before = _snapshot(samples.agent_dirs())
    lister = SessionLister(samples.homes())
    transcripts = list(_transcripts(lister))
    for agent in AGENT_NAMES:
        lister.list_sessions(agent, search="a", sort="message_count")
    list(_transcripts(SessionLister(samples.homes())))
    assert len(transcripts) == len(samples.expected)
    assert _snapshot(samples.agent_dirs()) == before  # same files, same bytes, same mtimes


def test_read_only_database_and_folder(samples: AgentSamples) -> None:
    data = samples.homes().opencode_data
    db = data / "opencode.db"
    db.chmod(0o444)
    data.chmod(0o555)
    try:
        before = _snapshot([data])
        lister = SessionLister(samples.homes())
        assert set(_all(lister, "opencode")) == {OC_MAIN, OC_DEFAULT_TITLE, OC_LEGACY_ONLY}
        assert len(lister.load("opencode", OC_MAIN).messages) == 5
        assert _snapshot([data]) == before  # no -wal / -shm left behind
        connection = connect_readonly(db)
        try:
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                connection.execute("CREATE TABLE intruder (x)")
        finally:
            connection.close()
    finally:
        data.chmod(0o755)
        db.chmod(0o644)


def test_live_database_wal_is_read(samples: AgentSamples) -> None:
    """While OpenCode runs, new rows sit in the -wal file: they are listed, and the cache sees them."""
    db = samples.homes().opencode_data / "opencode.db"
    lister = SessionLister(samples.homes())
    assert OC_LEGACY_ONLY in _all(lister, "opencode")
    writer = sqlite3.connect(db)
    try:
        writer.execute("PRAGMA wal_autocheckpoint=0")  # keep the new rows in the WAL
        session = simple_opencode_session(
            "ses_live0001", "/live", "Live one", T0 + 5 * 86_400_000, "still going", "yes"
        )
        with writer:
            insert_opencode_session(writer, session)
        assert Path(f"{db}-wal").stat().st_size > 0
        listed = _all(lister, "opencode")
        assert listed["ses_live0001"].title == "Live one"
        assert lister.last_scanned == [db]
        assert _all(SessionLister(samples.homes()), "opencode")["ses_live0001"].message_count == 2
    finally:
        writer.close()


def test_malformed_database_rows_are_skipped(samples: AgentSamples) -> None:
    """One bad row (not JSON, or text that is not a string) must not hide the whole database."""
    db = samples.homes().opencode_data / "opencode.db"
    writer = sqlite3.connect(db)
    try:
        with writer:
            (first,) = writer.execute(
                "SELECT min(id) FROM message WHERE session_id = ?", (OC_MAIN,)
            ).fetchone()
            writer.execute("INSERT INTO message VALUES ('msg_bad', ?, 1, 1, 'not json {')", (OC_MAIN,))
            writer.execute(
                "INSERT INTO part VALUES ('prt_bad', 'msg_bad', ?, 1, 1, '{\"type\": ')", (OC_MAIN,)
            )
            odd = json.dumps({"type": "text", "text": 42})
            writer.execute("INSERT INTO part VALUES ('prt_odd', ?, ?, 1, 1, ?)", (first, OC_MAIN, odd))
    finally:
        writer.close()
    lister = SessionLister(samples.homes())
    assert _all(lister, "opencode")[OC_MAIN].message_count == 5
    assert len(lister.load("opencode", OC_MAIN).messages) == 5


def test_opencode_reader_alone(samples: AgentSamples) -> None:
    reader = OpenCodeReader(samples.homes().opencode_data)
    sources = reader.sources()
    assert sources[0].name == "opencode.db" and all(p.suffix == ".json" for p in sources[1:])
    assert {s.session_id for s in reader.summaries(sources[0])} == {OC_MAIN, OC_DEFAULT_TITLE}


def _homes_with(
    *, claude: Path | None = None, codex: Path | None = None, data: Path | None = None
) -> AgentHomes:
    """Homes with only the given directories set (the others point at /dev/null)."""
    base = Path(os.devnull)
    return AgentHomes(
        claude=claude or base,
        claude_json=base,
        codex=codex or base,
        opencode_config=base,
        opencode_data=data or base,
    )
