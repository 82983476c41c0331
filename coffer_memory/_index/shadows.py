"""The SQL of the tables FTS5 and vec0 keep for coffer's virtual tables (``documents_fts_data``,
``vec_chunks_<scope>_rowids``, ...), and of each store's vec0 table itself.

FTS5 and sqlite-vec write those tables' SQL themselves, so ``shape.TABLE_SQL`` left them out, and
a constraint another program wrote into one (``PRAGMA writable_schema``, or the table made again)
refused the index's writes with a raw ``ConstraintError`` while every check passed; a store's
vec0 table made again with other dimensions than ``vec_stores`` records failed each vector write.

Each own table's SQL (its owner's name put aside) is compared with what this SQLite and
sqlite-vec write (``OWN_SQL``, CRC-32s as ``shape.table_sql`` makes them): about 0.4 µs a table at
open. Another SQLite or sqlite-vec may write other text for the same declarations (an upgrade): a
text not in ``OWN_SQL`` is then compared with what this process's SQLite makes for the owner's
declaration in a fresh in-memory database (once per process and declaration, about 1 ms), and
passes unless it holds a constraint word that one does not (``CHECK``, ``UNIQUE``, ``NOT NULL``,
...) or its columns are not that one's, by name and in order (``columns``: a column another
program added or dropped with no constraint word passed, and FTS5 read rows of another layout
than its own). An upgrade that writes the same tables' SQL otherwise does not make every index
look damaged; a constraint or a column another program adds is found either way (an upgrade
that changed an own table's columns would have the file rebuilt once, by this SQLite).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import zlib
from collections import Counter
from collections.abc import Mapping

import apsw

# A store's vec0 table, as ``vec.VecIndex`` makes it.
VEC_TABLE = (
    "CREATE VIRTUAL TABLE {table} USING vec0(chunk_id TEXT PRIMARY KEY, embedding float[{dimensions}] "
    "distance_metric=cosine)"
)
VEC_OWNER = "vec0"  # the name a vec0 table's own tables are compared under (``own_key``)
# The CRC-32 (``shape.table_sql``) of the SQL of each own table, by its name with the owner's put
# as ``documents_fts``/``documents_words`` (themselves) or ``vec0``. ``tests/test_attack_shadow_tables.py``
# checks these against a freshly made index.
OWN_SQL: Mapping[str, int] = {
    "documents_fts_data": 0xB114777B,
    "documents_fts_idx": 0x88E0D953,
    "documents_fts_content": 0x489F058A,
    "documents_fts_docsize": 0xF1ED0A40,
    "documents_fts_config": 0x47298BE8,
    "documents_words_data": 0xB88DBF18,
    "documents_words_idx": 0xCF886BD0,
    "documents_words_docsize": 0xD02F378B,
    "documents_words_config": 0xAC1D00D4,
    "vec0_info": 0xE1DFC62D,
    "vec0_chunks": 0xFCD6DE52,
    "vec0_rowids": 0x116A7AE4,
    "vec0_vector_chunks00": 0x70E45965,
}
# Words that make a column or a table refuse a row.
CONSTRAINT_WORDS = frozenset(
    {"CHECK", "UNIQUE", "NOT", "NULL", "REFERENCES", "FOREIGN", "DEFAULT", "COLLATE", "GENERATED"}
    | {"CONSTRAINT", "CONFLICT", "PRIMARY", "AUTOINCREMENT", "STRICT"}
)
_WORD = re.compile(r"[A-Za-z_]+")


def squeezed(sql: str | None) -> str:
    """``sql`` with every run of white space one space, as ``TRIGGERS`` and ``INDEXES`` hold it."""
    return " ".join((sql or "").split())


def table_sql(sql: str | None) -> int:
    """A table's ``CREATE`` text as ``TABLE_SQL`` holds it: the CRC-32 of its bytes but white space
    (its layout, which an older coffer-memory's migrations may have indented otherwise; about
    0.4 µs a table, where splitting it into words took 1 µs)."""
    return zlib.crc32((sql or "").encode().translate(None, b" \t\n\r"))


def own_key(owner: str, name: str, vec: bool) -> str:
    """``OWN_SQL``'s key of ``owner``'s own table ``name``."""
    return VEC_OWNER + name[len(owner) :] if vec else name


def own_text(owner: str, sql: str | None, vec: bool) -> str:
    """An own table's SQL with its owner's name put as ``OWN_SQL`` has it (a vec0 table's name
    is the store's)."""
    return (sql or "").replace(owner, VEC_OWNER) if vec else sql or ""


def constraints(sql: str | None) -> Counter[str]:
    """The constraint words of ``sql`` (upper case), counted."""
    return Counter(w for w in _WORD.findall((sql or "").upper()) if w in CONSTRAINT_WORDS)


def _sqlite_vec(conn: apsw.Connection) -> bool:
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        return False
    conn.enable_load_extension(True)
    conn.load_extension(os.path.join(next(iter(spec.submodule_search_locations)), "vec0"))
    return True


@functools.lru_cache(maxsize=16)
def made(owner: str, sql: str, vec: bool) -> dict[str, str | None] | None:
    """What this process's SQLite (and sqlite-vec) write for the own tables of ``owner`` made by
    ``sql``, by ``own_key``; None when it cannot make it (no sqlite-vec here), or will not: ``sql``
    comes from the file (FTS5's) or holds what ``vec_stores`` says, and only one statement
    declaring a table of a plain name is run (apsw runs each statement of a text)."""
    if ";" in sql or not owner.isidentifier():
        return None
    conn = apsw.Connection(":memory:")
    try:
        if vec and not _sqlite_vec(conn):
            return None
        conn.execute(sql)
        rows = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name LIKE ? || '\\_%' ESCAPE '\\'",
            (owner,),
        )
        return {own_key(owner, str(n), vec): own_text(owner, s, vec) for n, s in rows}
    except apsw.Error:
        return None
    finally:
        conn.close()


@functools.lru_cache(maxsize=64)
def columns(sql: str) -> tuple[str, ...] | None:
    """The names of the columns ``sql`` declares, in order, as SQLite reads them (the table made
    in a fresh in-memory database, once per process and text); None when ``sql``
    is no lone ``CREATE TABLE`` of columns (``AS SELECT`` would run a query) or SQLite refuses it."""
    words = sql.split(None, 3)
    if ";" in sql or [w.upper() for w in words[:2]] != ["CREATE", "TABLE"] or "SELECT" in _words(sql):
        return None
    conn = apsw.Connection(":memory:")
    try:
        conn.execute(sql)
        made = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        if len(made) != 1:  # a virtual table's own tables beside it, say: no plain table's text
            return None
        rows = conn.execute("SELECT name FROM pragma_table_info(?)", (made[0][0],))
        return tuple(str(name) for (name,) in rows)
    except apsw.Error:
        return None
    finally:
        conn.close()


def _words(sql: str) -> set[str]:
    return {w.upper() for w in _WORD.findall(sql)}


def own_problem(
    tables: Mapping[str, str | None], owners: Mapping[str, str | None], vec_owners: Mapping[str, object]
) -> str | None:
    """The own tables of ``owners`` (FTS5 tables by name, with their SQL) and ``vec_owners``
    (vec0 tables by name, with their dimensions) whose SQL another program changed, and any vec0
    table whose SQL is not the one its dimensions give, said as a problem; None when there are none.
    ``tables``: every table's SQL by name."""
    odd: list[str] = []
    for table, dimensions in vec_owners.items():
        if type(dimensions) is not int or squeezed(tables.get(table)) != VEC_TABLE.format(
            table=table, dimensions=dimensions
        ):
            odd.append(f"{table} (not the vec0 table of {dimensions} dimensions that vec_stores records)")
    prefixes = tuple(f"{owner}_" for owner in (*owners, *vec_owners))
    for name, sql in tables.items():
        if not name.startswith(prefixes):  # most tables: one call
            continue
        owner = next(o for o in (*owners, *vec_owners) if name.startswith(f"{o}_"))
        vec = owner in vec_owners
        key, text = own_key(owner, name, vec), own_text(owner, sql, vec)
        if table_sql(text) == OWN_SQL.get(key):
            continue
        declared = VEC_TABLE.format(table=owner, dimensions=vec_owners[owner]) if vec else owners[owner]
        fresh = made(owner, declared or "", vec)
        if fresh is None:  # nothing to compare with, left to the statements that meet it
            continue
        own = fresh.get(key)
        if constraints(text) - constraints(own) or (own is not None and columns(text) != columns(own)):
            odd.append(name)
    if odd:
        return (
            f"the SQL of {', '.join(odd)} is not what FTS5 or vec0 makes "
            "(another program changed the table: a constraint added, say)"
        )
    return None
