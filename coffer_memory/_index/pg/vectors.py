"""Vectors in PostgreSQL through pgvector: the rows a sync writes and the nearest-neighbour query.

A vector travels as a ``float8[]`` in psycopg's binary format and is cast to ``vector`` by the
server (pgvector's array cast), so no adapter package is needed and no float is printed as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from ...plugins.hookspecs import IndexedDoc, Vector

Conn = psycopg.Connection[Any]
# A filter's SQL (" AND ..." over documents ``d``) and its parameters.
Only = tuple[str, list[object]]


def floats(vector: Vector) -> list[float]:
    """``vector`` as a list of Python floats (what psycopg dumps as ``float8[]``)."""
    tolist = getattr(vector, "tolist", None)
    return list(tolist()) if callable(tolist) else [float(x) for x in vector]


def embedded(conn: Conn, store: str, paths: Sequence[str]) -> set[tuple[str, str]]:
    """The (path, model) pairs of ``paths`` that hold vectors."""
    rows = conn.execute(
        "SELECT DISTINCT path, model FROM coffer_vectors WHERE store = %s AND path = ANY(%s)",
        (store, list(paths)),
    )
    return {(str(p), str(m)) for p, m in rows.fetchall()}


def insert(conn: Conn, store: str, docs: Sequence[IndexedDoc]) -> int:
    """Write the vectors of ``docs`` (those that carry some); how many rows."""
    rows = [
        (store, d.path, d.vectors.model, d.vectors.dimensions, position, part, floats(vector))
        for d in docs
        if d.vectors is not None
        for position, part, vector in d.vectors.rows
    ]
    if rows:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO coffer_vectors (store, path, model, dimensions, position, part, embedding) "
                "VALUES (%s, %s, %s, %s, %s, %s, %b::vector) ON CONFLICT DO NOTHING",
                rows,
            )
    return len(rows)


def nearest_chunks(
    conn: Conn, store: str, vector: list[float], model: str, k: int, only: Only
) -> list[tuple[Any, ...]]:
    """The ``k`` vector rows of ``store`` and ``model`` nearest ``vector`` (cosine distance),
    as (id, path, title, updated_at, chunk text, 1 - distance), nearest first."""
    where, params = only
    join = " JOIN coffer_documents d ON d.store = v.store AND d.path = v.path" if where else ""
    # The nearest rows alone first, then their documents and chunk texts (as for words).
    sql = (
        "WITH top AS (SELECT v.path, v.position, v.embedding <=> %b::vector AS distance "
        f"FROM coffer_vectors v{join} WHERE v.store = %s AND v.model = %s AND v.dimensions = %s{where} "
        "ORDER BY distance LIMIT %s) "
        "SELECT d.id, d.path, d.title, d.updated_at, c.text, 1 - top.distance FROM top "
        "JOIN coffer_documents d ON d.store = %s AND d.path = top.path "
        "JOIN coffer_chunks c ON c.store = %s AND c.path = top.path AND c.position = top.position "
        "ORDER BY top.distance, top.path, top.position"
    )
    args = (vector, store, model, len(vector), *params, k, store, store)
    return conn.execute(sql, args).fetchall()
