"""Keyword scores where FTS5's bm25 floors every term's idf (a home of a fact or two), on SQLite,
and the same scale on PostgreSQL, whose ts_rank has no idf (``_index/pg/words.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from coffer_memory import MemoryService, Settings


def test_a_one_fact_home_gives_keyword_scores_that_do_not_read_as_zero(
    svc: MemoryService, repo: Path
) -> None:
    # FTS5's bm25 gives a term held by half the rows or more an idf of 1e-6: in a home of one fact
    # every hit scored about 0.000001, words and word fragments (the trigram index) alike.
    svc.remember("deploys go out on Tuesdays after the standup", store="global")
    for query in ("deploys", "standup deploys", "depl"):
        [hit] = svc.recall(query, stores=["global"], mode="keyword").hits
        assert hit.score >= 0.5, (query, hit.score)
    # Two facts in two stores (the index is the home's): both hold the word, both scores say so,
    # and the shorter fact scores more (bm25's length normalisation, as before).
    svc.remember("deploys are frozen during the holidays because the on-call team is small", cwd=repo)
    score = {h.store: h.score for h in svc.recall("deploys", cwd=repo, mode="keyword").hits}
    assert len(score) == 2 and all(s >= 0.1 for s in score.values()), score
    assert score["global"] > max(s for store, s in score.items() if store != "global")


def test_a_term_with_a_real_idf_keeps_bm25s_scores(svc: MemoryService) -> None:
    # Only a query whose every term is floored is scaled: one rare term, and bm25 is left as it is
    # (its order and its scores), however floored the other terms are.
    for text in ("deploys go out on Tuesdays", "deploys wait for review", "the ui uses chromium"):
        svc.remember(text, store="global")
    raw = svc.index.db.rows(
        "SELECT -bm25(documents_words, 1.0, 0.0, 0.3) FROM documents_words WHERE documents_words MATCH ?",
        ('"chromium"',),
    )
    [hit] = svc.recall("chromium", stores=["global"], mode="keyword").hits
    assert hit.score == pytest.approx(raw[0][0]) and 0.1 < hit.score < 10


FACTS = (
    "the harbour master logs the tides every morning",
    "deploy with make release after the standup on Tuesday",
    "Postgres runs version 16 in production",
)
QUERIES = ("harbour", "tides morning", "deploy release", "harbour deploy", "postgres production version")


def scores(
    home: Path, facts: int, backend: str, pg_admin_url: str = ""
) -> dict[str, list[tuple[str, float]]]:
    """Each query's keyword hits (text, score) in a home of the first ``facts`` of FACTS (on
    PostgreSQL, in a database of its own)."""
    index: dict[str, str] = {"backend": backend}
    if backend == "postgresql":
        from pg_server import create_database

        index["url"] = create_database(pg_admin_url, f"scores_{home.name.replace('-', '_')}")
    with MemoryService(settings=Settings.load(home, index=index)) as svc:
        for text in FACTS[:facts]:
            svc.remember(text, store="global")
        return {
            q: [(h.text, h.score) for h in svc.recall(q, stores=["global"], mode="keyword").hits]
            for q in QUERIES
        }


def test_postgresql_scores_a_small_store_on_sqlites_scale(pg_admin_url: str, tmp_path: Path) -> None:
    """ts_rank scored a one-fact store's hits about 0.02 a word where SQLite's bm25, its idf
    floor lifted, scores about 1: now a query whose every word is in half the store's chunks or
    more is scaled on PostgreSQL too, by one factor, so both backends say the same of the same
    facts. A store where a word has a real idf keeps ts_rank's scores (bm25's differ there)."""
    for facts in (1, 2):
        lite = scores(tmp_path / f"sqlite-{facts}", facts, "sqlite")
        pg = scores(tmp_path / f"pg-{facts}", facts, "postgresql", pg_admin_url)
        for query in QUERIES:
            # The same facts found; their order may differ (bm25's length normalisation is not
            # ts_rank's), so the scores are compared best with best.
            assert sorted(t for t, _ in pg[query]) == sorted(t for t, _ in lite[query]), (facts, query)
            for want, got in zip(
                sorted(s for _, s in lite[query]), sorted(s for _, s in pg[query]), strict=True
            ):
                if want >= 0.5:  # a query with a word in no chunk is floored on neither backend
                    assert 2 / 3 < got / want < 3 / 2, (facts, query, lite[query], pg[query])
        assert [s for _, s in lite["harbour"]] == pytest.approx([s for _, s in pg["harbour"]], rel=0.1)
    pg = scores(tmp_path / "pg-3", 3, "postgresql", pg_admin_url)
    [(_, score)] = pg["harbour"]
    assert score < 0.1  # one chunk of three holds it: a real idf, ts_rank's score as it was


def test_a_word_postgresql_keeps_whole_beside_its_parts_scores_as_on_sqlite(
    pg_admin_url: str, tmp_path: Path
) -> None:
    """PostgreSQL's parser keeps ``stand-up`` whole beside its parts (lexemes 'stand-up', 'stand'),
    a version or a host too, and the scale counted ``ts_rank``'s lexemes where bm25 counts the
    query's words (FTS5 reads ``stand-up`` as one phrase): a one-fact store scored "stand-up
    deploy" 15.0 there and 10.0 on SQLite (newuser7, session 16). Now the same on both."""
    text = "deploy with make-release after the stand-up on Tuesday; pinned to v1.2.3, owner foo_bar"
    queries = ("stand-up deploy", "make-release", "v1.2.3 deploy", "foo_bar deploy", "make-release make")
    got: dict[str, dict[str, list[float]]] = {}
    for backend in ("sqlite", "postgresql"):
        index: dict[str, str] = {"backend": backend}
        if backend == "postgresql":
            from pg_server import create_database

            index["url"] = create_database(pg_admin_url, "scores_whole_words")
        with MemoryService(settings=Settings.load(tmp_path / backend, index=index)) as svc:
            svc.remember(text, store="global")
            for q in queries:
                hits = svc.recall(q, stores=["global"], mode="keyword").hits
                got.setdefault(q, {})[backend] = [h.score for h in hits]
    for q in queries:
        assert got[q]["postgresql"] == pytest.approx(got[q]["sqlite"], rel=1e-6), (q, got[q])


ORDER_FACTS = (
    "the cache is warmed before each deploy",
    "cache cache cache: the build cache, the test cache and the image cache",
    "deploys go out on Tuesdays after the standup",
    "the image cache lives on the build host and is pruned weekly by a cron job that nobody remembers",
    "redis holds the session cache",
    "tuesday deploy freeze during the holidays",
)
# A word found again in a chunk (fact 2 holds "cache" six times), a query word twice, a query word
# no chunk holds (zebra), words of real idf beside floored ones.
ORDER_QUERIES = (
    "cache",
    "cache cache",
    "cache deploy",
    "cache cache deploy",
    "cache zebra",
    "deploy zebra",
    "zebra cache cache",
    "image cache",
)


def test_postgresql_ranks_a_small_store_as_sqlite_does(pg_admin_url: str, tmp_path: Path) -> None:
    """The same facts and queries on both backends: the same hits in the same order, with the
    same scores. ``ts_rank`` put the short fact with "cache" once before the one with it six times
    (bm25 the other way), and scored a query with a word no chunk holds about 0.04 where SQLite's
    bm25 gives about 0.000004 (no idf floor lifted: the word has a real idf)."""
    from pg_server import create_database

    for facts in (2, 6):
        got: dict[str, dict[str, list[tuple[str, float]]]] = {}
        for backend in ("sqlite", "postgresql"):
            index: dict[str, str] = {"backend": backend}
            if backend == "postgresql":
                index["url"] = create_database(pg_admin_url, f"scores_order_{facts}")
            with MemoryService(settings=Settings.load(tmp_path / f"{backend}-{facts}", index=index)) as svc:
                for text in ORDER_FACTS[:facts]:
                    svc.remember(text, store="global")
                for q in ORDER_QUERIES:
                    hits = svc.recall(q, stores=["global"], mode="keyword").hits
                    got.setdefault(q, {})[backend] = [(h.text.strip(), h.score) for h in hits]
        for q in ORDER_QUERIES:
            lite, pg = got[q]["sqlite"], got[q]["postgresql"]
            assert [t for t, _ in pg] == [t for t, _ in lite], (facts, q, lite, pg)
            assert [s for _, s in pg] == pytest.approx([s for _, s in lite], rel=1e-3), (facts, q, lite, pg)
