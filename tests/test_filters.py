"""Tags and time filters: frontmatter, validation, and filters inside the index query on every face."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest
from conftest import CliRunner
from test_vector import hash_plugin, vector_service  # noqa: F401  (a fixture, used by name)

from coffer_memory import InvalidInput, MemoryService
from coffer_memory.vocabulary import MAX_TAG_CHARS, MAX_TAGS

# The same tests on the machine-local SQLite index and on the shared PostgreSQL one.
pytestmark = pytest.mark.usefixtures("index_backend")


def inbox(svc: MemoryService) -> Path:
    return svc.settings.home / "memory" / "global" / "knowledge" / "inbox"


def hand_written(svc: MemoryService, name: str, body: str, updated: str, tags: str | None = None) -> Path:
    """A fact file written by hand (as a user's editor would), with a chosen updated_at."""
    folder = inbox(svc)
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["---", f"title: {name}", f"created_at: {updated}", f"updated_at: {updated}"]
    if tags is not None:
        lines.append(f"tags: {tags}")
    path = folder / f"{name}.md"
    path.write_text("\n".join([*lines, "---", "", body, ""]), encoding="utf-8")
    return path


def fill(svc: MemoryService, tagged: int, newer_untagged: int) -> list[str]:
    """``tagged`` long facts tagged ``ops``, then more newer untagged facts that rank higher for
    "deploy" (short, the word repeated): a filter applied after the limit would find none."""
    ids = [
        svc.remember(
            f"Deploy note {i}: the release train leaves on Tuesday, check the changelog, "
            "tell the on-call person, watch the dashboards for an hour afterwards.",
            title=f"release {i}",
            scope="global",
            tags=["ops"],
        ).fact.id
        for i in range(tagged)
    ]
    for i in range(newer_untagged):
        svc.remember(f"deploy deploy {i}", title=f"deploy {i}", scope="global")
    return ids


# -- frontmatter and validation ------------------------------------------------------------------
def test_tags_are_written_after_the_seed_keys_and_read_back(svc: MemoryService) -> None:
    def keys(path: Path) -> list[str]:
        return [line.split(":")[0] for line in path.read_text().split("---")[1].strip().splitlines()]

    plain = svc.remember("Plain fact.", scope="global")
    assert "tags" not in plain.path.read_text() and plain.fact.tags == ()
    r = svc.remember("Use uv for envs.", scope="global", tags=["Python", " tooling ", "python"])
    assert keys(r.path) == [*keys(plain.path), "tags"]  # the seed's keys in order, tags after them
    assert "tags: [python, tooling]" in r.path.read_text()
    assert r.fact.tags == ("python", "tooling")
    assert svc.get_fact(r.fact.id, store="global").fact.tags == ("python", "tooling")


@pytest.mark.parametrize(
    "tags",
    [
        ["a,b"],
        ["two\nlines"],
        [""],
        ["x" * (MAX_TAG_CHARS + 1)],
        [f"t{i}" for i in range(MAX_TAGS + 1)],
        "not-a-list",
        [3],
        ["lone \ud800 surrogate"],
    ],
)
def test_bad_tags_are_invalid_input_and_write_nothing(svc: MemoryService, tags: Any) -> None:
    with pytest.raises(InvalidInput) as err:
        svc.remember("Some fact.", scope="global", tags=tags)
    assert err.value.field == "tags"
    assert not inbox(svc).exists() or not list(inbox(svc).iterdir())


def test_hand_written_tags_are_read_leniently(svc: MemoryService) -> None:
    hand_written(svc, "a", "alpha", "2026-01-01T00:00:00Z", tags="[Ops, 'bad,one', 7]")
    hand_written(svc, "b", "beta", "2026-01-02T00:00:00Z", tags="ops, db")
    page = svc.list_facts(store="global")
    assert {r.fact.title: r.fact.tags for r in page.items} == {"a": ("ops", "7"), "b": ("ops", "db")}
    assert [r.fact.title for r in svc.list_facts(store="global", tags=["db"]).items] == ["b"]


def test_edit_replaces_keeps_or_clears_tags_and_keeps_extra_keys(svc: MemoryService) -> None:
    path = hand_written(svc, "a", "alpha", "2026-01-01T00:00:00Z", tags="[one]")
    path.write_text(path.read_text().replace("tags: [one]", "tags: [one]\nowner: me"))
    fact_id = svc.list_facts(store="global").items[0].fact.id
    r = svc.edit_fact(fact_id, store="global", tags=["Two", "three"])
    assert r.fact.tags == ("two", "three") and "owner: me" in path.read_text()
    text = path.read_text()
    assert text.index("tags: [two, three]") < text.index("owner: me")
    assert svc.edit_fact(fact_id, store="global", body="alpha 2").fact.tags == ("two", "three")
    assert svc.list_facts(store="global", tags=["three"]).items[0].fact.body == "alpha 2"
    assert svc.edit_fact(fact_id, store="global", tags=[]).fact.tags == ()
    assert "tags:" not in path.read_text()
    assert svc.list_facts(store="global", tags=["three"]).items == ()


def test_a_retry_with_other_tags_is_a_new_fact(svc: MemoryService) -> None:
    first = svc.remember("Same words.", scope="global", tags=["a"])
    assert not svc.remember("Same words.", scope="global", tags=["A"]).created  # a retry
    other = svc.remember("Same words.", scope="global", tags=["b"])
    assert other.created and other.path != first.path and other.fact.tags == ("b",)


# -- filters inside the index query --------------------------------------------------------------
def test_list_filter_by_tag_pages_through_matching_facts_only(svc: MemoryService) -> None:
    ids = fill(svc, tagged=7, newer_untagged=40)
    first = svc.list_facts(store="global", tags=["ops"], limit=5)
    assert len(first.items) == 5 and first.next_cursor is not None
    second = svc.list_facts(store="global", tags=["OPS"], limit=5, cursor=first.next_cursor)
    assert len(second.items) == 2 and second.next_cursor is None
    assert {r.fact.id for r in (*first.items, *second.items)} == set(ids)
    with pytest.raises(InvalidInput) as err:  # a cursor is bound to its filter
        svc.list_facts(store="global", limit=5, cursor=first.next_cursor)
    assert err.value.field == "cursor"


@pytest.mark.parametrize("mode", ["keyword", "grep"])
def test_recall_filter_still_returns_limit_matching_hits(svc: MemoryService, mode: str) -> None:
    ids = fill(svc, tagged=12, newer_untagged=60)
    unfiltered = svc.recall("deploy", stores=["global"], mode=mode, limit=5)
    assert not {h.id for h in unfiltered.hits} & set(ids)  # the untagged facts outrank them
    res = svc.recall("deploy", stores=["global"], mode=mode, limit=5, tags=["ops"])
    assert len(res.hits) == 5 and {h.id for h in res.hits} <= set(ids)


def test_every_tag_must_match(svc: MemoryService) -> None:
    both = svc.remember("cache warmup runs nightly", scope="global", tags=["ops", "cache"]).fact.id
    svc.remember("cache keys expire hourly", scope="global", tags=["cache"])
    svc.remember("cache dashboards", scope="global", tags=["ops"])
    res = svc.recall("cache", stores=["global"], tags=["ops", "cache"])
    assert [h.id for h in res.hits] == [both]
    assert [r.fact.id for r in svc.list_facts(store="global", tags=["cache", "ops"]).items] == [both]


def test_since_and_until_filter_on_updated_at(svc: MemoryService) -> None:
    for day in (1, 2, 3, 4):
        hand_written(svc, f"day{day}", f"backup report {day}", f"2026-03-0{day}T12:00:00+00:00")
    titles = lambda page: sorted(r.fact.title for r in page.items)  # noqa: E731
    assert titles(svc.list_facts(store="global", since="2026-03-02", until="2026-03-04")) == ["day2", "day3"]
    # since is inclusive, until exclusive; naive datetimes are UTC; other zones are converted
    at = datetime(2026, 3, 3, 12, 0)
    assert titles(svc.list_facts(store="global", since=at)) == ["day3", "day4"]
    assert titles(svc.list_facts(store="global", until=at)) == ["day1", "day2"]
    assert titles(svc.list_facts(store="global", since="2026-03-03T13:00:00+02:00")) == ["day3", "day4"]
    res = svc.recall("backup report", stores=["global"], since=datetime(2026, 3, 3, tzinfo=UTC), limit=10)
    assert sorted(h.title for h in res.hits) == ["day3", "day4"]
    res = svc.recall("backup", stores=["global"], mode="grep", until="2026-03-02")
    assert [h.title for h in res.hits] == ["day1"]


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        (
            {"since": "yesterday"},
            "since",
            "since must be an ISO 8601 date or time (UTC if no zone) in the years 1 to 9999, or a duration",
        ),
        # real times outside what a fact can carry: said so, not "not an ISO 8601 date"
        ({"since": "9999-12-31T23:00:00-14:00"}, "since", "within the years 1970 to 9999"),
        ({"until": "0001-01-01"}, "until", "within the years 1970 to 9999"),
        ({"until": 12}, "until", "must be a datetime"),
        ({"since": "2026-03-02", "until": "2026-03-01"}, "until", "later than since"),
        ({"tags": ["a,b"]}, "tags", "not a tag"),
    ],
)
def test_bad_filters_are_invalid_input(
    svc: MemoryService, kwargs: dict[str, Any], field: str, words: str
) -> None:
    svc.remember("something", scope="global")
    with pytest.raises(InvalidInput) as err:
        svc.recall("something", stores=["global"], **kwargs)
    assert err.value.field == field and words in err.value.message
    with pytest.raises(InvalidInput):
        svc.list_facts(store="global", **kwargs)


def test_vector_and_hybrid_filters_inside_the_query(
    hash_plugin: None,  # noqa: F811
    vector_index_backend: str,
    tmp_home: Path,
) -> None:
    with vector_service(tmp_home, provider="hash", dimensions=32) as svc:
        ids = fill(svc, tagged=8, newer_untagged=50)
        for mode in ("vector", "hybrid"):
            res = svc.recall("deploy", stores=["global"], mode=mode, limit=5, tags=["ops"])
            assert not res.fallback and len(res.hits) == 5 and {h.id for h in res.hits} <= set(ids)


def test_an_index_from_before_tags_learns_hand_written_tags(tmp_home: Path) -> None:
    with MemoryService(tmp_home) as svc:
        hand_written(svc, "old", "written before tags were indexed", "2026-01-01T00:00:00Z", tags="[legacy]")
        assert svc.list_facts(store="global", tags=["legacy"]).items  # indexed with schema 7
        index = svc.settings.index_path
    conn = apsw.Connection(str(index))  # back to schema 6, as an older coffer-memory left it
    conn.execute("DROP TRIGGER documents_drop_tags; DROP TABLE document_tags; PRAGMA user_version=6")
    conn.close()
    with MemoryService(tmp_home) as svc:
        assert [r.fact.title for r in svc.list_facts(store="global", tags=["legacy"]).items] == ["old"]


def test_deleting_a_fact_drops_its_tag_rows(svc: MemoryService) -> None:
    r = svc.remember("temporary", scope="global", tags=["tmp"])
    svc.delete_fact(r.fact.id, store="global")
    conn = apsw.Connection(str(svc.settings.index_path))
    assert next(conn.execute("SELECT count(*) FROM document_tags"))[0] == 0


# -- faces ---------------------------------------------------------------------------------------
def test_cli_tags_and_filters(cli: CliRunner, tmp_home: Path) -> None:
    out = cli("remember", "Rotate keys quarterly.", "--global", "--tag", "security", "--tag", "Ops", "--json")
    assert out.returncode == 0, out.stderr
    cli("remember", "Rotate logs daily.", "--global", "--json")
    res = cli("recall", "rotate", "--store", "global", "--tag", "ops", "--tag", "security", "--json")
    assert res.returncode == 0, res.stderr
    assert '"Rotate keys quarterly."' in res.stdout and "logs" not in res.stdout
    listing = cli("facts", "list", "--global", "--tag", "security", "--since", "2000-01-01")
    assert "Rotate keys" in listing.stdout and "logs" not in listing.stdout
    assert "(no facts)" in cli("facts", "list", "--global", "--until", "2000-01-01").stdout
    bad = cli("recall", "rotate", "--store", "global", "--since", "soon")
    assert bad.returncode != 0 and "since" in bad.stderr
    fact_id = next(line for line in listing.stdout.splitlines() if "Rotate keys" in line).split()[0]
    cli("facts", "edit", fact_id, "--global", "--tag", "archive")
    assert "tags archive" in cli("facts", "show", fact_id, "--global").stdout
    cli("facts", "edit", fact_id, "--global", "--clear-tags")
    assert "   tags " not in cli("facts", "show", fact_id, "--global").stdout


def test_rest_tags_and_filters(client: Any) -> None:
    base = "/api/v1/memory_stores/global"
    made = client.post(f"{base}/facts", json={"text": "Backups run at 2am.", "tags": ["Ops"]})
    assert made.status_code == 201 and made.json()["fact"]["tags"] == ["ops"]
    client.post(f"{base}/facts", json={"text": "Backups are kept 30 days."})
    listed = client.get(f"{base}/facts", params={"tag": "ops", "since": "2000-01-01T00:00:00Z"}).json()
    assert [f["text"] for f in listed["items"]] == ["Backups run at 2am."]
    hits = client.get(f"{base}/recall", params={"query": "backups", "tag": ["ops"]}).json()["hits"]
    assert [h["text"] for h in hits] == ["Backups run at 2am."]
    hits = client.get(
        "/api/v1/memory_stores/recall", params={"query": "backups", "store": "global", "until": "2000-01-01"}
    ).json()["hits"]
    assert hits == []
    fact_id = made.json()["fact"]["id"]
    patched = client.patch(f"{base}/facts/{fact_id}", json={"tags": []})
    assert patched.status_code == 200 and patched.json()["fact"]["tags"] == []
    bad = client.post(f"{base}/facts", json={"text": "x", "tags": ["a,b"]})
    assert bad.status_code in (400, 422) and bad.json()["error"]["code"] == "INVALID_INPUT"
    too_many = client.post(
        f"{base}/facts", json={"text": "x", "tags": [f"t{i}" for i in range(MAX_TAGS + 1)]}
    )
    assert too_many.status_code == 422


@pytest.mark.parametrize(
    "when",
    ["2026-01-01T10", " 2026-01-01 ", "2026-W01-1", "1767225600", "2026-01-01t10:00:00z", "2026-02-30"],
)
def test_rest_reads_a_time_bound_as_the_other_faces_do(
    client: Any, service: MemoryService, when: str
) -> None:
    """The REST routes hand since/until to the core's reader: a value the Python, CLI and MCP faces
    accept is accepted, one they refuse is INVALID_INPUT (pydantic took Unix timestamps and refused
    an hour without minutes)."""
    try:
        service.list_facts(store="global", since=when)
        expected = 200
    except InvalidInput:
        expected = 422
    for url, params in [
        ("/api/v1/memory_stores/global/facts", {"since": when}),
        ("/api/v1/memory_stores/global/recall", {"query": "backups", "until": when}),
        ("/api/v1/memory_stores/recall", {"query": "backups", "store": "global", "since": when}),
    ]:
        answer = client.get(url, params=params)
        assert answer.status_code == expected, (url, answer.text)
        if expected == 422:
            assert answer.json()["error"]["code"] == "INVALID_INPUT"


def test_mcp_remember_and_recall_with_tags(svc: MemoryService, repo: Path) -> None:
    from mcp import Client

    from coffer_memory_mcp import build_server

    async def run() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with Client(build_server(svc)) as client:
            made = await client.call_tool(
                "coffer__remember", {"text": "Staging needs the VPN.", "tags": ["Infra"], "cwd": str(repo)}
            )
            await client.call_tool(
                "coffer__remember", {"text": "Staging is slow on Mondays.", "cwd": str(repo)}
            )
            found = await client.call_tool(
                "coffer__recall",
                {"query": "staging", "tags": ["infra"], "since": "2000-01-01", "cwd": str(repo)},
            )
            bad = await client.call_tool(
                "coffer__recall", {"query": "staging", "since": "later", "cwd": str(repo)}
            )
            assert made.structured_content and found.structured_content and bad.is_error
            return made.structured_content, found.structured_content, {"bad": bad.content}

    made, found, _ = asyncio.run(run())
    assert made["tags"] == ["infra"]
    assert [h["id"] for h in found["hits"]] == [made["id"]]


# -- durations ago: the forms `audit --since` takes, on every face (new-user pass, session 11) ---------
def titles(page: Any) -> list[str]:
    return sorted(r.fact.title for r in page.items)


def test_since_and_until_take_durations_ago_as_the_audit_does(svc: MemoryService) -> None:
    now = datetime.now(UTC)
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    for name, ago in (
        ("fresh", timedelta(minutes=5)),
        ("hours", timedelta(hours=5)),
        ("old", timedelta(days=10)),
    ):
        hand_written(svc, name, f"backup report {name}", (now - ago).strftime(stamp))
    svc.reindex()
    for since, expected in (
        ("30m", ["fresh"]),
        ("12h", ["fresh", "hours"]),
        ("7d", ["fresh", "hours"]),
        ("2w", ["fresh", "hours", "old"]),
    ):
        for mode in ("keyword", "grep"):
            res = svc.recall("backup report", stores=["global"], mode=mode, since=since)
            assert sorted(h.title for h in res.hits) == expected, (since, mode)
        assert sorted(titles(svc.list_facts(store="global", since=since))) == expected, since
        svc.audit(since=since)  # the same strings the audit log takes
    # Both bounds count from one instant: "2h" to "1h" is a window, not "until before since".
    assert titles(svc.list_facts(store="global", since="6h", until="1h")) == ["hours"]
    with pytest.raises(InvalidInput) as err:
        svc.list_facts(store="global", since="1h", until="2h")
    assert err.value.field == "until"
    for bad in ("7x", "+7d", "--7d", "7 days", "d7"):  # "-7d" is 7d ago (tests/test_faces27_cli.py)
        messages = []
        for call in (svc.recall, svc.list_facts, svc.audit):
            args = ("backup",) if call == svc.recall else ()
            kwargs = {"store": "global"} if call == svc.list_facts else {}
            with pytest.raises(InvalidInput) as err:
                call(*args, since=bad, **kwargs)  # type: ignore[operator]
            assert err.value.field == "since"
            messages.append(err.value.message)
        assert len(set(messages)) == 1 and "30m, 12h, 7d or 2w" in messages[0], messages


def test_a_duration_ago_pages_through_one_window(svc: MemoryService) -> None:
    """The bounds of "7d" are resolved on the first page and kept in the cursor: the next page is
    of the same window (resolving again each page would move it, and a cursor bound to the
    resolved times would be refused as another query's)."""
    for i in range(5):
        svc.remember(f"note {i}", title=f"n{i}", scope="global")
    first = svc.list_facts(store="global", since="7d", limit=2)
    assert first.next_cursor is not None
    seen = titles(first)
    cursor = first.next_cursor
    while cursor:
        page = svc.list_facts(store="global", since="7d", limit=2, cursor=cursor)
        seen += titles(page)
        cursor = page.next_cursor
    assert sorted(seen) == [f"n{i}" for i in range(5)]
    with pytest.raises(InvalidInput):  # bound to the filter as given
        svc.list_facts(store="global", since="8d", limit=2, cursor=first.next_cursor)


def test_cli_rest_and_mcp_faces_take_durations(cli: CliRunner, client: Any) -> None:
    out = cli("remember", "Rotate keys quarterly.", "--global")
    assert out.returncode == 0, out.stderr
    res = cli("recall", "rotate", "--store", "global", "--since", "7d")
    assert res.returncode == 0 and "Rotate keys" in res.stdout, res.stderr
    assert "Rotate keys" in cli("facts", "list", "--global", "--since", "12h").stdout
    for args in (("recall", "rotate", "--store", "global"), ("facts", "list", "--global"), ("audit",)):
        bad = cli(*args, "--since", "7x")
        assert bad.returncode == 1 and bad.stderr.startswith(
            "error: INVALID_INPUT: since must be an ISO 8601"
        ), args
    base = "/api/v1/memory_stores/global"
    client.post(f"{base}/facts", json={"text": "Backups run at 2am."})
    hits = client.get(f"{base}/recall", params={"query": "backups", "since": "30m"}).json()["hits"]
    assert [h["text"] for h in hits] == ["Backups run at 2am."]
    assert client.get(f"{base}/facts", params={"since": "2w"}).json()["items"]
    bad = client.get(f"{base}/recall", params={"query": "backups", "since": "7x"})
    assert bad.status_code in (400, 422) and bad.json()["error"]["code"] == "INVALID_INPUT"
