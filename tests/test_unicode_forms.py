"""Text written in another Unicode form than the question (full-width letters, half-width kana,
decomposed accents, the Turkish dotted capital I). Each test here failed before its fix. Real
homes, real SQLite files, PostgreSQL where marked.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import apsw
import pytest

from coffer_memory import MemoryService, Settings

on_both = pytest.mark.usefixtures("index_backend")

FULL = "ｆｕｌｌｗｉｄｔｈ text about ｄｏｃｋｅｒ ports"
OTHERS = ("The kettle whistles at dawn.", "Ports of the harbour close at night.")


def _full(svc: MemoryService) -> str:
    for text in OTHERS:
        svc.remember(text, store="global")
    return svc.remember(FULL, store="global").fact.id


@on_both
@pytest.mark.parametrize("query", ["fullw", "ｆｕｌｌ", "width", "FULLW", "ｄｏｃｋ", "fullwidth", "docker"])
def test_full_width_text_is_found_by_its_fragments(svc: MemoryService, query: str) -> None:
    """The word index held the NFKC text, the trigram index the text as written: ``fullwidth`` and
    ``docker`` found the fact, ``fullw``, ``ｆｕｌｌ`` and ``width`` did not. The hit shows the text
    as the fact writes it."""
    wanted = _full(svc)
    hits = svc.recall(query, stores=["global"], mode="keyword").hits
    assert [h.id for h in hits][:1] == [wanted], (query, [h.text for h in hits])
    assert FULL in hits[0].text


@on_both
def test_full_width_short_terms_and_near_spellings(svc: MemoryService) -> None:
    """A term too short for trigrams (the LIKE scan) and a typo (near spellings) meet full-width
    text as its plain form too."""
    wanted = _full(svc)
    assert [h.id for h in svc.recall("ｄｏ", stores=["global"], mode="keyword").hits][:1] == [wanted]
    hits = svc.recall("fullwidht", stores=["global"], mode="keyword").hits
    assert [h.id for h in hits][:1] == [wanted]
    assert FULL in hits[0].text


def test_half_width_katakana_and_cjk_fragments(svc: MemoryService) -> None:
    """Half-width katakana (NFKC makes it full-width) found by a full-width query, shown as written;
    Chinese fragments the word index lacks still reach the trigram index."""
    kana = svc.remember("ﾃﾞﾌﾟﾛｲ手順はｍａｋｅ ｄｅｐｌｏｙです。", store="global").fact.id
    zh = svc.remember("部署前必须先运行数据库迁移，然后清空缓存。", store="global").fact.id
    hits = svc.recall("デプロイ", stores=["global"], mode="keyword").hits
    assert [h.id for h in hits][:1] == [kana]
    assert "ﾃﾞﾌﾟﾛｲ" in hits[0].text
    assert [h.id for h in svc.recall("ake depl", stores=["global"], mode="keyword").hits][:1] == [kana]
    assert [h.id for h in svc.recall("据库迁", stores=["global"], mode="keyword").hits][:1] == [zh]


def _previous_schema(index: Path, damage: str | None = None) -> None:
    """Rewrite ``index`` as schema 10 left it: the trigram table of the text as written;
    ``damage``: the SQL value another program wrote into the kettle fact's text. (The chunks'
    tokens of schema 12 stay: migration 12 keeps the column of an index rolled back.)"""
    conn = apsw.Connection(str(index))
    # The text as the fact writes it, wherever this version keeps it.
    columns = {str(r[1]) for r in conn.execute("PRAGMA table_info(documents_fts)")}
    text = "coalesce(written, text)" if "written" in columns else "text"
    rows = list(conn.execute(f"SELECT rowid, {text}, resource_name, chunk_id FROM documents_fts"))
    with conn:
        conn.execute("DROP TABLE documents_fts")
        conn.execute(
            "CREATE VIRTUAL TABLE documents_fts USING fts5(text, resource_name UNINDEXED, "
            "chunk_id UNINDEXED, tokenize='trigram')"
        )
        conn.executemany(
            "INSERT INTO documents_fts (rowid, text, resource_name, chunk_id) VALUES (?, ?, ?, ?)", rows
        )
        if damage is not None:
            conn.execute(f"UPDATE documents_fts SET text = {damage} WHERE text LIKE '%kettle%'")
            assert conn.changes() == 1
        conn.execute("PRAGMA user_version=10")
    conn.close()


def test_an_index_of_the_previous_schema_is_migrated_on_open(tmp_home: Path) -> None:
    """An index whose trigram table holds the text as written (every index before this version)
    is rewritten when it is opened: the full-width fragment is found without a rebuild."""
    with MemoryService(tmp_home) as svc:
        wanted = _full(svc)
        index = svc.settings.index_path
    _previous_schema(index)
    with MemoryService(tmp_home) as svc:
        hits = svc.recall("fullw", stores=["global"], mode="keyword").hits
        assert [h.id for h in hits][:1] == [wanted]
        assert FULL in hits[0].text
        assert [h.id for h in svc.recall("kettle", stores=["global"], mode="keyword").hits]


@pytest.mark.parametrize("damage", ["CAST(x'6b657474ff' AS TEXT)", "x'6b6574746c65'", "NULL"])
def test_the_migration_keeps_damage_for_the_values_check(tmp_home: Path, damage: str) -> None:
    """A value another program wrote into a trigram row (bytes that are not UTF-8, a blob, a
    NULL) is written back as it was by the migration, not read into text: the values check
    finds it and the index is rebuilt, and the recall answers."""
    with MemoryService(tmp_home) as svc:
        _full(svc)
        index = svc.settings.index_path
    _previous_schema(index, damage)
    with MemoryService(tmp_home) as svc:
        hits = svc.recall("kettle whistles", stores=["global"], mode="keyword").hits
        assert [h.text for h in hits][:1] and OTHERS[0] in hits[0].text


TURKISH = "İstanbul ofisi pazartesi kapalı."
NFC_CAFE = unicodedata.normalize("NFC", "The café on the corner roasts its own beans.")
NFD_CAFE = unicodedata.normalize("NFD", "The crème brûlée at the bistro is made daily.")


@pytest.mark.parametrize("backend", ["ripgrep", "python"])
@pytest.mark.parametrize(
    ("query", "which"),
    [
        ("istanbul", 0),
        ("İSTANBUL", 0),
        (unicodedata.normalize("NFD", "café"), 1),
        (unicodedata.normalize("NFD", "CAFÉ"), 1),
        (unicodedata.normalize("NFC", "crème brûlée"), 2),
        (unicodedata.normalize("NFC", "brûlée"), 2),
    ],
)
def test_grep_meets_other_unicode_forms(tmp_home: Path, backend: str, query: str, which: int) -> None:
    """grep compared the query's code points with the file's, lowercased: ``istanbul`` missed
    ``İstanbul`` (its lowercase is ``i`` and a combining dot), a composed ``café`` missed a
    decomposed one and the reverse. Both backends now agree on the folded, composed forms."""
    with MemoryService(settings=Settings.load(tmp_home, grep_backend=backend)) as svc:
        ids = [svc.remember(text, store="global").fact.id for text in (TURKISH, NFC_CAFE, NFD_CAFE)]
        svc.remember("The kettle whistles at dawn.", store="global")
        hits = svc.recall(query, stores=["global"], mode="grep").hits
        assert [h.id for h in hits] == [ids[which]], (query, [h.text for h in hits])
        assert hits[0].text == (TURKISH, NFC_CAFE, NFD_CAFE)[which]


def test_a_postgresql_index_of_the_previous_schema_is_migrated(
    pg_url: str, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PostgreSQL index whose substrings were searched in the text as written (schema 5) gains
    the NFKC form of its rows when a process opens it: the full-width fragment is found."""
    import psycopg

    monkeypatch.setenv("COFFER_PG_URL", pg_url)
    settings = Settings.load(tmp_home, index={"backend": "postgresql"})
    with MemoryService(settings=settings) as svc:
        wanted = _full(svc)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP INDEX IF EXISTS coffer_chunks_searched")
        conn.execute("ALTER TABLE coffer_chunks DROP COLUMN IF EXISTS searched")
        conn.execute(
            "CREATE INDEX IF NOT EXISTS coffer_chunks_trigrams ON coffer_chunks USING gin (text gin_trgm_ops)"
        )
        conn.execute("UPDATE coffer_meta SET value = '5' WHERE key = 'schema_version'")
    with MemoryService(settings=settings) as svc:
        hits = svc.recall("fullw", stores=["global"], mode="keyword").hits
        assert [h.id for h in hits][:1] == [wanted]
        assert FULL in hits[0].text
