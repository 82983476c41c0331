"""The fast paths give the answers the slow ones gave: rendered-frontmatter parsing, the
multi-store keyword search, the git lookup cache, the bulk load, the in-memory vector matrix,
hybrid's background query embedding and the grep backends (issue #15)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import example_embedder

from coffer_memory import MemoryService, Settings
from coffer_memory import _scope as scope_mod
from coffer_memory._fusion import rrf_merge
from coffer_memory._index.fts import search_chunks, search_chunks_many
from coffer_memory._models import MemoryFact
from coffer_memory._store.fastmeta import split_rendered
from coffer_memory._store.files import KNOWN_KEYS, parse_fact, render_fact, split_frontmatter
from coffer_memory.plugins import GrepMatch, get_plugin_manager, hookimpl
from coffer_memory.plugins.builtin import grep as grep_module
from coffer_memory.plugins.builtin.grep import MAX_LINES_PER_FILE, PythonGrepBackend, RipgrepBackend

AWKWARD = [
    "Deploy the api",
    "yes",
    "null",
    "~",
    "true",
    "FALSE",
    "Off",
    "NULL",
    "Nulls",
    "Truest words",
    "123",
    "1_000",
    "1:20",
    "0x1F",
    ".inf",
    "2026-01-01",
    "a: b",
    "ends with:",
    "has #hash",
    "#starts",
    "-dash",
    "- item",
    "'quoted'",
    '"double"',
    "it's",
    "café ünïcode 部署",
    "tab\there",
    "emoji 🚀",
    "[list]",
    "{map}",
    "&anchor",
    "*alias",
    "!tag",
    "%percent",
    "@at",
    "`tick`",
    "  spaced  ",
    "",
    "x" * 300,
    "trailing space ",
    "bell\x07",
    "nbsp\u00a0here",
]


def _fact(r: random.Random, i: int) -> tuple[MemoryFact, bool, dict[str, object] | None]:
    when = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=i, milliseconds=r.randint(0, 999))
    fact = MemoryFact(
        id="",
        title=r.choice(AWKWARD) or "untitled",
        description=r.choice(AWKWARD),
        body=r.choice(["# Heading\n\nbody text", "plain body", "", "  indented\n---\nrule"]),
        actor=r.choice(["agent", "user"]),
        origin_session_id=r.choice([None, "sess-1", "null", "yes", "123", "a: b"]),
        created_at=when,
        updated_at=when + timedelta(hours=1),
    )
    extra = r.choice([None, None, {"tags": ["a", "b"]}, {"note": "yes"}])
    return fact, r.random() < 0.8, extra


def test_rendered_facts_parse_the_same_both_ways() -> None:
    r = random.Random(15)
    fast = 0
    for i in range(600):
        fact, with_created, extra = _fact(r, i)
        text = render_fact(fact, extra, with_created=with_created).decode("utf-8")
        quick = split_rendered(text)
        reference = split_frontmatter(text)
        if quick is not None:
            fast += 1
            assert quick[0] == reference[0], text
            assert quick[1] == reference[1].strip(), text
        data = text.encode("utf-8")
        parsed = parse_fact(data, store="global", relpath="knowledge/inbox/x.md", mtime=0.0)
        meta, body = reference
        assert parsed.fact.body == body.strip("\n")
        assert parsed.extra == {k: v for k, v in meta.items() if k not in KNOWN_KEYS}
    assert fast > 200  # a plain header (most of coffer's own) takes the fast path


@pytest.mark.parametrize(
    "text",
    [
        "---\nkind: knowledge\ntitle: a\ndescription: b\nmetadata:\n  actor: agent\norigin_session_id: null\n"
        "updated_at: 2026-01-01T00:00:00.000+00:00\nextra: 1\n---\n\nbody\n",
        "---\nkind: knowledge\ntitle: a # comment\ndescription: b\nmetadata:\n  actor: agent\n"
        "origin_session_id: null\nupdated_at: 2026-01-01T00:00:00.000+00:00\n---\n\nbody\n",
        "---\nkind: knowledge\ntitle: 'it''s'\ndescription: b\nmetadata:\n  actor: robot\n"
        "origin_session_id: null\nupdated_at: 2026-01-01T00:00:00.000+00:00\n---\n\nbody\n",
        "---\nkind: knowledge\ntitle: a\r\ndescription: b\nmetadata:\n  actor: agent\n"
        "origin_session_id: null\nupdated_at: 2026-01-01T00:00:00.000+00:00\n---\n\nbody\n",
        "---\ntitle: hand written\n---\nbody\n",
    ],
)
def test_headers_off_the_rendered_shape_take_the_yaml_path(text: str) -> None:
    assert split_rendered(text) is None
    parse_fact(text.encode(), store="global", relpath="knowledge/inbox/x.md", mtime=0.0)


WORDS = ["deploy", "port", "postgres", "kafka", "retry", "owner", "config", "secrets", "timeout", "docker"]


@pytest.fixture
def two_stores(tmp_path: Path) -> tuple[MemoryService, list[str]]:
    svc = MemoryService(home=tmp_path / "home")
    r = random.Random(4)
    project = "project-01KB0000000000000000000000"
    # Unbalanced on purpose: the project store outranks global on most words (a shared MATCH,
    # as this search once was, cut global's share short and had to ask it again on its own).
    for i in range(120):
        store = project if i % 4 else "global"
        words = " ".join(r.choice(WORDS) for _ in range(r.randint(2, 9 if store == project else 3)))
        svc.remember(f"note {i}: {words}", title=f"note {i}", store=store)
    return svc, [project, "global"]


@pytest.mark.parametrize("limit", [1, 3, 10, 40])
def test_a_search_over_stores_ranks_each_store_as_separate_queries(
    two_stores: tuple[MemoryService, list[str]], limit: int
) -> None:
    svc, stores = two_stores
    db = svc.index.db
    for query in [*WORDS, "deploy postgres", "retry timeout kafka", "nothing here", "dep"]:
        many = search_chunks_many(db, stores, query, limit * 4, docs=limit)
        for store in stores:
            alone = search_chunks(db, store, query, limit * 4)
            assert many[store] == alone[: len(many[store])], (query, store)
            ids = {c.chunk_id.split(":")[-2] for c in many[store]}
            assert many[store] == alone or len(ids) >= limit
        retrieval = svc.index.retrieval
        paths = [svc.targets.paths(s) for s in stores]
        separate = rrf_merge([retrieval.keyword(sp, query, limit) for sp in paths], limit)
        assert retrieval.keyword_fused(paths, query, limit) == separate
    svc.close()


def _git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def test_the_git_cache_sees_a_branch_switch_and_a_new_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scope_mod, "_RACY_NS", 0)  # cache at once (the racy window is for real clocks)
    repo = tmp_path / "repo"
    sub = repo / "sub"
    sub.mkdir(parents=True)
    _git("init", "-q", "-b", "main", str(repo))
    first = scope_mod.find_git(sub)
    assert first is not None and first.branch == "main"
    assert str(sub) in scope_mod._cache
    assert scope_mod.find_git(sub) is first  # served from the cache
    _git("-C", str(repo), "checkout", "-q", "-b", "feature")
    switched = scope_mod.find_git(sub)
    assert switched is not None and switched.branch == "feature"
    _git("init", "-q", "-b", "inner", str(sub))
    nested = scope_mod.find_git(sub)
    assert nested is not None and nested.worktree == sub.resolve() and nested.branch == "inner"


def test_a_bulk_load_skips_broken_files_one_by_one(tmp_path: Path) -> None:
    svc = MemoryService(home=tmp_path / "home")
    inbox = svc.targets.paths("global").inbox
    for i in range(1200):
        svc_text = (
            "---\ntitle: [unclosed\n---\nbad\n" if i % 100 == 7 else f"good fact number {i} about deploys\n"
        )
        inbox.mkdir(parents=True, exist_ok=True)
        (inbox / f"f{i}.md").write_text(svc_text)
    (report,) = svc.reindex("global")
    assert report.added == 1188 and len(report.skipped) == 12
    assert len(svc.recall("deploys", stores=["global"], mode="keyword", limit=5).hits) == 5
    svc.close()


def test_the_lazy_command_table_names_every_command_and_its_module() -> None:
    import argparse
    import importlib

    from coffer_memory._cli import COMMANDS, build_parser, command_in

    def registered(parser: argparse.ArgumentParser) -> list[str]:
        (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return list(sub.choices)

    assert registered(build_parser()) == list(COMMANDS)
    for module in set(COMMANDS.values()):
        parser = argparse.ArgumentParser()
        importlib.import_module(f"coffer_memory._cli.{module}").register(parser.add_subparsers())
        assert registered(parser) == [c for c, m in COMMANDS.items() if m == module]
    assert command_in(["recall", "x"]) == "recall"
    assert command_in(["--home", "/h", "recall", "x"]) == command_in(["--home=/h", "recall"]) == "recall"
    for argv in (
        [],
        ["--help", "recall"],
        ["-h"],
        ["--version"],
        ["no-such-command"],
        ["--ho", "/h", "recall"],
    ):
        assert command_in(argv) is None, argv


def _imported(argv: list[str], cwd: Path, env: dict[str, str], stdin: str = "") -> set[str]:
    """The modules a real process imports (``python -X importtime``)."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        input=stdin,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return {line.split("|")[2].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}


def _any_of(imported: set[str], packages: set[str]) -> list[str]:
    return sorted(n for n in imported if any(n == p or n.startswith(p + ".") for p in packages))


def test_a_session_start_hook_imports_no_service_index_or_value_objects(tmp_home: Path, repo: Path) -> None:
    with MemoryService(tmp_home) as svc:
        svc.append_rule("Run make lint before committing.", cwd=repo)
    env = {**os.environ, "COFFER_HOME": str(tmp_home)}
    env.pop("COFFER_API_URL", None)
    start = json.dumps({"session_id": "s", "cwd": str(repo), "hook_event_name": "SessionStart"})
    imported = _imported(["-m", "coffer_memory._agents.hook", "--agent", "claude-code"], repo, env, start)
    assert "coffer_memory._agents.context" in imported
    heavy = {
        "pydantic",
        "pluggy",
        "yaml",
        "tomlkit",
        "apsw",
        "coffer_memory._models",
        "coffer_memory._config",
    }
    heavy |= {
        "coffer_memory._index",
        "coffer_memory._service",
        "coffer_memory.plugins",
        "coffer_memory._agents.install",
    }
    assert not _any_of(imported, heavy)


def test_settings_load_without_pydantic_unless_a_value_needs_coercing(tmp_home: Path) -> None:
    tmp_home.mkdir()
    (tmp_home / "config.toml").write_text(
        'grep_backend = "python"\n[llm]\ntimeout_seconds = 60\nmodel = "m"\n'
    )
    code = (
        "import sys; from coffer_memory._config import Settings; s = Settings.load(sys.argv[1]); "
        "print(s.llm.timeout_seconds, s.llm.model, s.grep_backend, s.memory.max_fact_chars)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("COFFER_")}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_home)], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["60.0", "m", "python", "8192"], out.stderr
    imported = _imported(["-c", code, str(tmp_home)], tmp_home, env)
    assert "coffer_memory._config" in imported and not _any_of(imported, {"pydantic"})
    # A string from the environment needs coercing: pydantic does it, as before.
    env["COFFER_MEMORY_MAX_FACT_CHARS"] = "100"
    out = subprocess.run([sys.executable, "-c", code, str(tmp_home)], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["60.0", "m", "python", "100"], out.stderr


def test_settings_check_each_value_on_both_paths() -> None:
    from coffer_memory._config import EmbeddingSettings, LLMSettings, MemoryStoreConfig, Settings

    assert LLMSettings(timeout_seconds=5).timeout_seconds == 5.0  # an int for a float, as pydantic did
    assert LLMSettings(max_tokens="7").max_tokens == 7  # type: ignore[arg-type]
    assert EmbeddingSettings(dimensions=None).dimensions is None
    for bad in (
        {"max_tokens": 0},
        {"provider": ""},
        {"json_mode": "yaml"},
        {"timeout_seconds": 0},
        {"model": 3},
        {"nope": 1},
    ):
        with pytest.raises(ValueError):
            LLMSettings.model_validate(bad)
    with pytest.raises(ValueError, match="default_mode"):
        MemoryStoreConfig(retrieval_modes=["grep"], default_mode="keyword")
    settings = Settings.model_validate(
        {"home": "rel", "memory": {"max_fact_chars": 100}, "llm": LLMSettings()}
    )
    assert settings.home.is_absolute() and settings.memory.max_fact_chars == 100
    assert settings == Settings.model_validate({"home": "rel", "memory": {"max_fact_chars": "100"}})


def test_components_are_built_once_on_first_use(tmp_path: Path) -> None:
    import threading

    svc = MemoryService(home=tmp_path / "home")
    svc.remember("deploys go through make release", store="global")
    assert svc.recall("deploys", stores=["global"]).hits
    lazy = ("lanes", "store_admin", "organizer", "transcripts", "integrations")
    assert [getattr(MemoryService, name).built(svc) for name in lazy] == [None] * len(lazy)
    seen: list[object] = []
    barrier = threading.Barrier(8)

    def first_use() -> None:
        barrier.wait()
        seen.append(svc.organizer)

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(o) for o in seen}) == 1 and MemoryService.organizer.built(svc) is seen[0]
    assert MemoryService.lanes.built(svc) is svc.lanes  # the organizer was built with the lanes
    assert MemoryService.transcripts.built(svc) is None
    lanes = svc.lanes
    svc.close()  # a closed service hands out no component (ServiceClosed)
    other = MemoryService(home=tmp_path / "home")
    assert other.lanes is not lanes  # built per service, never shared
    other.close()


def test_coffer_mcp_starts_without_the_components_its_tools_have_not_used(tmp_home: Path) -> None:
    code = (
        "import sys; from coffer_memory import MemoryService; from coffer_memory_mcp.server import build_server; "
        "build_server(MemoryService(sys.argv[1]))"
    )
    imported = _imported(["-c", code, str(tmp_home)], tmp_home.parent, dict(os.environ))
    assert "coffer_memory_mcp.server" in imported and "mcp" in imported
    unused = {
        "coffer_memory._organize",
        "coffer_memory._transcripts",
        "coffer_memory._agents",
        "coffer_memory._lanes",
    }
    unused |= {
        "coffer_memory._stores",
        "coffer_memory._doctor",
        "coffer_memory.plugins.builtin",
        "pluggy",
        "yaml",
    }
    assert not _any_of(imported, unused)


class _SkewedHash(example_embedder()):  # type: ignore[misc]
    """The example's hashed words, deliberately not unit length (scaled by the text's length)."""

    def __init__(self) -> None:
        super().__init__(48)

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        rows = super().embed_batch(texts)
        return [[x * (1 + len(t) % 7) for x in row] for t, row in zip(texts, rows, strict=True)]


class _SkewedPlugin:
    @hookimpl
    def register_embedders(self, register: Callable[[str, object], None]) -> None:
        register("skewed-hash", lambda _settings: _SkewedHash())


@pytest.fixture
def skewed(tmp_path: Path) -> Iterator[Settings]:
    """Settings of a home whose vector modes use ``_SkewedHash`` (a plugin registered for real)."""
    plugin = _SkewedPlugin()
    get_plugin_manager().register(plugin, name="skewed-hash-test")
    try:
        yield Settings.load(
            tmp_path / "home",
            embedding={"provider": "skewed-hash"},
            memory={"retrieval_modes": ["grep", "keyword", "vector", "hybrid"]},
        )
    finally:
        get_plugin_manager().unregister(name="skewed-hash-test")


def test_the_in_memory_matrix_ranks_as_the_vec0_scan_does(skewed: Settings) -> None:
    r = random.Random(7)
    words = [
        "deploy",
        "rollback",
        "cache",
        "queue",
        "billing",
        "auth",
        "token",
        "retry",
        "backup",
        "index",
        "shard",
        "replica",
    ]
    with MemoryService(settings=skewed) as svc:
        for i in range(120):
            svc.remember(" ".join(r.choices(words, k=r.randint(2, 9))) + f" note {i}", scope="global")
        vectors = svc.retrieval.vectors
        assert vectors is not None
        for query in ("deploy cache", "billing retry token", "shard", "nothing shared here"):
            qvec = vectors.embedder.embed_batch([query])[0]
            fast, scan = vectors.knn("global", qvec, 25), vectors.knn_scan("global", qvec, 25)
            assert [d for _, d in fast] == pytest.approx([d for _, d in scan], abs=1e-5)
            # Equal distances may come in either order; everything else in the same one.
            assert {c for c, _ in fast} == {c for c, _ in scan} or len({round(d, 5) for _, d in scan}) < 25


def test_vector_changes_by_another_service_reach_the_next_search(skewed: Settings) -> None:
    with MemoryService(settings=skewed) as reader, MemoryService(settings=skewed) as writer:
        writer.remember("rotate the signing keys quarterly", scope="global")
        assert len(reader.recall("signing keys", stores=["global"], mode="vector").hits) == 1  # matrix read
        added = writer.remember("the billing worker retries thrice", scope="global")
        hits = reader.recall("billing worker retries", stores=["global"], mode="vector").hits
        assert [h.id for h in hits][:1] == [added.fact.id] and len(hits) == 2
        writer.delete_fact(added.fact.id, store="global")
        hits = reader.recall("billing worker retries", stores=["global"], mode="vector").hits
        assert added.fact.id not in [h.id for h in hits] and len(hits) == 1


def test_hybrid_embeds_beside_the_keyword_search_and_falls_back_when_the_embedder_fails(
    skewed: Settings,
) -> None:
    with MemoryService(settings=skewed) as svc:
        fact = svc.remember("the cache is warmed before each deploy", scope="global")
        res = svc.recall("cache deploy", stores=["global"], mode="hybrid")
        assert [h.id for h in res.hits] == [fact.fact.id] and not res.fallback
        vectors = svc.retrieval.vectors
        assert vectors is not None
        broken = _SkewedHash()
        broken.embed_batch = lambda texts: (_ for _ in ()).throw(RuntimeError("engine gone"))  # type: ignore[method-assign]
        vectors.embedder = broken
        svc.retrieval.clear_query_cache()
        res = svc.recall("warmed cache", stores=["global"], mode="hybrid")
        assert [h.id for h in res.hits] == [fact.fact.id] and res.fallback
        assert vectors.paused()


def test_a_back_off_dated_ahead_by_a_clock_set_back_does_not_keep_vectors_off(skewed: Settings) -> None:
    """The embedding back-off is a wall-clock time shared by every process through the index. A
    clock set back after a pause (NTP correcting a clock that ran ahead) left it an hour ahead,
    and vector and hybrid recall answered from keyword (``fallback=True``) until the clock caught
    up. A back-off never lasts longer than ``PAUSE_SECONDS``: one further ahead is over."""
    import time

    from coffer_memory._index.vec import PAUSE_KEY, PAUSE_SECONDS

    with MemoryService(settings=skewed) as svc:
        fact = svc.remember("the cache is warmed before each deploy", scope="global")
        vectors = svc.retrieval.vectors
        assert vectors is not None
        vectors.pause()
        assert vectors.paused()  # a back-off as it is written: still on
        svc.db.set_kv(PAUSE_KEY, repr(time.time() + PAUSE_SECONDS + 3600))  # written an hour ahead
        assert not vectors.paused()
        res = svc.recall("cache deploy", stores=["global"], mode="hybrid")
        assert [h.id for h in res.hits] == [fact.fact.id] and not res.fallback


def _grep_corpus(root: Path) -> list[str]:
    """Files that exercise the line parsing: CRLF, colons, bytes that are not UTF-8, a name
    with spaces and a colon, many matching lines, a hidden file and a non-Markdown file."""
    (root / "sub dir").mkdir(parents=True)
    (root / "a.md").write_bytes(b"Deploy: the API\r\nnothing\r\nredeploy at 10:30 DEPLOY\r\n")
    (root / "sub dir" / "b: c.md").write_bytes(b"caf\xc3\xa9 deploy \xff\xfe\nno\n\ndeploy again")
    (root / "many.md").write_text("".join(f"deploy line {i}: cache\n" for i in range(80)))
    (root / "cache.md").write_text("CACHE warm\ncold cache then deploy\n")
    (root / ".hidden.md").write_text("deploy hidden\n")
    (root / "notes.txt").write_text("deploy text\n")
    return ["deploy", "cache", "10:30", "café"]


def test_both_grep_backends_find_the_same_lines(tmp_path: Path) -> None:
    patterns = _grep_corpus(tmp_path / "store")
    found = {}
    for backend in (RipgrepBackend(), PythonGrepBackend()):
        matches = backend.search([tmp_path / "store", tmp_path / "absent"], patterns, max_lines=10_000)
        found[backend.name] = sorted((str(m.path), m.line_number, m.line, m.patterns) for m in matches)
    assert found["ripgrep"] == found["python"]
    lines = found["ripgrep"]
    assert (str(tmp_path / "store" / "a.md"), 3, "redeploy at 10:30 DEPLOY", frozenset({0, 2})) in lines
    assert (
        str(tmp_path / "store" / "sub dir" / "b: c.md"),
        1,
        "café deploy \ufffd\ufffd",
        frozenset({0, 3}),
    ) in lines
    assert sum(1 for line in lines if line[0].endswith("many.md")) == MAX_LINES_PER_FILE
    assert not any(line[0].endswith((".hidden.md", ".txt")) for line in lines)
    for backend in (RipgrepBackend(), PythonGrepBackend()):
        assert len(backend.search([tmp_path / "store"], patterns, max_lines=7)) == 7


class _CountingGrep:
    """The ripgrep backend, counting its searches."""

    name = "counting"
    priority = 0

    def __init__(self) -> None:
        self.calls: list[int] = []

    def available(self) -> bool:
        return True

    def search(self, folders: Sequence[Path], patterns: Sequence[str], *, max_lines: int) -> list[GrepMatch]:
        self.calls.append(len(folders))
        return RipgrepBackend().search(folders, patterns, max_lines=max_lines)


class _CountingPlugin:
    def __init__(self) -> None:
        self.backend = _CountingGrep()

    @hookimpl
    def register_grep_backends(self, register: Callable[[object], None]) -> None:
        register(self.backend)


def test_a_grep_recall_searches_every_store_in_one_search(
    two_stores: tuple[MemoryService, list[str]], tmp_path: Path
) -> None:
    svc, stores = two_stores
    paths = [svc.targets.paths(s) for s in stores]
    retrieval = svc.index.retrieval
    for query in [*WORDS, "deploy postgres", "retry timeout kafka", "nothing here"]:
        together = retrieval._grep_stores(paths, query, 10)
        assert together == [retrieval._grep(sp, query, 10) for sp in paths], query
    plugin = _CountingPlugin()
    get_plugin_manager().register(plugin, name="counting-grep-test")
    try:
        with MemoryService(settings=Settings.load(svc.settings.home, grep_backend="counting")) as counted:
            hits = counted.recall("deploy postgres", stores=stores, mode="grep").hits
            assert {h.store for h in hits} == set(stores)
            assert plugin.backend.calls == [sum(len(sp.recall_dirs()) for sp in paths)]
    finally:
        get_plugin_manager().unregister(name="counting-grep-test")
    svc.close()


def test_the_python_grep_backend_sees_an_edit_that_keeps_size_and_mtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grep_module, "RACY_NS", 0)  # keep even a file written just now
    backend = PythonGrepBackend()
    note = tmp_path / "note.md"
    note.write_text("the deploy runs at noon\n")
    before = note.stat()
    assert [m.line for m in backend.search([tmp_path], ["deploy"], max_lines=10)] == [
        "the deploy runs at noon"
    ]
    assert str(note) in backend._texts  # kept for the next search
    note.write_text("the rollback at noon!!!\n")  # same size
    os.utime(note, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert note.stat().st_size == before.st_size and note.stat().st_mtime_ns == before.st_mtime_ns
    assert backend.search([tmp_path], ["deploy"], max_lines=10) == []
    assert [m.line for m in backend.search([tmp_path], ["rollback"], max_lines=10)] == [
        "the rollback at noon!!!"
    ]


def test_no_statement_a_rebuild_runs_per_file_scans_a_store(skewed: Settings) -> None:
    """Each per-file statement of a rebuild with vectors finds its documents row by a key,
    not by scanning the store (an UPDATE without ``kind`` did: quadratic, 90 s at 10k)."""
    with MemoryService(settings=skewed) as svc:
        svc.remember("the first note", scope="global")  # opens the index and the vector table
        inbox = svc.targets.paths("global").inbox
        for i in range(30):
            (inbox / f"n{i}.md").write_text(f"note {i} about deploys and caches\n")
        conn = svc.index.db.conn
        seen: dict[str, tuple[int, tuple[object, ...]]] = {}

        def trace(_cursor: object, sql: str, bindings: object) -> bool:
            count, _ = seen.get(sql, (0, ()))
            seen[sql] = (count + 1, tuple(bindings) if isinstance(bindings, (list, tuple)) else ())
            return True

        conn.exec_trace = trace
        svc.reindex("global")
        conn.exec_trace = None
        per_file = {sql: args for sql, (count, args) in seen.items() if count >= 30 and "documents " in sql}
        assert any(sql.startswith("UPDATE documents SET content_sha256") for sql in per_file)
        for sql, args in per_file.items():
            plan = [str(row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", args)]
            on_documents = [p for p in plan if " documents " in f"{p} "]
            assert all(p.startswith("SEARCH") and " AND " in p for p in on_documents), (sql, plan)
