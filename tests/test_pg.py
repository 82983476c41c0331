"""The index backends: one recall / remember / lanes matrix on SQLite and on a real PostgreSQL,
then what only the shared backend does (configuration, idempotent sync, the advisory lock)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import CliRunner, pgvector_absent
from served import closed_port

from coffer_memory import MemoryService
from coffer_memory._config import Settings
from coffer_memory._errors import InvalidInput


def titles(svc: MemoryService, query: str, **kw: object) -> list[str]:
    return [h.title for h in svc.recall(query, stores=["global"], **kw).hits]  # type: ignore[arg-type]


# -- the matrix: the same behaviour on both backends --------------------------------------------------
def test_remember_then_recall_by_words(index_backend: str, tmp_home: Path) -> None:
    with MemoryService(tmp_home) as svc:
        svc.remember("Deploys run the database migrations first", store="global")
        svc.remember("The cafeteria serves soup on Fridays", store="global")
        res = svc.recall("deploying migration", stores=["global"])
        assert [h.title for h in res.hits][:1] == ["Deploys run the database migrations first"]
        assert res.mode == "keyword" and res.fallback is False
        assert res.hits[0].path is not None and res.hits[0].path.is_file()


def test_chinese_recall_through_bigrams(index_backend: str, tmp_home: Path) -> None:
    with MemoryService(tmp_home) as svc:
        svc.remember("部署前必须先运行数据库迁移", store="global")
        svc.remember("周五食堂供应汤", store="global")
        assert titles(svc, "部署之前要做什么？") == ["部署前必须先运行数据库迁移"]


def test_a_fragment_of_a_word_is_found_as_a_substring(index_backend: str, tmp_home: Path) -> None:
    with MemoryService(tmp_home) as svc:
        svc.remember("Kubernetes manifests live in infra/k8s", store="global")
        assert titles(svc, "bernet") == ["Kubernetes manifests live in infra/k8s"]


def test_a_part_of_a_path_host_or_dotted_name_is_a_word(index_backend: str, tmp_home: Path) -> None:
    """PostgreSQL's parser keeps ``kv/team/payments`` whole: ``payments`` found only the fact that
    has the word alone (SQLite's tokenizer splits the path, and found both)."""
    with MemoryService(tmp_home) as svc:
        svc.remember("Secrets live in Vault under kv/team/payments", store="global")
        svc.remember("The payments service retries webhooks", store="global")
        svc.remember("The entry point is src/app/main.py", store="global")
        svc.remember("The main branch is protected", store="global")
        assert sorted(titles(svc, "payments")) == [
            "Secrets live in Vault under kv/team/payments",
            "The payments service retries webhooks",
        ]
        assert sorted(titles(svc, "main")) == [
            "The entry point is src/app/main.py",
            "The main branch is protected",
        ]
        assert titles(svc, "src/app/main.py")[:1] == ["The entry point is src/app/main.py"]


def test_tags_and_time_filter_inside_the_query(index_backend: str, tmp_home: Path) -> None:
    with MemoryService(tmp_home) as svc:
        svc.remember("release notes go in CHANGES.md", store="global", tags=["release"])
        for i in range(12):  # more untagged matches than the limit
            svc.remember(f"release step {i} is boring", store="global")
        assert titles(svc, "release", tags=["release"], limit=3) == ["release notes go in CHANGES.md"]
        future = datetime.now(UTC) + timedelta(days=1)
        assert titles(svc, "release", since=future) == []
        assert len(titles(svc, "release", until=future, limit=20)) == 13


def test_edit_and_delete_reach_recall(index_backend: str, tmp_home: Path) -> None:
    with MemoryService(tmp_home) as svc:
        fact = svc.remember("the staging host is alpha", title="Staging", store="global").fact
        svc.edit_fact(fact.id, body="the staging host is bravo", store="global")
        assert titles(svc, "alpha") == []
        assert [h.text for h in svc.recall("bravo", stores=["global"]).hits] == ["the staging host is bravo"]
        svc.delete_fact(fact.id, store="global")
        assert titles(svc, "bravo") == []


def test_clear_empties_recall(index_backend: str, tmp_home: Path) -> None:
    with MemoryService(tmp_home) as svc:
        svc.remember("one fact about zebras", store="global")
        svc.clear(store="global")
        assert titles(svc, "zebras") == []


def test_the_journal_is_recalled_and_rules_are_not(index_backend: str, tmp_home: Path, repo: Path) -> None:
    with MemoryService(tmp_home) as svc:
        svc.journal_append("fixed the flaky websocket reconnect", cwd=repo)
        svc.append_rule("always pin the websocket library", store=svc.resolve_store(cwd=repo))
        hits = svc.recall("websocket", cwd=repo).hits
        # Rules reach an agent through session context, not through recall (on either backend).
        assert {h.path.parent.name for h in hits if h.path is not None} == {"journal"}


def test_a_hand_edited_file_is_recalled_after_the_next_read(index_backend: str, tmp_home: Path) -> None:
    with MemoryService(tmp_home) as svc:
        path = svc.remember("the pager rota is on the wiki", title="Pager rota", store="global").path
        path.write_text(path.read_text().replace("wiki", "intranet"))
        os.utime(path, ns=(1, 1))  # a different mtime whatever the clock's tick
        assert titles(svc, "intranet") == ["Pager rota"]
        assert titles(svc, "wiki") == []


def test_deleting_the_index_loses_nothing(index_backend: str, tmp_home: Path) -> None:
    with MemoryService(tmp_home) as svc:
        svc.remember("backups run nightly at two", store="global")
    Settings.load(tmp_home).index_path.unlink()
    with MemoryService(tmp_home) as svc:
        assert titles(svc, "backups nightly") == ["backups run nightly at two"]


# -- what only the shared backend does ------------------------------------------------------------------
def pg_service(home: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> MemoryService:
    monkeypatch.setenv("COFFER_PG_URL", url)
    return MemoryService(settings=Settings.load(home, index={"backend": "postgresql"}))


def test_a_write_through_one_service_is_recalled_by_another(
    pg_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pg_service(tmp_home, pg_url, monkeypatch) as one, pg_service(tmp_home, pg_url, monkeypatch) as two:
        assert titles(two, "lighthouse") == []
        one.remember("the lighthouse keeper owns the deploy key", store="global")
        assert titles(two, "lighthouse") == ["the lighthouse keeper owns the deploy key"]


def test_a_fresh_database_is_filled_from_the_files_and_a_second_pass_changes_nothing(
    pg_admin_url: str, pg_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pg_server import create_database

    with pg_service(tmp_home, pg_url, monkeypatch) as svc:
        for i in range(5):
            svc.remember(f"fact number {i} about otters", store="global")
    other = create_database(pg_admin_url, "t_fresh_copy")
    with pg_service(tmp_home, other, monkeypatch) as svc:
        assert len(titles(svc, "otters")) == 5
        backend = svc.index.backend
        assert backend is not None
        version = backend.version("global")
        assert len(backend.digests("global")) == 5
        svc.index.reconcile("global", full=True)
        svc.index.refresh("global")
        assert backend.version("global") == version  # idempotent by content hash


def test_rows_missing_from_postgresql_come_back_on_the_next_process(
    pg_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    with pg_service(tmp_home, pg_url, monkeypatch) as svc:
        svc.remember("the vault is sealed on Sundays", store="global")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DELETE FROM coffer_documents")
    with pg_service(tmp_home, pg_url, monkeypatch) as svc:
        assert titles(svc, "vault sealed") == ["the vault is sealed on Sundays"]


def test_the_write_lock_is_held_in_postgresql_for_the_whole_transaction(
    pg_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    def free(store: str) -> bool:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT pg_try_advisory_lock(hashtextextended('coffer-store:' || %s, 0))", (store,)
            ).fetchone()
            return bool(row and row[0])  # the connection's close releases it again

    with pg_service(tmp_home, pg_url, monkeypatch) as svc:
        assert free("global")
        with svc.writer.transaction("global") as tx:
            assert not free("global")  # another process (or host) would wait here
            tx.create(tx.paths.inbox / "held.md", b"---\ntitle: held\n---\nwritten under the lock\n")
        assert free("global")
        assert titles(svc, "written under the lock") == ["held"]


def test_the_url_comes_from_the_environment(tmp_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COFFER_PG_URL", raising=False)
    svc = MemoryService(settings=Settings.load(tmp_home, index={"backend": "postgresql"}))
    with pytest.raises(InvalidInput, match="COFFER_PG_URL") as caught:
        svc.recall("anything", stores=["global"])
    assert caught.value.field == "index.url"
    svc.close()


def test_a_password_in_config_toml_is_refused_without_repeating_it(tmp_home: Path) -> None:
    tmp_home.mkdir()
    (tmp_home / "config.toml").write_text(
        '[index]\nbackend = "postgresql"\nurl = "postgresql://team:hunter2@db/coffer"\n'
    )
    with pytest.raises(InvalidInput) as caught:
        Settings.load(tmp_home)
    assert caught.value.field == "index.url" and "hunter2" not in str(caught.value)
    (tmp_home / "config.toml").write_text('[index]\nurl = "host=db dbname=coffer password=hunter2"\n')
    with pytest.raises(InvalidInput, match="password"):
        Settings.load(tmp_home)
    (tmp_home / "config.toml").write_text('[index]\nurl = "postgresql://team@db/coffer"\n')
    assert Settings.load(tmp_home).index.url == "postgresql://team@db/coffer"


def test_an_unknown_backend_is_invalid_input(tmp_home: Path) -> None:
    svc = MemoryService(settings=Settings.load(tmp_home, index={"backend": "cassandra"}))
    with pytest.raises(InvalidInput, match="cassandra"):
        svc.recall("anything", stores=["global"])
    svc.close()


def test_the_postgresql_backend_is_registered_through_the_hook(
    pg_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from coffer_memory.plugins.manager import get_index_backend, get_index_backend_factories

    assert "postgresql" in get_index_backend_factories()
    assert get_index_backend(Settings.load(tmp_home)) is None  # sqlite: the local index alone
    monkeypatch.setenv("COFFER_PG_URL", pg_url)
    backend = get_index_backend(Settings.load(tmp_home, index={"backend": "postgresql"}))
    assert backend is not None and backend.name == "postgresql"
    assert backend.vectors is (pgvector_absent(pg_url) is None)
    backend.close()


def test_a_server_that_cannot_be_reached_is_a_typed_error_and_nothing_is_written(
    tmp_home: Path, monkeypatch: pytest.MonkeyPatch, cli: CliRunner
) -> None:
    """PostgreSQL down answered the driver's OperationalError (a raw 500 over REST); now every face
    gets INDEX_UNAVAILABLE, a remember writes no file, and the URL's password is never repeated."""
    from coffer_memory import IndexUnavailable

    url = f"postgresql://team:hunter2@127.0.0.1:{closed_port()}/coffer?connect_timeout=2"
    monkeypatch.setenv("COFFER_PG_URL", url)
    monkeypatch.setenv("COFFER_INDEX_BACKEND", "postgresql")
    with MemoryService(tmp_home) as svc:
        with pytest.raises(IndexUnavailable) as caught:
            svc.recall("anything", stores=["global"], mode="keyword")
        assert caught.value.code == "INDEX_UNAVAILABLE" and caught.value.backend == "postgresql"
        assert "hunter2" not in str(caught.value)
        with pytest.raises(IndexUnavailable):
            svc.remember("a fact that must not be half-written", store="global")
    assert list((tmp_home / "memory").rglob("*.md")) == []
    run = cli("recall", "anything", "--store", "global")
    said = run.stdout + run.stderr
    assert run.returncode != 0 and "INDEX_UNAVAILABLE" in said and "Traceback" not in said
