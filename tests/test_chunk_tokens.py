"""Each chunk's tokens stored beside it (``chunks.tokens``, SQLite schema 12): a keyword recall
counts coverage in them instead of tokenizing its candidates' texts, and answers as when it
tokenized them. Real homes, real SQLite files; another program's hand in ``index.db`` with apsw.
Each test here failed before the column (the first ones on a recall that tokenized every new
candidate, the migration's on an index with no such column).
"""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from coffer_memory import MemoryService
from coffer_memory._index import coverage, fts, snapshot
from coffer_memory._index.migrations import SCHEMA_VERSION
from coffer_memory._index.values import values_problem
from coffer_memory._models import MemoryHit

TEXTS = [
    "Deploying the servers: run the migrations first, then restart the workers.",
    "The redis cache is flushed nightly; the deploy script warms it again.",
    "ｆｕｌｌｗｉｄｔｈ notes about ｄｏｃｋｅｒ ports and the deploy of workers",
    "部署前必须先运行数据库迁移，然后清空 redis 缓存。",
    "Café crème brûlée at the bistro, served before the deploy party.",
    "Backups of the db pool run at night; restore drills happen monthly.",
    "The kettle whistles at dawn.",
]
QUERIES = [
    "deploy workers",
    "redis cache deploy",
    "docker ports deploy",
    "部署 迁移",
    "redis 缓存",
    "creme brulee deploy",
    "db pool backups night",
    "deploy",
    "kettle dawn whistles",
]


def _remember(svc: MemoryService) -> None:
    for i, text in enumerate(TEXTS):
        svc.remember(text, title=f"fact {i}", store="global")


def _answers(svc: MemoryService) -> list[list[tuple[str, str, float]]]:
    out = []
    for query in QUERIES:
        hits: tuple[MemoryHit, ...] = svc.recall(query, stores=["global"], mode="keyword", limit=5).hits
        out.append([(h.id, h.text, h.score) for h in hits])
    return out


def _stored(index: Path) -> dict[int, object]:
    conn = apsw.Connection(str(index))
    try:
        return dict(conn.execute("SELECT rowid, tokens FROM chunks").fetchall())
    finally:
        conn.close()


def test_a_recall_tokenizes_no_candidate_whose_tokens_the_index_keeps(tmp_home: Path) -> None:
    """The recall's coverage is counted in the stored tokens: no text is tokenized for it (every
    re-scored candidate was, before), and the hits are those of an index without them."""
    with MemoryService(tmp_home) as svc:
        _remember(svc)
        coverage._words_cache.clear()  # the texts tokenized, by text (``coverage._compared``)
        found = _answers(svc)
        assert not coverage._words_cache
    conn = apsw.Connection(str(tmp_home / "index.db"))
    conn.execute("UPDATE chunks SET tokens = NULL")  # an index that lacks them: texts tokenized
    conn.close()
    with MemoryService(tmp_home) as svc:
        assert _answers(svc) == found
        assert coverage._words_cache
        with snapshot.reading(svc.index.retrieval.db) as kept:
            assert kept.get(fts._COVERAGE)


def test_an_index_with_tokens_for_some_chunks_only_answers_the_same(tmp_home: Path) -> None:
    """Rows with stored tokens beside rows without (an index written by two versions): coverage
    counts the first in their tokens and tokenizes the others, with the answers of both ways."""
    with MemoryService(tmp_home) as svc:
        _remember(svc)
        found = _answers(svc)
    conn = apsw.Connection(str(tmp_home / "index.db"))
    conn.execute("UPDATE chunks SET tokens = NULL WHERE rowid % 2 = 0")
    conn.close()
    coverage._words_cache.clear()
    with MemoryService(tmp_home) as svc:
        assert _answers(svc) == found
        assert coverage._words_cache  # the rows without were tokenized


def test_stored_tokens_are_the_tokens_coverage_compares() -> None:
    """``stored_tokens`` holds the tokens ``_compared`` makes of a text, in order, with a space at
    each end; a text without tokens stores a space."""
    tokenize = coverage._tokenizer()
    for text in [*TEXTS, "", "   ", "…", "ＡＢＣ１２３ ＡＢＣ１２３"]:
        coverage._words_cache.clear()
        ((_, words),) = coverage._compared(tokenize, [text])
        stored = coverage.stored_tokens(text)
        assert stored[:1] == " " == stored[-1:]
        assert list(dict.fromkeys(stored.split(" ")[1:-1])) == list(words)  # in the order met
        assert coverage._from_stored(text, stored) == coverage._compared(tokenize, [text])[0]


def test_an_index_of_schema_11_is_migrated_in_place_and_answers_the_same(tmp_home: Path) -> None:
    """An index of the previous schema (no ``tokens`` column) gains it on open, each chunk's
    tokens as a write of this version stores them, without a rebuild; the answers are the same."""
    with MemoryService(tmp_home) as svc:
        _remember(svc)
        found = _answers(svc)
    index = tmp_home / "index.db"
    written = _stored(index)
    assert all(isinstance(v, str) for v in written.values()) and len(written) == len(TEXTS)
    conn = apsw.Connection(str(index))
    with conn:
        conn.execute("ALTER TABLE chunks DROP COLUMN tokens")
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION - 1}")
        conn.execute("INSERT INTO kv (key, value) VALUES ('kept-by-migration', '1')")
    conn.close()
    coverage._words_cache.clear()
    with MemoryService(tmp_home) as svc:
        assert _answers(svc) == found
    assert _stored(index) == written
    conn = apsw.Connection(str(index))
    try:  # migrated in place: the file's own rows are there (a rebuild makes a new file)
        assert conn.execute("SELECT value FROM kv WHERE key = 'kept-by-migration'").fetchall() == [("1",)]
        assert conn.execute("PRAGMA user_version").fetchall() == [(SCHEMA_VERSION,)]
    finally:
        conn.close()


# Another program's value, and whether it is damage (else text: the column's TEXT affinity makes a
# number text).
VALUES = [
    ("x'00ff'", True),
    ("CAST(x'6b657474ff' AS TEXT)", True),
    ("7", False),
    ("'zzz'", False),
    ("''", False),
]


@pytest.mark.parametrize(("value", "damage"), VALUES)
def test_another_programs_value_in_chunks_tokens(tmp_home: Path, value: str, damage: bool) -> None:
    """A value another program wrote into ``chunks.tokens``: a blob or bytes that are not UTF-8 are
    found by the values check (the index is rebuilt from the files), text that is not tokens as
    the index writes them is left unused (the chunk is tokenized); either way the recall answers
    as before, never with a raw error."""
    with MemoryService(tmp_home) as svc:
        _remember(svc)
        found = _answers(svc)
        conn = apsw.Connection(str(tmp_home / "index.db"))
        conn.execute(f"UPDATE chunks SET tokens = {value}")
        problem = values_problem(conn)
        conn.close()
        assert (problem is not None) == damage, problem
        assert problem is None or "chunks.tokens" in problem
        assert _answers(svc) == found
    stored = _stored(tmp_home / "index.db")
    if damage:  # rebuilt: the tokens are the index's own again
        assert all(isinstance(v, str) and v[:1] == " " for v in stored.values())
