"""The shape of the index's schema: the migrations' tables are there, the virtual ones virtual, each
with the SQL the migrations give it, and no trigger or index is there but the migrations' own.

``IndexDB`` checks it once per open, from the ``sqlite_master`` rows it reads anyway (no extra
query but the vector tables' names), and again only when a statement fails with an
``SQLError`` (``db._Connection``) or ``coffer doctor`` asks. Another program's hand in
``index.db`` (a word index made a plain table, a view in its place, one of its own tables
dropped) otherwise reached the user as a raw ``SQLError`` on every keyword recall, while the
file passed every other check: such a file is moved aside and rebuilt, as a damaged one is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import apsw

from .migrations import SCHEMA_VERSION
from .shadows import own_problem, squeezed, table_sql

# The FTS5 tables, each with the schema version whose migration made it.
FTS_TABLES: Mapping[str, int] = {"documents_fts": 1, "documents_words": 4}
# The plain tables every read or write may touch, likewise (a missing one failed the statement
# that touched it, a raw ``no such table``, where the rest of the file passed).
PLAIN_TABLES: Mapping[str, int] = {
    "documents": 1,
    "chunks": 1,
    "memory_store_project_roots": 1,
    "memory_store_labels": 1,
    "store_state": 1,
    "vec_stores": 2,
    "broken_files": 3,
    "kv": 3,
    "document_tags": 7,
    "audit_events": 1,  # rows moved to audit/ (``_indexing._import_legacy_audit``); the table stays
}
# The tables FTS5 keeps for each of its tables whatever its options (content and docsize vary).
FTS_SHADOWS = ("_data", "_idx", "_config")
# Every trigger and index the migrations make, with its SQL as ``sqlite_master`` keeps it, spaces
# squeezed (SQLite's own ``sqlite_autoindex_*`` aside; FTS5 and vec0 make none). Any other acts on
# the index's writes for another program: a trigger that aborted them failed every reconcile with a
# raw ``ConstraintError``, one that answered RAISE(IGNORE) dropped them without a word, a unique
# index refused a second row. So does one made under an own name in the place of the migrations'
# (dropped, then made again to abort inserts, or unique): the SQL is compared, not only the name.
# ``tests/test_attack_left_open2.py`` checks these against a freshly made index.
TRIGGERS: Mapping[str, str] = {
    "documents_drop_tags": "CREATE TRIGGER documents_drop_tags AFTER DELETE ON documents BEGIN "
    "DELETE FROM document_tags WHERE document_rowid = old.rowid; END",
}
INDEXES: Mapping[str, str] = {
    "idx_documents_kind_res_time": "CREATE INDEX idx_documents_kind_res_time ON "
    "documents(kind, resource_name, updated_at DESC)",
    "idx_documents_project": "CREATE INDEX idx_documents_project ON documents(project_id)",
    "idx_documents_path": "CREATE UNIQUE INDEX idx_documents_path ON documents(resource_name, path)",
    "idx_chunks_document": "CREATE INDEX idx_chunks_document ON chunks(document_id)",
    "idx_audit_store": "CREATE INDEX idx_audit_store ON audit_events(store, id)",
    "idx_documents_pending": "CREATE INDEX idx_documents_pending ON documents(resource_name) "
    "WHERE content_sha256 = ''",
    "idx_document_tags_document": "CREATE INDEX idx_document_tags_document ON document_tags(document_rowid)",
    "idx_documents_session": "CREATE INDEX idx_documents_session ON documents(resource_name, origin_session, "
    "id) WHERE origin_session IS NOT NULL",
}


# The SQL of each of the index's tables, as the migrations leave it at ``SCHEMA_VERSION`` (SQLite
# keeps a table's ``CREATE`` text, ``ADD COLUMN`` edits it): ``table_sql``'s CRC-32. Another
# program's constraint written into it (a ``CHECK`` through ``PRAGMA writable_schema``, the table
# made again with a ``UNIQUE``) refused the index's writes with a raw ``ConstraintError`` while
# every other check passed. FTS5's own tables are left out: SQLite's version that made them says
# their SQL. ``tests/test_attack_left_open3.py`` checks these against a freshly made index.
TABLE_SQL: Mapping[str, int] = {
    "documents": 0xB5B2A326,
    "chunks": 0x5EB5B863,
    "memory_store_project_roots": 0x67092E2B,
    "memory_store_labels": 0xE57E92D9,
    "store_state": 0x7F048DB2,
    "vec_stores": 0xE104280D,
    "broken_files": 0x8DBC433A,
    "kv": 0xE249BD47,
    "document_tags": 0xE4133108,
    "audit_events": 0x56C3B4C0,
    "documents_fts": 0x14EEB15B,
    "documents_words": 0xE20D2523,
}


def _virtual(sql: str | None, module: str) -> bool:
    words = (sql or "").split(None, 6)
    return (
        len(words) >= 6
        and [w.upper() for w in words[:3]] == ["CREATE", "VIRTUAL", "TABLE"]
        and words[4].upper() == "USING"
        and words[5].lower().startswith(module)
    )


def planted(objects: Iterable[tuple[str, str, str, str | None]]) -> str | None:
    """The triggers and indexes among ``objects`` (``sqlite_master``'s type, name, table and SQL)
    that the index does not make, said as a problem; None when there are none."""
    own = {"trigger": TRIGGERS, "index": INDEXES}
    found = sorted(
        f"{kind} {name} on {on}"
        for kind, name, on, sql in objects
        if not (kind == "index" and name.startswith("sqlite_autoindex_"))
        and own[kind].get(name) != squeezed(sql)
    )
    return f"another program's {', '.join(found)} (the index makes no such object)" if found else None


def schema_problem(
    tables: Mapping[str, str | None],
    version: int,
    vec_tables: Mapping[str, object],
    objects: Iterable[tuple[str, str, str, str | None]] = (),
) -> str | None:
    """What is wrong with the shape of an index of schema ``version``, or None.

    ``tables``: each table's name and SQL from ``sqlite_master`` (views left out); ``vec_tables``:
    the per-store vector tables ``vec_stores`` names, with their dimensions; ``objects``: its other rows (type, name,
    table, SQL), for triggers and indexes another program planted (``planted``)."""
    missing = [n for n, since in PLAIN_TABLES.items() if version >= since and n not in tables]
    if missing:
        return f"tables missing: {', '.join(missing)}"
    for name, since in FTS_TABLES.items():
        if version < since:
            continue
        if name not in tables:
            return f"table missing: {name}"
        if not _virtual(tables[name], "fts5"):
            return f"{name} is a plain table, not the FTS5 index the schema makes"
        missing = [name + s for s in FTS_SHADOWS if name + s not in tables]
        if missing:
            return f"tables missing: {', '.join(missing)} (FTS5's own tables for {name})"
    vec = {name: vec_tables[name] for name in sorted(vec_tables.keys() & tables.keys())}
    for name in vec:
        if not _virtual(tables[name], "vec0"):
            return f"{name} is a plain table, not the vec0 index the schema makes"
    if version == SCHEMA_VERSION:  # an older file's tables are the older migrations' (migrated after)
        changed = [n for n, crc in TABLE_SQL.items() if table_sql(tables.get(n)) != crc]
        if changed:
            return (
                f"the SQL of {', '.join(changed)} is not the one the schema makes "
                "(another program changed the table: a constraint added, say)"
            )
    fts = {name: tables[name] for name, since in FTS_TABLES.items() if version >= since}
    return own_problem(tables, fts, vec) or planted(objects)


def schema_rows(
    rows: Iterable[tuple[Any, ...]],
) -> tuple[dict[str, str | None], list[tuple[str, str, str, str | None]]]:
    """``sqlite_master``'s rows (type, name, table, SQL) as the tables' SQL by name, and the
    (type, name, table, SQL) of the triggers and indexes."""
    tables: dict[str, str | None] = {}
    objects: list[tuple[str, str, str, str | None]] = []
    for kind, name, on, sql in rows:
        if kind == "table":
            tables[str(name)] = sql
        elif kind in ("trigger", "index"):
            objects.append((str(kind), str(name), str(on), None if sql is None else str(sql)))
    return tables, objects


def vec_tables(conn: apsw.Connection) -> dict[str, object]:
    """The per-store vector tables ``vec_stores`` names, with their dimensions (read past
    ``db._Connection``'s checks)."""
    rows = apsw.Connection.execute(conn, "SELECT table_name, dimensions FROM vec_stores")
    return {str(name): dimensions for name, dimensions in rows}


def read_schema_problem(conn: apsw.Connection) -> str | None:
    """What another program changed in the schema of the index open on ``conn``, or None (and
    None when SQLite cannot read it: damage is noted where a read meets it)."""
    try:
        version = int(apsw.Connection.execute(conn, "PRAGMA user_version").fetchall()[0][0] or 0)
        rows = apsw.Connection.execute(conn, "SELECT type, name, tbl_name, sql FROM sqlite_master")
        tables, objects = schema_rows(rows)
        vec = vec_tables(conn) if "vec_stores" in tables else {}
    except apsw.Error:
        return None
    return schema_problem(tables, version, vec, objects) if version else None
