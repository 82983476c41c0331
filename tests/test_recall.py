"""Recall: keyword and grep modes, query handling, cross-store fusion, mode validation."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from coffer_memory import InvalidInput, MemoryHit, MemoryService, Settings
from coffer_memory._fusion import rrf_merge
from coffer_memory._index.fts import plan_query
from coffer_memory.plugins.builtin.grep import PythonGrepBackend, RipgrepBackend, find_ripgrep

# The same tests on the machine-local SQLite index and on the shared PostgreSQL one.
pytestmark = pytest.mark.usefixtures("index_backend")

FACTS = {
    "deploy": "This repo deploys via `make release`; never push tags by hand.",
    "tests": "Run the test suite with `make test` before every push.",
    "db": "Database migrations use alembic; run alembic upgrade head first.",
    "cpp": "The native extension is written in C++ and built with CMake.",
    "cache": "缓存使用 Redis，部署后需要清空缓存。",
    "jp": "デプロイの前にテストを実行してください。",
}


@pytest.fixture
def filled(svc: MemoryService, repo: Path) -> dict[str, str]:
    ids = {key: svc.remember(text, title=key, cwd=repo).fact.id for key, text in FACTS.items()}
    ids["global"] = svc.remember(
        "The user prefers uv for Python virtual environments.", scope="global"
    ).fact.id
    return ids


def test_natural_language_question_matches_any_term(
    svc: MemoryService, repo: Path, filled: dict[str, str]
) -> None:
    res = svc.recall("how do we deploy this repo?", cwd=repo, mode="keyword")
    assert res.mode == "keyword" and not res.fallback
    assert res.hits[0].id == filled["deploy"]
    assert res.hits[0].source.startswith("project:") and res.hits[0].source.endswith("deploy.md")
    assert res.hits[0].score > 0


@pytest.mark.parametrize(
    "query",
    [
        "C++",
        "make-release",
        "AND",
        "OR NOT",
        '"unbalanced',
        "it's",
        "NEAR(a b)",
        "*",
        "col:value",
        "^start",
        "(((",
        'a"b"c',
        "-",
        "\\",
        "%_%",
    ],
)
def test_fts_syntax_in_user_text_never_raises(
    svc: MemoryService, repo: Path, filled: dict[str, str], query: str
) -> None:
    for mode in ("keyword", "grep"):
        svc.recall(query, cwd=repo, mode=mode)


def test_cpp_and_hyphenated_terms_match(svc: MemoryService, repo: Path, filled: dict[str, str]) -> None:
    assert svc.recall("C++", cwd=repo).hits[0].id == filled["cpp"]
    # The word index splits "make-release" into the phrase "make release", which the text has.
    assert svc.recall("make-release", cwd=repo).hits[0].id == filled["deploy"]
    assert svc.recall("deploying", cwd=repo).hits[0].id == filled["deploy"]  # porter: deploys ~ deploying
    assert svc.recall("alembic", cwd=repo).hits[0].id == filled["db"]


@pytest.mark.parametrize("mode", ["keyword", "grep"])
def test_short_and_cjk_queries_are_answered(
    svc: MemoryService, repo: Path, filled: dict[str, str], mode: str
) -> None:
    assert svc.recall("部署", cwd=repo, mode=mode).hits[0].id == filled["cache"]
    assert svc.recall("uv", cwd=repo, mode=mode).hits[0].id == filled["global"]
    assert svc.recall("清空缓存", cwd=repo, mode=mode).hits[0].id == filled["cache"]
    assert svc.recall("テスト", cwd=repo, mode=mode).hits[0].id == filled["jp"]


def test_query_plan_quotes_and_drops_stopwords() -> None:
    plan = plan_query('How do we "deploy" this C++ repo?')
    assert plan.fts_terms == ("deploy", "c++", "repo")
    assert plan.match == '"deploy" OR "c++" OR "repo"'
    assert plan_query("the of and").fts_terms == ("the", "and")  # only stopwords: keep them
    assert plan_query("部署流程").fts_terms == ("部署流", "署流程")
    assert plan_query("go db").short_terms == ("go", "db")


@pytest.mark.parametrize("backend", [RipgrepBackend(), PythonGrepBackend()], ids=["ripgrep", "python"])
def test_grep_backends_agree(tmp_home: Path, repo: Path, backend: RipgrepBackend | PythonGrepBackend) -> None:
    if not backend.available():
        pytest.fail(f"{backend.name} is not available; the dev install provides ripgrep")
    with MemoryService(settings=Settings.load(tmp_home, grep_backend=backend.name)) as svc:
        for key, text in FACTS.items():
            svc.remember(text, title=key, cwd=repo)
        svc.paths(svc.resolve_store(cwd=repo)).index_md.write_text("make release is indexed here\n")
        res = svc.recall("make release", cwd=repo, mode="grep")
        assert svc.retrieval.grep.name == backend.name
        # The whole phrase scores 1 and each of its terms adds its (rarity-weighted) share:
        # "make" alone is weaker.
        assert res.hits[0].title == "deploy" and {h.title for h in res.hits} == {
            "deploy",
            "cpp",
            "tests",
        }
        assert res.hits[0].score == 2.0 and len({h.score for h in res.hits[1:]}) == 1
        assert 0.0 < res.hits[1].score < 1.0
        assert "make release" in res.hits[0].text
        res = svc.recall("push before", cwd=repo, mode="grep")
        assert {h.title for h in res.hits} == {"deploy", "tests"}
        assert res.hits[0].title == "tests"  # both terms beat one term


def test_ripgrep_is_found_in_the_dev_install() -> None:
    assert find_ripgrep() is not None


def test_cross_store_fusion_keeps_each_score(svc: MemoryService, repo: Path) -> None:
    p = svc.remember("deploy the api with make release", cwd=repo).fact.id
    g = svc.remember("deploy docs are published by the docs job", scope="global").fact.id
    res = svc.recall("deploy", cwd=repo)
    assert [h.id for h in res.hits] == [p, g]
    assert res.stores == (svc.resolve_store(cwd=repo), "global")
    assert all(h.score > 0 for h in res.hits)


def test_rrf_orders_by_rank_not_raw_score() -> None:
    from datetime import UTC, datetime

    now = datetime.now(UTC)

    def hit(i: str, score: float, store: str) -> MemoryHit:
        return MemoryHit(id=i, text=i, score=score, source=f"x:{i}", time=now, store=store)

    a = [hit("a1", 100.0, "a"), hit("a2", 90.0, "a")]
    b = [hit("b1", 0.1, "b"), hit("b2", 0.05, "b")]
    merged = rrf_merge([a, b], limit=4)
    assert [h.id for h in merged] == ["a1", "b1", "a2", "b2"]
    assert merged[1].score == 0.1


def test_named_stores_and_outside_a_repo(svc: MemoryService, repo: Path, tmp_path: Path) -> None:
    svc.remember("project only secret sauce", cwd=repo)
    svc.remember("global sauce recipe", scope="global")
    outside = tmp_path / "outside"
    outside.mkdir()
    assert [h.store for h in svc.recall("sauce", cwd=outside).hits] == ["global"]
    assert len(svc.recall("sauce", stores=[svc.resolve_store(cwd=repo)]).hits) == 1


def test_mode_validation(svc: MemoryService, tmp_home: Path) -> None:
    svc.remember("something", scope="global")
    with pytest.raises(InvalidInput):
        svc.recall("x", mode="semantic", stores=["global"])
    with pytest.raises(InvalidInput) as err:
        svc.recall("something", mode="vector", stores=["global"])
    assert "not enabled" in err.value.message
    for bad in ("", "   "):
        with pytest.raises(InvalidInput):
            svc.recall(bad, stores=["global"])
    with pytest.raises(InvalidInput):
        svc.recall("q" * 5000, stores=["global"])
    with pytest.raises(InvalidInput):
        svc.recall("something", stores=["global"], limit=0)


def test_vector_without_embedder_falls_back_to_keyword(tmp_home: Path) -> None:
    settings = Settings.load(
        tmp_home,
        memory={"retrieval_modes": ["grep", "keyword", "vector", "hybrid"]},
        embedding={"provider": "none"},
    )
    with MemoryService(settings=settings) as svc:
        r = svc.remember("fallback check", scope="global")
        for mode in ("vector", "hybrid"):
            res = svc.recall("fallback", stores=["global"], mode=mode)
            assert res.fallback and res.mode == mode and res.hits[0].id == r.fact.id


def test_long_topic_document_returns_its_best_passage(svc: MemoryService) -> None:
    svc.remember("seed", scope="global")
    sections = [f"## Section {i}\n\n" + (f"filler words about topic {i}. " * 40) for i in range(5)]
    sections[3] += "\nThe rollback procedure uses the blue-green switch."
    (svc.paths("global").knowledge / "ops.md").write_text("# Ops\n\n" + "\n\n".join(sections))
    hit = svc.recall("rollback procedure", stores=["global"]).hits[0]
    assert hit.title == "Ops" and "blue-green" in hit.text and len(hit.text) <= 1200


def test_nul_characters_are_invalid_input(svc: MemoryService, repo: Path) -> None:
    from coffer_memory import ScopeUnresolved

    svc.remember("something", scope="global")
    with pytest.raises(InvalidInput):
        svc.recall("a\x00b", stores=["global"])
    with pytest.raises(InvalidInput):
        svc.remember("ok", title="t\x00", scope="global")
    with pytest.raises(ScopeUnresolved):
        svc.remember("ok", cwd=f"{repo}\x00")
    with pytest.raises(InvalidInput):
        svc.recall_stores(f"{repo}\x00")


@pytest.mark.parametrize("backend", ["ripgrep", "python"])
def test_grep_ignores_the_frontmatter_every_fact_has(tmp_home: Path, backend: str) -> None:
    with MemoryService(settings=Settings.load(tmp_home, grep_backend=backend)) as svc:
        svc.remember("Be kind to reviewers.", title="reviews", scope="global")
        svc.remember("The build agent is called falcon.", title="ci", scope="global")
        svc.remember("Lunch is at noon.", title="lunch", scope="global")
        assert [h.title for h in svc.recall("kind", stores=["global"], mode="grep").hits] == ["reviews"]
        assert [h.title for h in svc.recall("agent", stores=["global"], mode="grep").hits] == ["ci"]


def test_parallel_store_search_gives_the_sequential_answer(svc: MemoryService, repo: Path) -> None:
    # Recall searches the second store on a reader connection in a worker thread; the fused
    # answer must be exactly the one-after-the-other answer, and a write is seen at once.
    for i in range(30):
        svc.remember(f"deploy step {i}: run make release on host {i % 7}", cwd=repo)
        svc.remember(f"global deploy note {i}: tag before release {i % 5}", scope="global")
    retrieval = svc.retrieval
    assert retrieval.side is not None and retrieval.side() is not None
    queries = ["deploy release", "host 3", "tag before", "make"]
    parallel = [svc.recall(q, cwd=repo, mode="keyword", limit=15) for q in queries]
    side, retrieval.side = retrieval.side, None
    try:
        sequential = [svc.recall(q, cwd=repo, mode="keyword", limit=15) for q in queries]
    finally:
        retrieval.side = side
    assert [[(h.store, h.id, h.score) for h in r.hits] for r in parallel] == [
        [(h.store, h.id, h.score) for h in r.hits] for r in sequential
    ]
    assert {h.store for h in parallel[0].hits} == {"global", svc.resolve_store(cwd=repo)}
    svc.remember("global deploy note fresh: release trains leave on Tuesdays", scope="global")
    assert any("Tuesdays" in h.text for h in svc.recall("release trains Tuesdays", cwd=repo).hits)


def test_grep_weighs_rare_terms_above_common_ones(svc: MemoryService) -> None:
    """A file holding the query's rare term ranks above one holding only a term most files share."""
    rare = svc.remember(
        "rotate the signing key", store="global"
    ).fact.id  # the oldest: recency cannot lift it
    common = [svc.remember(f"the release checklist, step {i}", store="global").fact.id for i in range(4)]
    hits = svc.recall("release signing", stores=["global"], mode="grep").hits
    assert hits[0].id == rare
    assert {h.id for h in hits[1:]} == set(common)


def test_hybrid_fusion_keeps_score_gaps() -> None:
    """A keyword hit far ahead of the rest stays ahead of a hit both lists rank second (rank
    fusion would put the shared hit first: 2/62 against 1/61); the score is the weighted
    normalised sum."""
    from datetime import UTC, datetime

    from coffer_memory._fusion import KEYWORD_WEIGHT, fuse_modes

    now = datetime.now(UTC)

    def hit(i: str, score: float) -> MemoryHit:
        return MemoryHit(id=i, text=i, score=score, source=f"x:{i}", time=now, store="s")

    keyword = [hit("exact", 30.0), hit("shared", 3.0), hit("k3", 2.9)]
    vector = [hit("v1", 0.52), hit("shared", 0.51), hit("v3", 0.30)]
    fused = fuse_modes(keyword, vector, limit=5)
    assert [h.id for h in fused] == ["exact", "v1", "shared", "v3", "k3"]
    assert fused[0].score == pytest.approx(KEYWORD_WEIGHT)
    assert fused[2].score == pytest.approx(KEYWORD_WEIGHT * 0.1 / 27.1 + (1 - KEYWORD_WEIGHT) * 0.21 / 0.22)
    assert fuse_modes([], [hit("only", 0.4)], limit=5)[0].score == pytest.approx(1 - KEYWORD_WEIGHT)


def test_fused_scores_are_the_weighted_sums_bit_for_bit() -> None:
    """The fusion adds its two products as it did with ``sum`` over the weights (session 18 took
    the generator out of the path after a hybrid recall's embedding): the same floats, the same
    order, for lists with shared ids, ties, one-sided ids and equal scores."""
    import random

    from coffer_memory._fusion import _normalised, fused_scores

    r = random.Random(18)
    for _ in range(300):
        ids = [f"f{n}" for n in range(r.randint(1, 40))]
        keyword = [(i, r.choice([r.random() * 30, 3.0])) for i in r.sample(ids, r.randint(0, len(ids)))]
        vector = [(i, r.choice([r.random(), 0.5])) for i in r.sample(ids, r.randint(0, len(ids)))]
        weight = r.choice([0.6, r.random()])
        scaled = (_normalised(vector), _normalised(keyword))
        weights = (1.0 - weight, weight)
        order = dict.fromkeys([i for i, _ in vector] + [i for i, _ in keyword])
        want = {i: sum(w * s.get(i, 0.0) for w, s in zip(weights, scaled, strict=True)) for i in order}
        ranked = sorted(want, key=lambda i: want[i], reverse=True)[:20]
        assert fused_scores(keyword, vector, 20, weight) == [(i, want[i]) for i in ranked]


def test_a_rescored_hit_is_the_hit_with_the_new_score() -> None:
    """``rescored`` makes what ``attrs.evolve(hit, score=...)`` makes."""
    from datetime import UTC, datetime

    from coffer_memory._recall_hits import rescored

    hit = MemoryHit(
        id="a",
        text="t",
        score=1.0,
        source="global:/x.md",
        time=datetime.now(UTC),
        store="s",
        path=Path("/x.md"),
        title="T",
    )
    assert rescored(hit, 0.25) == attrs.evolve(hit, score=0.25)
    assert rescored(hit, 0.25).path == Path("/x.md")


def test_keyword_ranks_a_hit_holding_more_of_the_question_first(svc: MemoryService) -> None:
    """bm25 over an OR lets one rare word outweigh the rest: the short line with only
    ``instruments`` came first. Coverage puts the answer, holding every query word, above it
    (on both index backends)."""
    for i in range(12):
        svc.remember(f"Melanie said she would play outside with the kids on day {i}.", store="global")
    asked = svc.remember("Instruments?", store="global")
    answer = svc.remember(
        "Melanie: I play clarinet and a few other instruments, mostly to relax after a long week at work.",
        store="global",
    )
    hits = svc.recall("What instruments does Melanie play?", stores=["global"], mode="keyword", limit=5).hits
    assert [h.id for h in hits[:2]] == [answer.fact.id, asked.fact.id]


def test_coverage_counts_terms_as_the_word_index_sees_them(svc: MemoryService) -> None:
    from coffer_memory._index.coverage import by_coverage

    conn = svc.index.db.conn
    texts = {
        1: ("a", "Deploying needs migrations", "s"),
        2: ("b", "部署前必须先运行数据库迁移", "s"),
        3: ("c", "deploy", "s"),
    }
    ranked = [(3, -2.0), (1, -1.5), (2, -1.0)]
    # "deploy" and "migration" stem as the index stems them; CJK pieces are found inside runs.
    assert [r for r, _ in by_coverage(conn, ["deploy", "migration"], ranked, texts)] == [1, 3, 2]
    assert next(r for r, _ in by_coverage(conn, ["部署", "迁移"], ranked, texts)) == 2
    assert by_coverage(conn, ["deploy"], ranked, texts) == ranked  # one term: bm25 alone
