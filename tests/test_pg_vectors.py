"""Vectors in the shared PostgreSQL index (pgvector): pushed from the local index, found through
another process, one model's rows at a time, and a database without the extension (keyword-only)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_vector import VECTOR_MODES, hash_plugin, shared_vec_rows  # noqa: F401  (a fixture, used by name)

from coffer_memory import MemoryService
from coffer_memory._config import EmbeddingSettings, Settings
from coffer_memory.plugins import get_embedder, get_index_backend

DEPLOY = "This repo deploys via `make release`; never push tags by hand."
OTHERS = ["The office cat sleeps on the sofa every afternoon.", "Use PostgreSQL 16 for the orders database."]
QUESTION = "how is the project rolled out to production?"


def vector_pg_service(
    home: Path, url: str, monkeypatch: pytest.MonkeyPatch, **embedding: object
) -> MemoryService:
    monkeypatch.setenv("COFFER_PG_URL", url)
    settings = Settings.load(home, memory=VECTOR_MODES, embedding=embedding, index={"backend": "postgresql"})
    return MemoryService(settings=settings)


def models(url: str) -> dict[str, tuple[int, int]]:
    """model -> (dimensions, rows) of the vectors in PostgreSQL."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT model, dimensions, count(*) FROM coffer_vectors GROUP BY 1, 2").fetchall()
    return {str(m): (int(d), int(n)) for m, d, n in rows}


def test_a_vector_written_through_one_process_is_found_through_another(
    pg_vector_url: str, tmp_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``coffer remember`` processes embed and push; this process's backend, with no local index
    behind it, finds the fact by meaning, and so does a service's recall here."""
    env = {
        **os.environ,
        "COFFER_HOME": str(tmp_home),
        "COFFER_INDEX_BACKEND": "postgresql",
        "COFFER_PG_URL": pg_vector_url,
        "COFFER_MEMORY_RETRIEVAL_MODES": "grep,keyword,vector,hybrid",
    }
    for text in (DEPLOY, *OTHERS):
        run = subprocess.run(
            [sys.executable, "-m", "coffer_memory", "remember", text, "--global"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr

    monkeypatch.setenv("COFFER_PG_URL", pg_vector_url)
    embedder = get_embedder(EmbeddingSettings())
    another = tmp_path / "another-host"  # the shared folder reached from another home, as docs/team.md asks
    another.mkdir()
    (another / "memory").symlink_to(tmp_home / "memory")
    backend = get_index_backend(Settings.load(another, index={"backend": "postgresql"}))
    assert embedder is not None and backend is not None and backend.vectors
    try:
        embed_query = getattr(embedder, "embed_query", None)
        qvec = embed_query(QUESTION) if callable(embed_query) else embedder.embed_batch([QUESTION])[0]
        found = backend.nearest(["global"], qvec, embedder.model_id, 3)["global"]
    finally:
        backend.close()
    assert [h.title for h in found][:1] == [DEPLOY] and len(found) == 3
    assert 0 < found[0].score <= 1 and found[0].score > found[1].score

    with vector_pg_service(tmp_home, pg_vector_url, monkeypatch) as svc:
        res = svc.recall(QUESTION, stores=["global"], mode="vector")
    assert not res.fallback and res.hits[0].title == DEPLOY


def test_vector_recall_is_answered_by_postgresql(
    pg_vector_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the local index's vectors gone behind its back, vector and hybrid recall still find
    the fact: PostgreSQL answered them."""
    import apsw
    import sqlite_vec

    with vector_pg_service(tmp_home, pg_vector_url, monkeypatch) as svc:
        deploy = svc.remember(DEPLOY, scope="global").fact
        for text in OTHERS:
            svc.remember(text, scope="global")
        conn = apsw.Connection(str(svc.settings.index_path))
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        table = next(conn.execute("SELECT table_name FROM vec_stores"))[0]
        conn.execute(f"DELETE FROM {table}")
        conn.close()
        res = svc.recall(QUESTION, stores=["global"], mode="vector")
        assert not res.fallback and [h.id for h in res.hits][:1] == [deploy.id] and len(res.hits) == 3
        hybrid = svc.recall(QUESTION, stores=["global"], mode="hybrid")
        assert not hybrid.fallback and hybrid.hits[0].id == deploy.id


def test_hybrid_takes_its_keyword_half_from_postgresql(
    pg_vector_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Emptying the local keyword tables behind the service's back changes no hybrid hit or
    score: PostgreSQL answered the keyword half (the local index's one-MATCH path must not)."""
    import apsw

    with vector_pg_service(tmp_home, pg_vector_url, monkeypatch) as svc:
        for text in (DEPLOY, *OTHERS):
            svc.remember(text, scope="global")
        before = svc.recall("deploy release tags", stores=["global"], mode="hybrid")
        conn = apsw.Connection(str(svc.settings.index_path))
        conn.execute("INSERT INTO documents_words (documents_words) VALUES ('delete-all')")
        conn.execute("DELETE FROM documents_fts")
        conn.close()
        after = svc.recall("deploy release tags", stores=["global"], mode="hybrid")
    assert not after.fallback and len(after.hits) == 3
    assert [(h.id, h.score) for h in after.hits] == [(h.id, h.score) for h in before.hits]


def test_vectors_are_pushed_once_and_missing_ones_come_back(
    pg_vector_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    with vector_pg_service(tmp_home, pg_vector_url, monkeypatch) as svc:
        for text in (DEPLOY, *OTHERS):
            svc.remember(text, scope="global")
        backend = svc.index.backend
        assert backend is not None
        version = backend.version("global")
        svc.index.reconcile("global", full=True)
        svc.index.refresh("global")
        assert backend.version("global") == version  # same content, same model: nothing pushed
    with psycopg.connect(pg_vector_url, autocommit=True) as conn:
        conn.execute("DELETE FROM coffer_vectors")
    with vector_pg_service(tmp_home, pg_vector_url, monkeypatch) as svc:
        # The next process compares the store with PostgreSQL: documents lacking this model's
        # vectors get them from the local index (nothing is embedded again).
        res = svc.recall(QUESTION, stores=["global"], mode="vector")
        assert res.hits[0].title == DEPLOY and shared_vec_rows() == 3
        assert svc.index.reindexer.vectors is not None
        assert svc.index.reindexer.embedding_failures == 0


def test_each_model_gets_an_hnsw_index_that_the_search_uses(
    pg_vector_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index is partial on the model and over ``embedding::vector(width)``: the search must
    name both the same way, or the planner can only scan every vector."""
    import psycopg

    from coffer_memory._index.pg import vectors
    from coffer_memory._index.pg.backend import PostgresIndex

    with vector_pg_service(tmp_home, pg_vector_url, monkeypatch) as svc:
        svc.remember(DEPLOY, scope="global", tags=["ops"])
        assert svc.recall(QUESTION, stores=["global"], mode="vector").hits  # an exact scan
        backend = svc.index.backend
        assert isinstance(backend, PostgresIndex)
        backend.wait_for_indexes(120)  # the first search started the build on a thread
        embedder = svc.retrieval.vectors.embedder if svc.retrieval.vectors is not None else None
        assert embedder is not None
        model, width = embedder.model_id, embedder.dimensions
        qvec = [float(x) for x in embedder.embed_batch([QUESTION])[0]]
    name = vectors.index_name(model, width)
    with psycopg.connect(pg_vector_url, autocommit=True) as conn:
        valid = conn.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = %s",
            (name,),
        ).fetchone()
        assert valid == (True,)
        conn.execute("SET enable_seqscan = off")  # a table of one row: make the planner show its options
        filters: list[tuple[str, list[object]]] = [("", []), (" AND d.tags @> %s", [["ops"]])]
        for only in filters:
            query, args = vectors.nearest_sql("global", qvec, model, 40, only)
            plan = "\n".join(str(r[0]) for r in conn.execute("EXPLAIN " + query, args))
            assert name in plan, plan


def test_two_models_share_the_database_and_each_searches_its_own(
    hash_plugin: None,  # noqa: F811
    pg_vector_url: str,
    tmp_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Hosts with different embedders share one database: each pushes its own model's vectors
    and searches only those (a query of 32 dimensions against 384 would be an error)."""
    with vector_pg_service(tmp_home, pg_vector_url, monkeypatch) as svc:
        deploy = svc.remember(DEPLOY, scope="global").fact
        for text in OTHERS:
            svc.remember(text, scope="global")
    with vector_pg_service(tmp_home, pg_vector_url, monkeypatch, provider="hash", dimensions=32) as svc:
        res = svc.recall("make release tags", stores=["global"], mode="vector")
        assert not res.fallback and res.hits[0].id == deploy.id
    assert models(pg_vector_url) == {"multilingual-e5-small-q4": (384, 3), "hash-bow-32": (32, 3)}
    with vector_pg_service(tmp_home, pg_vector_url, monkeypatch) as svc:
        res = svc.recall(QUESTION, stores=["global"], mode="vector")
        assert not res.fallback and res.hits[0].id == deploy.id


def _plain_role_database(admin_url: str, name: str) -> str:
    """A database owned by a new role without superuser rights, which may not create pgvector
    (an untrusted extension); its URL as that role."""
    import psycopg
    from pg_server import create_database

    url = create_database(admin_url, name)
    base, _, _ = url.rpartition("/")
    scheme, _, rest = base.partition("://")
    host = rest.rpartition("@")[2]
    try:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f"DROP ROLE IF EXISTS {name}_owner")
            conn.execute(f"CREATE ROLE {name}_owner LOGIN PASSWORD 'plain'")
            conn.execute(f'ALTER DATABASE "{name}" OWNER TO {name}_owner')
    except psycopg.Error as exc:
        pytest.skip(f"cannot create a role on this server: {exc}")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER SCHEMA public OWNER TO {name}_owner")
    return f"{scheme}://{name}_owner:plain@{host}/{name}"


def test_without_pgvector_postgresql_is_keyword_only_and_says_so(
    pg_admin_url: str,
    tmp_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """CREATE EXTENSION vector fails (not installed, or no right to): the backend keeps no
    vectors and says so, keyword recall is answered by PostgreSQL, vector recall by each host's
    local index as before."""
    import psycopg

    url = _plain_role_database(pg_admin_url, "t_no_pgvector")
    with caplog.at_level(logging.WARNING, logger="coffer_memory.postgresql"):
        svc = vector_pg_service(tmp_home, url, monkeypatch)
    with svc:
        deploy = svc.remember(DEPLOY, scope="global").fact
        for text in OTHERS:
            svc.remember(text, scope="global")
        backend = svc.index.backend
        assert backend is not None and backend.vectors is False
        assert any("vector is not available" in r.getMessage() for r in caplog.records)
        assert [h.id for h in svc.recall("make release", stores=["global"], mode="keyword").hits] == [
            deploy.id
        ]
        res = svc.recall(QUESTION, stores=["global"], mode="vector")
        assert not res.fallback and res.hits[0].id == deploy.id
        assert not svc.recall(QUESTION, stores=["global"], mode="hybrid").fallback
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT to_regclass('coffer_vectors')").fetchone() == (None,)
        assert conn.execute("SELECT count(*) FROM coffer_documents").fetchone() == (3,)
