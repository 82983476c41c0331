"""Query text as users type it: English clitics, traditional characters, mixed scripts.

Each class was found by the held-out sets (``bench/heldout.py``, issue #14); the tests hold the
rule for the class, not the held-out questions' wording.
"""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from test_keyword_context import word_rows

from coffer_memory import MemoryService, Settings
from coffer_memory._index.cjk import CJK_RUN, query_pieces, query_terms, run_tokens
from coffer_memory._index.english import grep_words, without_clitic
from coffer_memory._index.fts import keyword_terms
from coffer_memory._index.hant import SIMPLIFIED, TRADITIONAL, fold
from coffer_memory._index.migrations import MIGRATIONS, _fold_words


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("isn't", "is"),
        ("can't", "can"),
        ("won't", "will"),
        ("what's", "what"),
        ("how're", "how"),
        ("we'll", "we"),
        ("i've", "i"),
        ("ledger's", "ledger"),
        ("don\u2019t", "do"),  # a typographic apostrophe, as macOS and phones type it
        ("it\u02bcs", "it"),
        ("o'brien", "o'brien"),  # not a clitic: the word stays whole
        ("users", "users"),
    ],
)
def test_english_clitics_come_off(word: str, expected: str) -> None:
    assert without_clitic(word) == expected


def test_contractions_and_possessives_leave_content_words() -> None:
    assert keyword_terms("What's the ledger's owner? Isn't it Priya?") == ["ledger", "owner", "priya"]
    assert keyword_terms("why won\u2019t opensearch start") == ["opensearch", "start"]


def test_a_possessive_question_finds_the_fact_not_the_contractions(svc: MemoryService) -> None:
    chatter = svc.remember("What's new: isn't it great that we've moved the dashboard?", store="global")
    fact = svc.remember("The ledger service is run by Priya; ask her before changing it.", store="global")
    for mode in ("keyword", "grep"):
        hits = svc.recall("what's the ledger's status?", stores=["global"], mode=mode).hits
        assert hits and hits[0].id == fact.fact.id, (mode, [h.text for h in hits])
        assert chatter.fact.id not in {h.id for h in hits}


# The same facts and questions in both scripts (character by character), and facts to miss.
SIMPLIFIED_FACTS = [
    "数据平台的负责人是王芳，Airflow 集群由运维组维护。",
    "预发环境的账号密码在 1Password 的 Staging 条目里。",
    "镜像仓库用 Harbor，推送镜像前要先登录。",
]
TRADITIONAL_FACTS = [
    "數據平臺的負責人是王芳，Airflow 集羣由運維組維護。",
    "預發環境的賬號密碼在 1Password 的 Staging 條目裏。",
    "鏡像倉庫用 Harbor，推送鏡像前要先登錄。",
]
SIMPLIFIED_QUESTIONS = ["数据平台的负责人是谁？", "预发环境的账号密码在哪", "镜像仓库用的是什么"]
TRADITIONAL_QUESTIONS = ["數據平臺的負責人是誰？", "預發環境的賬號密碼在哪", "鏡像倉庫用的是什麼"]
OTHER_FACTS = [
    "支付网关的负责人是张伟，值班问题先找李娜。",
    "生产环境的发布窗口是周四下午，密码不能写进配置。",
    "前端组件库用 Ant Design，主题色在 tokens 文件里改。",
]


def test_the_fold_table_maps_one_character_to_one_and_is_settled() -> None:
    assert len(TRADITIONAL) == len(SIMPLIFIED) == len(set(TRADITIONAL))
    assert not set(SIMPLIFIED) & set(TRADITIONAL)  # folding twice changes nothing
    assert all(CJK_RUN.fullmatch(c) for c in TRADITIONAL + SIMPLIFIED)
    assert [fold(t) for t in TRADITIONAL_FACTS] == SIMPLIFIED_FACTS
    assert fold("pg_dump 與 pg_restore") == "pg_dump 与 pg_restore"


def test_traditional_question_words_leave_the_query_and_pieces_are_simplified() -> None:
    assert query_pieces("數據平臺的負責人是誰") == ["数据平台", "负责人"]
    assert query_terms(["為什麼測試會失敗"]) == query_terms(["为什么测试会失败"])
    # grep reads the files as written: the pieces in both scripts.
    assert query_pieces("負責人是誰", written=True) == ["负责人", "負責人"]
    assert query_pieces("负责人是谁", written=True) == ["负责人"]


@pytest.mark.usefixtures("index_backend")  # the SQLite index and the shared PostgreSQL one
@pytest.mark.parametrize(
    ("facts", "questions", "modes"),
    [
        (SIMPLIFIED_FACTS, TRADITIONAL_QUESTIONS, ("keyword", "grep")),
        (TRADITIONAL_FACTS, TRADITIONAL_QUESTIONS, ("keyword", "grep")),
        # grep reads the files: a simplified question cannot spell traditional text (one simplified
        # character stands for several traditional ones), so this way round is the index's.
        (TRADITIONAL_FACTS, SIMPLIFIED_QUESTIONS, ("keyword",)),
    ],
)
def test_either_script_finds_the_other(
    tmp_home: Path, facts: list[str], questions: list[str], modes: tuple[str, ...]
) -> None:
    with MemoryService(tmp_home) as svc:
        others = {svc.remember(t, store="global").fact.id for t in OTHER_FACTS}
        wanted = [svc.remember(t, store="global").fact.id for t in facts]
        for question, fact_id in zip(questions, wanted, strict=True):
            for mode in modes:
                hits = svc.recall(question, stores=["global"], mode=mode).hits
                assert hits and hits[0].id == fact_id, (mode, question, [h.text for h in hits])
                assert not others & {hits[0].id}


def test_a_postgresql_index_of_schema_2_is_folded_on_upgrade(
    pg_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    monkeypatch.setenv("COFFER_PG_URL", pg_url)
    settings = Settings.load(tmp_home, index={"backend": "postgresql"})
    with MemoryService(settings=settings) as svc:
        wanted = svc.remember(TRADITIONAL_FACTS[0], store="global").fact.id
        svc.remember(OTHER_FACTS[0], store="global")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        fresh = conn.execute("SELECT path, position, words::text FROM coffer_chunks ORDER BY 1, 2").fetchall()
        for path, position, text in conn.execute("SELECT path, position, text FROM coffer_chunks").fetchall():
            conn.execute(
                "UPDATE coffer_chunks SET words = to_tsvector('english', %s) WHERE path = %s AND position = %s",
                (_unfolded_index_text(text), path, position),
            )
        conn.execute("UPDATE coffer_meta SET value = '2' WHERE key = 'schema_version'")
    with MemoryService(settings=settings) as svc:
        hits = svc.recall(SIMPLIFIED_QUESTIONS[0], stores=["global"], mode="keyword").hits
        assert hits and hits[0].id == wanted
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert (
            conn.execute("SELECT path, position, words::text FROM coffer_chunks ORDER BY 1, 2").fetchall()
            == fresh
        )
        assert conn.execute("SELECT value FROM coffer_meta WHERE key = 'schema_version'").fetchone() == ("6",)


def _unfolded_index_text(text: str) -> str:
    """What schema 9 wrote to the word index: CJK runs as written."""
    return CJK_RUN.sub(lambda m: " " + " ".join(run_tokens(m.group())) + " ", text)


def test_an_index_of_schema_9_is_folded_on_upgrade(tmp_home: Path) -> None:
    """The word index is written again from the stored chunks; session facts get their keyword
    context back from the next scan. The rows are then those of a fresh index."""
    with MemoryService(home=tmp_home) as svc:
        wanted = svc.remember(TRADITIONAL_FACTS[0], store="global").fact.id
        for i, text in enumerate(TRADITIONAL_FACTS[1:] + OTHER_FACTS):
            svc.remember(text, store="global", origin_session_id="chat-1", title=f"turn {i}")
    fresh = word_rows(tmp_home)
    conn = apsw.Connection(str(tmp_home / "index.db"))
    conn.execute("INSERT INTO documents_words (documents_words) VALUES ('delete-all')")
    for rowid, text, chunk in list(conn.execute("SELECT rowid, text, chunk_id FROM documents_fts")):
        conn.execute(
            "INSERT INTO documents_words (rowid, text, store) VALUES (?, ?, ?)",
            (rowid, _unfolded_index_text(text), chunk.split(":", 1)[0]),
        )
    conn.execute(f"PRAGMA user_version={MIGRATIONS.index(_fold_words)}")
    conn.close()
    assert word_rows(tmp_home) != fresh
    with MemoryService(settings=Settings.load(tmp_home)) as svc:
        hits = svc.recall(SIMPLIFIED_QUESTIONS[0], stores=["global"], mode="keyword").hits
        assert hits and hits[0].id == wanted
    assert word_rows(tmp_home) == fresh


def test_an_index_without_traditional_text_is_left_alone(tmp_home: Path) -> None:
    with MemoryService(home=tmp_home) as svc:
        for text in SIMPLIFIED_FACTS:
            svc.remember(text, store="global", origin_session_id="chat-1")
    conn = apsw.Connection(str(tmp_home / "index.db"))
    state = list(conn.execute("SELECT * FROM store_state"))
    _fold_words(conn)
    assert list(conn.execute("SELECT * FROM store_state")) == state
    assert not list(conn.execute("SELECT * FROM kv WHERE key = 'keyword_context_pending'"))
    conn.close()


def test_a_code_name_in_a_chinese_question_outweighs_its_frame(svc: MemoryService) -> None:
    """``X 文件放在哪里``: the frame's CJK words come as bigrams and characters (seven terms here),
    the file name as one; facts that hold only the frame (common words: a third of the store has
    them) must not outrank the one naming ``X``."""
    for text in [
        "支付网关的迁移文件放在 db/migrations 目录，文件名以时间戳开头。",
        "数据平台的 DAG 文件放在 dags/ 目录，合并后自动同步。",
        "前端的国际化文件放在 src/locales 目录。",
        "告警规则文件放在 monitoring/rules 目录。",
        "压测脚本文件放在 perf/ 目录。",
        *(f"第{n}号服务的值班表每周一更新一次。" for n in range(8)),
    ]:
        svc.remember(text, store="global")
    wanted = svc.remember("连 Hive 要先 kinit，keytab 在跳板机的 /etc/security/etl.keytab。", store="global")
    for question in ["etl.keytab文件放在哪里", "etl.keytab 文件放在哪"]:
        hits = svc.recall(question, stores=["global"], mode="keyword").hits
        assert hits and hits[0].id == wanted.fact.id, (question, [h.text for h in hits])


@pytest.mark.parametrize(
    ("question", "pieces"),
    [
        ("为啥数据库迁移失败", ["数据库迁移失败"]),  # 为啥 = 为什么
        ("啥时候发版", ["发版"]),  # 啥 = 什么
        ("这个咋弄", ["这个", "弄"]),  # 咋 = 怎么
        ("推镜像之前要干嘛", ["推镜像", "要"]),  # 干嘛 = 做什么
        ("要不要先备份数据库", ["先备份数据库"]),  # a modal A-not-A question, as 能不能
        ("请问您知道测试库多久重置吗", ["知道测试库", "重置"]),  # polite 您, as 你
    ],
)
def test_colloquial_and_polite_question_words_leave_the_query(question: str, pieces: list[str]) -> None:
    assert query_pieces(question) == pieces


def test_grep_searches_english_words_as_their_stems() -> None:
    assert grep_words(["restores", "tables", "queries", "deploying", "pg_dump", "v2.3.0", "go"]) == [
        "restor",
        "tabl",
        "quer",  # Porter's y -> i is left out, so query and queries both hold it
        "deplo",
        "pg_dump",  # names with punctuation or digits, and short words, as written
        "v2.3.0",
        "go",
    ]


@pytest.mark.parametrize("backend", ["ripgrep", "python"])
def test_grep_finds_a_fact_by_another_form_of_the_word(tmp_home: Path, backend: str) -> None:
    with MemoryService(settings=Settings.load(tmp_home, grep_backend=backend)) as svc:
        wanted = svc.remember("Restore drills happen every quarter on the staging database.", store="global")
        svc.remember("Backups happen every night.", store="global")  # newer: first among equals
        hits = svc.recall("how often do restores happen?", stores=["global"], mode="grep").hits
        assert hits and hits[0].id == wanted.fact.id, [h.text for h in hits]
