"""Chinese, Japanese and Korean recall: natural questions in keyword and grep mode, the index migration."""

from __future__ import annotations

from pathlib import Path

import pytest

from coffer_memory import MemoryService, Settings
from coffer_memory._index.cjk import bigrams, index_text, query_pieces, query_terms, run_tokens
from coffer_memory._index.db import IndexDB
from coffer_memory._index.fts import keyword_terms
from coffer_memory._index.migrations import MIGRATIONS, SCHEMA_VERSION, _segment_words

# The recall tests run on the machine-local SQLite index and on the shared PostgreSQL one.
on_both = pytest.mark.usefixtures("index_backend")

DEPLOY = "部署前必须先运行数据库迁移，然后清空缓存。"
OTHERS = [
    "预发环境的数据每天凌晨从生产脱敏同步一次。",
    "测试覆盖率低于百分之八十时 CI 会失败。",
    "代码评审要在一个工作日内给出反馈。",
]


def test_runs_become_bigrams_and_characters() -> None:
    assert bigrams("部署前") == ["部署", "署前"]
    assert bigrams("锁") == ["锁"]
    assert run_tokens("部署前") == ["部署", "署前", "部", "署", "前"]
    assert index_text("用make test运行").split() == ["用", "make", "test", "运行", "运", "行"]
    # NFKC: full-width letters and punctuation become their plain forms, as in queries.
    assert index_text("ｐｙｔｅｓｔ，测试").split() == ["pytest,", "测试", "测", "试"]


def test_question_words_and_particles_leave_the_query() -> None:
    assert query_pieces("部署之前要做什么") == ["部署", "要做"]
    assert query_terms(["如何部署"]) == ["部署", "部", "署"]
    assert query_pieces("为什么缓存的过期时间是十分钟吗") == ["缓存", "过期时间", "十分钟"]
    # Nothing but question words: keep the run rather than search for nothing.
    assert query_terms(["什么"]) == run_tokens("什么")
    # A lone character counts only when nothing longer is left.
    assert query_terms(["锁"]) == ["锁"]
    # Japanese: hiragana (particles, endings) separates pieces; Korean: spaces and endings.
    assert query_terms(["デプロイの前に何をする必要がありますか"]) == [
        *run_tokens("デプロイ"),
        *run_tokens("必要"),
    ]
    assert keyword_terms("배포 전에 무엇을 해야 하나요?") == [
        *run_tokens("배포"),
        *run_tokens("전에"),
        *run_tokens("해야"),
    ]


def test_mixed_text_keeps_its_words() -> None:
    # Beside CJK tokens a word counts three times (fts.MIXED_WORD_WEIGHT); grep's patterns once.
    assert keyword_terms("如何用 pytest 运行单元测试？") == ["pytest"] * 3 + run_tokens("运行单元测试")
    assert keyword_terms("用pytest运行") == ["pytest"] * 3 + run_tokens("运行")
    assert keyword_terms("用pytest运行", characters=False) == ["pytest", "运行"]


@pytest.fixture
def deploy(svc: MemoryService) -> str:
    for text in OTHERS:
        svc.remember(text, store="global")
    return svc.remember(DEPLOY, store="global").fact.id


@on_both
@pytest.mark.parametrize("backend", ["ripgrep", "python"])
@pytest.mark.parametrize(
    "query", ["如何部署", "部署之前", "部署之前要做什么？", "怎么清空缓存", "数据库迁移是什么时候做的"]
)
def test_natural_chinese_questions_hit_in_keyword_and_grep(tmp_home: Path, backend: str, query: str) -> None:
    with MemoryService(settings=Settings.load(tmp_home, grep_backend=backend)) as svc:
        others = [svc.remember(text, store="global").fact.id for text in OTHERS]
        wanted = svc.remember(DEPLOY, store="global").fact.id
        for mode in ("keyword", "grep"):
            hits = svc.recall(query, stores=["global"], mode=mode).hits
            assert hits and hits[0].id == wanted, (mode, query, [h.text for h in hits])
            assert not set(others) & {h.id for h in hits[:1]}


@on_both
def test_grep_ranks_by_pieces_matched(svc: MemoryService) -> None:
    partial = svc.remember("部署脚本在 scripts 目录。", store="global").fact.id
    full = svc.remember("部署之后要检查监控告警。", store="global").fact.id
    hits = svc.recall("部署以后怎么检查告警？", stores=["global"], mode="grep").hits
    assert [h.id for h in hits] == [full, partial]
    assert hits[0].score > hits[1].score


@on_both
def test_japanese_and_korean_questions_hit(svc: MemoryService) -> None:
    ja = svc.remember("デプロイの前に必ずデータベースのマイグレーションを実行する。", store="global").fact.id
    ko = svc.remember(
        "배포하기 전에 반드시 데이터베이스 마이그레이션을 실행해야 한다.", store="global"
    ).fact.id
    svc.remember("テストは make test で実行する。", store="global")
    svc.remember("테스트는 make test 명령으로 실행한다.", store="global")
    for mode in ("keyword", "grep"):
        assert svc.recall("デプロイの前に何をしますか？", stores=["global"], mode=mode).hits[0].id == ja
        assert svc.recall("배포 전에 무엇을 해야 하나요?", stores=["global"], mode=mode).hits[0].id == ko


@on_both
@pytest.mark.parametrize(
    "query", ['部署" OR "*', "部署 NEAR(迁移", "部署*", "store:部署", '"部署"', "部署^迁移 -缓存"]
)
def test_fts_syntax_around_cjk_stays_inert(svc: MemoryService, deploy: str, query: str) -> None:
    for mode in ("keyword", "grep"):
        hits = svc.recall(query, stores=["global"], mode=mode).hits
        assert hits[0].id == deploy


def test_migration_segments_an_existing_word_index(tmp_home: Path) -> None:
    """An index whose word table was written before CJK segmentation is rebuilt in place."""
    with MemoryService(tmp_home) as svc:
        wanted = svc.remember(DEPLOY, store="global").fact.id
        db_path = svc.settings.index_path
    step = MIGRATIONS.index(_segment_words)
    db = IndexDB(db_path)
    # What the earlier schema wrote: the chunk text as it is, one token per CJK run.
    db.conn.execute("INSERT INTO documents_words (documents_words) VALUES ('delete-all')")
    db.conn.execute(
        "INSERT INTO documents_words (rowid, text, store) "
        "SELECT rowid, text, substr(chunk_id, 1, instr(chunk_id, ':') - 1) FROM documents_fts"
    )
    db.close()
    with MemoryService(tmp_home) as svc:
        assert svc.recall("如何部署", stores=["global"], mode="keyword").hits == ()
    db = IndexDB(db_path)
    _segment_words(db.conn)
    assert step + 1 <= SCHEMA_VERSION
    db.close()
    with MemoryService(tmp_home) as svc:
        assert [h.id for h in svc.recall("如何部署", stores=["global"], mode="keyword").hits] == [wanted]
