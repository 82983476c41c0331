"""The physical limit beside coffer: the same texts, the same SQLite, interleaved in one run.

For each size a fresh temporary home and git repository get the bench's fact files (written as
coffer renders them, half to the project store, half to the global store). Then, alternating
call by call so that load on a shared machine hits both sides alike:

- **keyword recall** (in-process): ``MemoryService.recall(mode="keyword")`` from the repository
  (git lookup, fast-path reconcile of both stores, search, hits) against the limit: one bm25
  MATCH of the same query terms on a plain FTS5 table of the same texts (the same tokenizer as
  coffer's word index) plus one query for the matched texts;
- **cold rebuild from files**: ``MemoryService.reindex()`` after deleting ``index.db`` against
  the limit: read every file, cut the frontmatter, insert one row per file into each of the
  tables coffer fills (its own schema, read from its index: documents, chunks and the word
  and trigram FTS5 tables, with their indexes) in one transaction.

Printed: median and p95 of each side and the ratios coffer / limit. ``--coffer-src DIR`` takes
``coffer_memory`` from another source tree (e.g. an older commit from ``git archive``), so
before and after are two runs of this script, each with its own limit beside it.

    .venv/bin/python bench/limit.py [--sizes 1000,10000] [--queries 200] [--rebuilds 3]
        [--coffer-src DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any


def _early_source() -> None:
    """Put ``--coffer-src`` first on sys.path before anything imports coffer_memory."""
    for i, arg in enumerate(sys.argv):
        if arg == "--coffer-src" and i + 1 < len(sys.argv):
            sys.path.insert(0, os.path.abspath(sys.argv[i + 1]))
        elif arg.startswith("--coffer-src="):
            sys.path.insert(0, os.path.abspath(arg.split("=", 1)[1]))


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apsw  # noqa: E402
from _common import environment, percentile, print_environment, table, write_json  # noqa: E402

_early_source()  # after _common, which puts this checkout first on sys.path

from core import SEED, fact_text, fact_title, make_queries  # noqa: E402

import coffer_memory  # noqa: E402
from coffer_memory import MemoryService, Settings  # noqa: E402
from coffer_memory._index.fts import keyword_terms  # noqa: E402
from coffer_memory._models import MemoryFact  # noqa: E402
from coffer_memory._store.files import render_fact  # noqa: E402
from coffer_memory._store.paths import GLOBAL_STORE, slugify  # noqa: E402

LIMIT = 10
FETCH = LIMIT * 4  # coffer reads 4x the limit in chunks to keep one hit per document


def write_corpus(svc: MemoryService, repo: Path, n: int) -> list[Path]:
    """``n`` fact files rendered as coffer writes them, alternating project and global stores."""
    r = random.Random(SEED)
    project = svc.target(cwd=repo).store_dir
    stores = [project, svc.target(store=GLOBAL_STORE).store_dir]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    written = []
    for i in range(n):
        text = fact_text(r)
        title = fact_title(text)
        when = start + timedelta(seconds=i)
        fact = MemoryFact(
            id="",
            title=title,
            description=" ".join(text.split())[:120],
            body=text,
            actor="agent",
            origin_session_id=None,
            created_at=when,
            updated_at=when,
        )
        inbox = stores[i % 2] / "knowledge" / "inbox"
        inbox.mkdir(parents=True, exist_ok=True)
        path = inbox / f"{slugify(title)}-{i}.md"
        path.write_bytes(render_fact(fact))
        written.append(path)
    return written


# -- the limit ------------------------------------------------------------------------------------
INDEX_TABLES = ("documents", "chunks", "documents_fts", "documents_words")


def index_schema(index_db: Path) -> list[str]:
    """coffer's own CREATE statements of the tables a rebuild fills (and their indexes),
    read from an index it built: the limit pays for the same schema."""
    conn = apsw.Connection(str(index_db), flags=apsw.SQLITE_OPEN_READONLY)
    marks = ",".join("?" * len(INDEX_TABLES))
    try:
        return [
            str(r[0])
            for r in conn.execute(
                # FTS5 shadow tables are their own tbl_name: the virtual tables make them again.
                f"SELECT sql FROM sqlite_master WHERE tbl_name IN ({marks}) AND sql IS NOT NULL "
                "ORDER BY type = 'index'",
                INDEX_TABLES,
            )
        ]
    finally:
        conn.close()


def limit_rebuild(db_path: Path, files: Sequence[Path], schema: Sequence[str]) -> apsw.Connection:
    """Read every file, cut its frontmatter, insert one row into each table of coffer's schema
    (documents, chunks, both FTS5 tables) with the body as the text; one transaction."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    conn = apsw.Connection(str(db_path))
    conn.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL")
    for sql in schema:
        conn.execute(sql)
    with conn:
        for rowid, path in enumerate(files, start=1):
            text = path.read_bytes().decode("utf-8")
            body = text.split("\n---\n", 1)[1].strip("\n") if text.startswith("---\n") else text
            store = path.parts[-4]
            doc = str(rowid)
            conn.execute(
                "INSERT INTO documents (id, kind, resource_name, project_id, path, title, content_sha256, "
                "created_at, updated_at) VALUES (?, 'memory', ?, '', ?, '', '', '', '')",
                (doc, store, str(path)),
            )
            conn.execute(
                "INSERT INTO chunks (rowid, id, document_id, kind, resource_name, position) "
                "VALUES (?, ?, ?, 'memory', ?, 0)",
                (rowid, doc, doc, store),
            )
            conn.execute(
                "INSERT INTO documents_fts (rowid, text, resource_name, chunk_id) VALUES (?, ?, ?, ?)",
                (rowid, body, store, doc),
            )
            conn.execute(
                "INSERT INTO documents_words (rowid, text, store) VALUES (?, ?, ?)", (rowid, body, store)
            )
    return conn


def limit_keyword(conn: apsw.Connection, query: str) -> list[tuple[int, str]]:
    """One bm25 MATCH over every store, then the matched texts: the least a keyword recall does."""
    terms = keyword_terms(query)
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    ranked = list(
        conn.execute(
            "SELECT rowid FROM documents_words WHERE documents_words MATCH ? "
            "ORDER BY bm25(documents_words, 1.0, 0.0) LIMIT ?",
            (match, FETCH),
        )
    )
    ids = [r[0] for r in ranked]
    marks = ",".join("?" * len(ids))
    texts = dict(conn.execute(f"SELECT rowid, text FROM documents_fts WHERE rowid IN ({marks})", ids))
    return [(i, texts[i]) for i in ids[:LIMIT] if i in texts]


# -- measuring ------------------------------------------------------------------------------------
def timed(fn: Callable[[], Any]) -> float:
    """Seconds one call of ``fn`` took."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleave(pairs: int, a: Callable[[], Any], b: Callable[[], Any]) -> tuple[list[float], list[float]]:
    """``pairs`` timings of ``a`` and of ``b``, alternating which goes first."""
    ta: list[float] = []
    tb: list[float] = []
    for i in range(pairs):
        if i % 2:
            tb.append(timed(b))
            ta.append(timed(a))
        else:
            ta.append(timed(a))
            tb.append(timed(b))
    return ta, tb


def drop_index(home: Path) -> None:
    """Delete the home's index.db and its WAL files."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{home / 'index.db'}{suffix}").unlink(missing_ok=True)


def run_size(n: int, queries: list[str], rebuilds: int, tmp: str | None) -> dict[str, Any]:
    """Every figure for one store size."""
    base = Path(tempfile.mkdtemp(prefix=f"coffer-limit-{n}-", dir=tmp))
    try:
        home, repo = base / "home", base / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        settings = Settings.load(home)
        with MemoryService(settings=settings) as svc:
            files = write_corpus(svc, repo, n)
            svc.reindex()
        schema = index_schema(home / "index.db")
        limit_db = base / "limit.db"

        def coffer_rebuild() -> None:
            drop_index(home)
            with MemoryService(settings=settings) as fresh:
                fresh.reindex()

        def plain_rebuild() -> None:
            limit_rebuild(limit_db, files, schema).close()

        rebuild = interleave(rebuilds, coffer_rebuild, plain_rebuild)
        conn = limit_rebuild(limit_db, files, schema)
        with MemoryService(settings=settings) as svc:
            svc.recall(queries[0], cwd=repo, mode="keyword", limit=LIMIT)  # warm: opens, reconciles
            limit_keyword(conn, queries[0])
            it = iter(queries)
            qa = iter(queries)
            keyword = interleave(
                len(queries),
                lambda: svc.recall(next(it), cwd=repo, mode="keyword", limit=LIMIT),
                lambda: limit_keyword(conn, next(qa)),
            )
        conn.close()
        return {"size": n, "keyword_s": keyword, "rebuild_s": rebuild}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def rows_of(result: dict[str, Any]) -> list[list[object]]:
    """Table rows: figure, coffer p50/p95, limit p50/p95, ratios."""
    out = []
    n = result["size"]
    for key, label, scale in (
        ("keyword_s", f"keyword recall {n:,} (ms)", 1000.0),
        ("rebuild_s", f"cold rebuild {n:,} (s)", 1.0),
    ):
        coffer, plain = result[key]
        c50, c95 = percentile(coffer, 50) * scale, percentile(coffer, 95) * scale
        l50, l95 = percentile(plain, 50) * scale, percentile(plain, 95) * scale
        out.append([label, c50, c95, l50, l95, c50 / l50, c95 / l95])
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Parse options, run every size, print the table of ratios."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rebuilds", type=int, default=3, help="cold rebuilds of each side per size")
    parser.add_argument("--coffer-src", default=None, help="take coffer_memory from this source tree")
    parser.add_argument("--tmpdir", default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    env = environment(args.tmpdir)
    env["coffer_memory"] = os.path.dirname(coffer_memory.__file__)
    print_environment(env)
    queries = make_queries(args.queries)
    results = []
    rows: list[list[object]] = []
    for n in (int(s) for s in args.sizes.split(",")):
        result = run_size(n, queries, args.rebuilds, args.tmpdir)
        results.append(result)
        rows += rows_of(result)
    print(
        table(
            ["figure", "coffer p50", "coffer p95", "limit p50", "limit p95", "ratio p50", "ratio p95"],
            rows,
            title="coffer beside the limit (same texts, same SQLite, interleaved)",
        )
    )
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    write_json(args.json, {"environment": env, "results": results})


if __name__ == "__main__":
    main()
