"""Vectors in PostgreSQL through pgvector: the rows a sync writes and the nearest-neighbour query.

A vector travels as a ``float8[]`` in psycopg's binary format and is cast to ``vector`` by the
server (pgvector's array cast), so no adapter package is needed and no float is printed as text.

The column is untyped (models of several widths share it), so each (model, width) gets its own
partial HNSW index over ``embedding::vector(width)``, built once its first vectors are in
(``ensure_index``), and the query names the same expression and predicate with the model as a
literal (a parameter would not match a partial index under a generic plan). With pgvector 0.8
or later the scan is iterative, so a store, tag or time filter still gets ``k`` rows; an older
pgvector gets no index and every search is an exact scan.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from ...plugins.hookspecs import IndexedDoc, Vector

log = logging.getLogger("coffer_memory.postgresql")
Conn = psycopg.Connection[Any]
# pgvector's iterative index scans (filters applied while walking the graph) came in 0.8.0.
ITERATIVE_SINCE = (0, 8, 0)
BUILD_MEMORY = "1GB"  # the most an HNSW build may hold (see ``ensure_index``)
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
    count = sum(len(d.vectors.rows) for d in docs if d.vectors is not None)
    # A generator: a first fill of 100k documents as lists of Python floats would take gigabytes.
    rows = (
        (store, d.path, d.vectors.model, d.vectors.dimensions, position, part, floats(vector))
        for d in docs
        if d.vectors is not None
        for position, part, vector in d.vectors.rows
    )
    if count:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO coffer_vectors (store, path, model, dimensions, position, part, embedding) "
                "VALUES (%s, %s, %s, %s, %s, %s, %b::vector) ON CONFLICT DO NOTHING",
                rows,
            )
    return count


def version(conn: Conn) -> tuple[int, ...]:
    """The installed pgvector's version, as numbers (``(0, 8, 2)``)."""
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    return tuple(int(p) for p in str(row[0]).split(".") if p.isdigit()) if row else ()


def _width(dimensions: int) -> sql.Composable:
    return sql.SQL(str(int(dimensions)))  # a type modifier: a number in the text, never a parameter


def _predicate(model: str, dimensions: int) -> sql.Composed:
    return sql.SQL("v.model = {} AND v.dimensions = {}").format(sql.Literal(model), _width(dimensions))


def index_name(model: str, dimensions: int) -> str:
    """The HNSW index of one (model, width): ``coffer_vectors_hnsw_<12 hex>``."""
    return "coffer_vectors_hnsw_" + hashlib.sha256(f"{model}\x00{dimensions}".encode()).hexdigest()[:12]


def ensure_index(conn: Conn, model: str, dimensions: int) -> bool:
    """Build the HNSW index of (model, width) if it is missing or a failed build left it invalid;
    False while another session builds it (the caller searches without it meanwhile).

    Called on the read path, never under a store's write lock: ``CONCURRENTLY`` waits for the
    transactions open at its start, and one of them may be waiting for that lock. Writes by
    other processes go on during the build. A failure (no right to index a table another role
    owns) is logged and searches stay exact scans.
    """
    name = index_name(model, dimensions)
    (key,) = conn.execute("SELECT hashtextextended(%s, 0)", (name,)).fetchone() or (0,)
    (mine,) = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone() or (False,)
    if not mine:
        return False
    try:
        row = conn.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = %s",
            (name,),
        ).fetchone()
        if row is not None and row[0]:
            return True
        if row is not None:
            conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
        # pgvector builds far faster while the graph fits in maintenance_work_mem (64 MB by
        # default: about 30k vectors of 384 floats; 100k took 582 s here). Raised for this
        # session's build only, never lowered; the memory is taken as the graph grows.
        conn.execute(
            "SELECT set_config('maintenance_work_mem', %s, false) "
            "WHERE pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes(%s)",
            (BUILD_MEMORY, BUILD_MEMORY),
        )
        conn.execute(
            sql.SQL(
                "CREATE INDEX CONCURRENTLY {} ON coffer_vectors USING hnsw "
                "((embedding::vector({})) vector_cosine_ops) WHERE model = {} AND dimensions = {}"
            ).format(sql.Identifier(name), _width(dimensions), sql.Literal(model), _width(dimensions))
        )
        log.info("built the HNSW index of %s (%d dimensions)", model, dimensions)
    except psycopg.DatabaseError as exc:
        log.warning("no HNSW index for %s (%s): vector recall scans every vector", model, exc)
    finally:
        conn.execute("RESET maintenance_work_mem")
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
    return True


def nearest_sql(
    store: str, vector: list[float], model: str, k: int, only: Only
) -> tuple[str, tuple[Any, ...]]:
    """The query of ``nearest_chunks`` and its parameters."""
    where, params = only
    return _nearest_text(model, len(vector), where), (vector, store, *params, k, store, store)


@functools.lru_cache(maxsize=64)
def _nearest_text(model: str, dimensions: int, where: str) -> str:
    """The query's text for one model, width and filter shape (rendered once: composing it took
    as long as the search on a small store, and a string lets psycopg reuse its parse)."""
    join = " JOIN coffer_documents d ON d.store = v.store AND d.path = v.path" if where else ""
    width = _width(dimensions)
    # The nearest rows alone first (MATERIALIZED: the index scan runs once, with its LIMIT),
    # then their documents and chunk texts (as for words).
    query = sql.SQL(
        "WITH top AS MATERIALIZED (SELECT v.path, v.position, "
        "v.embedding::vector({width}) <=> %b::vector({width}) AS distance "
        "FROM coffer_vectors v{join} WHERE {predicate} AND v.store = %s{where} "
        "ORDER BY distance LIMIT %s) "
        "SELECT d.id, d.path, d.title, d.updated_at, c.text, 1 - top.distance FROM top "
        "JOIN coffer_documents d ON d.store = %s AND d.path = top.path "
        "JOIN coffer_chunks c ON c.store = %s AND c.path = top.path AND c.position = top.position "
        "ORDER BY top.distance, top.path, top.position"
    ).format(
        width=width,
        join=sql.SQL(join),
        predicate=_predicate(model, dimensions),
        where=sql.SQL(where),
    )
    return query.as_string(None)


def iterate(conn: Conn) -> None:
    """Let HNSW scans of this session go on past ``hnsw.ef_search`` rows until the filters are met
    (relaxed order: the outer ORDER BY of ``nearest_sql`` sorts the few rows again). Set once per
    connection: per query it took a transaction and two more round trips."""
    conn.execute("SET hnsw.iterative_scan = relaxed_order")


def nearest_chunks(
    conn: Conn, store: str, vector: list[float], model: str, k: int, only: Only
) -> list[tuple[Any, ...]]:
    """The ``k`` vector rows of ``store`` and ``model`` nearest ``vector`` (cosine distance),
    as (id, path, title, updated_at, chunk text, 1 - distance), nearest first."""
    query, args = nearest_sql(store, vector, model, k, only)
    return conn.execute(query, args).fetchall()
