"""The physical limit beside coffer: the same texts, the same SQLite, interleaved in one run.

For each size a fresh temporary home and git repository get the bench's fact files (written as
coffer renders them, half to the project store, half to the global store). Then, alternating
call by call so that load on a shared machine hits both sides alike:

- **keyword recall** (in-process): ``MemoryService.recall(mode="keyword")`` from the repository
  (git lookup, fast-path reconcile of both stores, search, hits) against the limit: one bm25
  MATCH of the same query terms on a plain FTS5 table of the same texts (the same tokenizer as
  coffer's word index) plus one query for the matched texts. Timed in a long-lived service's
  steady state: the service opens once the stores' last full scan is ``reconcile_full_scan_seconds``
  old, so its first read starts the due background scan that arms the inotify feed, and the timed
  recalls begin when that scan is done (the feed's state is printed). Until session 20 they ran in
  the first ~2 s after the rebuild's scan, before any scan fell due: every one read both stores
  by their recall folders' mtimes, which a service does only in its first seconds;
- **cold rebuild from files**: ``MemoryService.reindex()`` after deleting ``index.db`` against
  the limit: read every file, cut the frontmatter, insert one row per file into each of the
  tables coffer fills (its own schema, read from its index: documents, chunks and the word
  and trigram FTS5 tables, with their indexes and coffer's FTS5 settings) in one transaction;
- **grep recall** with the ripgrep backend (and, over ``--python-grep-queries`` queries, the
  pure-Python one; over ``--auto-grep-queries``, ``auto``, a service's default: rg once, then
  the kept texts), each after three warm-up recalls, against the limit: one ``rg --fixed-strings --ignore-case
  --files-with-matches`` process over the same folders with the same patterns (the phrase and
  its words) and the same walk (hidden files, ignore files, config), timed from spawn to exit;
  wall time and CPU time (this thread's plus rg's) are both printed, for rg's wall time over
  10k files swings with the machine's other jobs far more than its CPU time does;
- **hybrid recall** (``--embedders``, default the multilingual-e5 default; ``minilm`` for
  MiniLM) against the limit: the same embedder embeds the query, one numpy dot product over
  the corpus's unit vectors picks the nearest 40, the keyword MATCH above runs, and the texts
  of both lists are read. Every call embeds its query (coffer's query cache is cleared). The
  corpus vectors are deterministic random unit vectors on both sides (``--embed-corpus``
  embeds the facts for real: about 40 ms a fact on this machine): the scan costs the same
  whatever the values, and the query embedding, the part the model decides, is real.

Printed: median and p95 of each side and the ratios coffer / limit; for keyword recall, rebuild
and hybrid recall also the ratio of the median CPU times (this process's, every thread's: hybrid's
worker embeds the query), which a shared machine's load disturbs far less than wall time. ``--coffer-src DIR`` takes
``coffer_memory`` from another source tree (e.g. an older commit from ``git archive``), so
before and after are two runs of this script, each with its own limit beside it.

    .venv/bin/python bench/limit.py [--sizes 1000,10000] [--queries 200] [--rebuilds 3]
        [--embedders multilingual-e5,minilm] [--grep-queries N] [--python-grep-queries 20]
        [--auto-grep-queries N]
        [--keyword-queries N] [--coffer-src DIR]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
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

import numpy as np  # noqa: E402
from core import SEED, fact_text, fact_title, make_queries  # noqa: E402

import coffer_memory  # noqa: E402
from coffer_memory import MemoryService, Settings  # noqa: E402
from coffer_memory._config import EmbeddingSettings, env_overrides  # noqa: E402
from coffer_memory._index.fts import keyword_terms  # noqa: E402
from coffer_memory._models import MemoryFact  # noqa: E402
from coffer_memory._store.files import render_fact  # noqa: E402
from coffer_memory._store.paths import GLOBAL_STORE, slugify  # noqa: E402
from coffer_memory.plugins import get_embedder, get_plugin_manager, hookimpl  # noqa: E402
from coffer_memory.plugins.builtin.grep import find_ripgrep  # noqa: E402

LIMIT = 10
FETCH = LIMIT * 4  # coffer reads 4x the limit in chunks to keep one hit per document
GREP_WARMUP = 3  # grep recalls before the timed ones, per backend


def fact_files(n: int) -> Iterator[tuple[str, bytes]]:
    """``n`` (file name, content) pairs: the bench's facts rendered as coffer writes them."""
    r = random.Random(SEED)
    start = datetime(2026, 1, 1, tzinfo=UTC)
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
        yield f"{slugify(title)}-{i}.md", render_fact(fact)


def write_corpus(svc: MemoryService, repo: Path, n: int) -> list[Path]:
    """``n`` fact files, alternating project and global stores."""
    project = svc.target(cwd=repo).store_dir
    stores = [project, svc.target(store=GLOBAL_STORE).store_dir]
    written = []
    for i, (name, content) in enumerate(fact_files(n)):
        inbox = stores[i % 2] / "knowledge" / "inbox"
        inbox.mkdir(parents=True, exist_ok=True)
        path = inbox / name
        path.write_bytes(content)
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


def fts_settings(index_db: Path) -> list[str]:
    """The statements that give the limit's FTS5 tables coffer's own settings of them (e.g. the
    trigram index's ``hashsize``, session 17), read from an index coffer built: a setting both
    could have is not a lead of coffer's over the limit."""
    conn = apsw.Connection(str(index_db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [
            f"INSERT INTO {table} ({table}, rank) VALUES ('{key}', {int(value)})"
            for table in ("documents_fts", "documents_words")
            for key, value in conn.execute(f"SELECT k, v FROM {table}_config WHERE k != 'version'")
            if str(key).isidentifier() and isinstance(value, int)
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


def segments(index_db: Path) -> int:
    """How many FTS5 segments of the word index hold terms: a MATCH looks every term up in each."""
    conn = apsw.Connection(str(index_db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return int(conn.execute("SELECT count(DISTINCT segid) FROM documents_words_idx").get)
    finally:
        conn.close()


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


def grep_patterns(query: str) -> list[str]:
    """The fixed strings a grep recall looks for: the phrase, then its words."""
    phrase = " ".join(query.split())
    return [phrase, *(t for t in keyword_terms(query, characters=False) if t != phrase.lower())]


try:  # the same walk as coffer's ripgrep backend, listing the matching files instead of lines
    from coffer_memory.plugins.builtin.grep import RG_SEARCH_FLAGS
except ImportError:  # an older tree (--coffer-src): the flags its backend passed
    RG_SEARCH_FLAGS = tuple(
        shlex.split(
            "--fixed-strings --ignore-case --hidden --no-ignore --no-follow "
            "--glob *.md --glob !.* --no-messages --no-config"
        )
    )


def limit_grep(folders: Sequence[Path], query: str) -> list[str]:
    """One ripgrep process listing the files that hold any pattern: the least a grep recall does."""
    rg = find_ripgrep()
    assert rg is not None, "the limit needs rg (pip install ripgrep)"
    args = [rg, *RG_SEARCH_FLAGS, "--files-with-matches"]
    for pattern in grep_patterns(query):
        args += ["-e", pattern]
    proc = subprocess.run([*args, "--", *map(str, folders)], capture_output=True, check=False)
    return proc.stdout.decode("utf-8", errors="replace").splitlines()


def unit_vector(text: str, dimensions: int) -> np.ndarray:
    """A deterministic random unit vector for ``text`` (the bench's corpus vectors)."""
    seed = int.from_bytes(text.encode("utf-8")[:64].ljust(8, b"\0")[:8], "little") ^ len(text)
    v = np.random.default_rng(seed).standard_normal(dimensions).astype(np.float32)
    return v / np.linalg.norm(v)


class CorpusVectors:
    """An embedder whose documents get ``unit_vector``s and whose queries the real model embeds."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.name = f"bench-{real.name}"
        self.model_id = f"{real.model_id}+bench-corpus"
        self.dimensions = int(real.dimensions)

    def available(self) -> bool:
        """The real model's answer."""
        return bool(self.real.available())

    def embed_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Random unit vectors, one per text."""
        return [unit_vector(t, self.dimensions) for t in texts]

    def embed_query(self, text: str) -> Any:
        """The real model's query embedding."""
        return query_vector(self.real, text)


def query_vector(embedder: Any, text: str) -> Any:
    """A query's vector as coffer asks for it: ``embed_query`` when the embedder has one."""
    embed_query = getattr(embedder, "embed_query", None)
    return embed_query(text) if callable(embed_query) else embedder.embed_batch([text])[0]


@functools.cache
def real_embedder(provider: str) -> Any:
    """The installed embedder ``provider`` names (one per process), with the other embedding
    settings the environment gives (``COFFER_EMBEDDING_QUERY_INT8=false`` times the 4-bit graph)."""
    given = env_overrides(os.environ).get("embedding", {})
    embedder = get_embedder(EmbeddingSettings.model_validate({**given, "provider": provider}))
    assert embedder is not None and embedder.available(), f"embedder {provider} is not installed"
    return embedder


class _BenchEmbedders:
    """Registers ``bench-<provider>`` (``CorpusVectors``) beside the real embedders."""

    def __init__(self, providers: Sequence[str], embed_corpus: bool) -> None:
        self.providers = providers
        self.embed_corpus = embed_corpus

    @hookimpl
    def register_embedders(self, register: Callable[[str, Any], None]) -> None:
        for provider in self.providers:
            if self.embed_corpus:
                register(f"bench-{provider}", lambda _s, p=provider: real_embedder(p))
            else:
                register(f"bench-{provider}", lambda _s, p=provider: CorpusVectors(real_embedder(p)))


def coffer_vectors(index_db: Path) -> np.ndarray:
    """Every vector coffer stored (all stores), as one matrix: the limit scans the same ones."""
    conn = apsw.Connection(str(index_db), flags=apsw.SQLITE_OPEN_READONLY)
    conn.enable_load_extension(True)
    import sqlite_vec

    conn.load_extension(sqlite_vec.loadable_path())
    try:
        tables = [str(r[0]) for r in conn.execute("SELECT table_name FROM vec_stores")]
        blobs = [bytes(r[0]) for t in tables for r in conn.execute(f"SELECT embedding FROM {t}")]
    finally:
        conn.close()
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1).copy()


def coffer_hybrid(svc: MemoryService, repo: Path, query: str) -> None:
    """One hybrid recall that embeds its query (the query cache is cleared first)."""
    svc.retrieval.clear_query_cache()
    svc.recall(query, cwd=repo, mode="hybrid", limit=LIMIT)


def limit_hybrid(
    conn: apsw.Connection, matrix: np.ndarray, n: int, embedder: Any, query: str
) -> list[tuple[int, str]]:
    """Embed the query, one dot product over the unit vectors, the keyword MATCH, both lists' texts."""
    qvec = query_vector(embedder, query)
    # einsum, not BLAS (`@`): OpenBLAS's spinning threads made the product 0.1 or 15 ms by
    # the machine's load; einsum's own loop is steady (coffer uses it too).
    scores = np.einsum("ij,j->i", matrix, np.asarray(qvec, dtype=np.float32))
    top = np.argpartition(-scores, FETCH)[:FETCH]
    nearest = [int(i) % n + 1 for i in top[np.argsort(-scores[top])]]  # a text per vector
    keyword = limit_keyword(conn, query)
    marks = ",".join("?" * LIMIT)
    texts = dict(
        conn.execute(f"SELECT rowid, text FROM documents_fts WHERE rowid IN ({marks})", nearest[:LIMIT])
    )
    return keyword + [(i, texts[i]) for i in nearest[:LIMIT] if i in texts]


# -- measuring ------------------------------------------------------------------------------------
def timed(fn: Callable[[], Any], cpu: list[float] | None = None) -> float:
    """Seconds one call of ``fn`` took; its CPU seconds (this process's) go to ``cpu``."""
    start, cpu_start = time.perf_counter(), time.process_time()
    fn()
    if cpu is not None:
        cpu.append(time.process_time() - cpu_start)
    return time.perf_counter() - start


def cpu_seconds() -> float:
    """CPU seconds of this thread plus every waited-for child (rg): unlike wall time, barely
    moved by other jobs on a shared machine (a 10k-file rg scan took 60 to 300 ms of wall time
    by the load, and about 120 ms of CPU time either way)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.thread_time() + children.ru_utime + children.ru_stime


def interleave_cpu(
    queries: Sequence[str], a: Callable[[str], Any], b: Callable[[str], Any]
) -> tuple[tuple[list[float], list[float]], tuple[list[float], list[float]]]:
    """``interleave_queries`` recording wall and CPU seconds: ((wall a, wall b), (cpu a, cpu b))."""
    wall: tuple[list[float], list[float]] = ([], [])
    cpu: tuple[list[float], list[float]] = ([], [])
    for i, query in enumerate(queries):
        for side in (1, 0) if i % 2 else (0, 1):
            c0, w0 = cpu_seconds(), time.perf_counter()
            (a, b)[side](query)
            wall[side].append(time.perf_counter() - w0)
            cpu[side].append(cpu_seconds() - c0)
    return wall, cpu


# CPU seconds of the calls ``interleave`` timed last: (a's, b's). A shared machine's load
# stretches wall time (a 2 ms call is preempted, a 0.3 ms one mostly is not); CPU time far less.
last_cpu: tuple[list[float], list[float]] = ([], [])


def interleave(pairs: int, a: Callable[[], Any], b: Callable[[], Any]) -> tuple[list[float], list[float]]:
    """``pairs`` timings of ``a`` and of ``b``, alternating which goes first (CPU in ``last_cpu``)."""
    ta: list[float] = []
    tb: list[float] = []
    ca, cb = last_cpu[0], last_cpu[1]
    ca.clear()
    cb.clear()
    for i in range(pairs):
        if i % 2:
            tb.append(timed(b, cb))
            ta.append(timed(a, ca))
        else:
            ta.append(timed(a, ca))
            tb.append(timed(b, cb))
    return ta, tb


def interleave_queries(
    queries: Sequence[str], a: Callable[[str], Any], b: Callable[[str], Any]
) -> tuple[list[float], list[float]]:
    """``interleave`` over ``queries``: each side gets every query once, in the same order."""
    qa, qb = iter(queries), iter(queries)
    return interleave(len(queries), lambda: a(next(qa)), lambda: b(next(qb)))


def with_cpu(out: dict[str, Any], key: str, walls: tuple[list[float], list[float]]) -> None:
    """``out[key]`` = the wall times, ``out[key + "_cpu"]`` = the CPU times ``interleave`` kept."""
    out[key] = walls
    out[f"{key}_cpu"] = (list(last_cpu[0]), list(last_cpu[1]))


def past_the_last_scan(home: Path, settings: Settings) -> None:
    """Wait until the stores' last full scan is ``reconcile_full_scan_seconds`` old: a service's
    first read of a larger store then starts the due background scan that arms its inotify feed."""
    conn = apsw.Connection(str(home / "index.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        last = max((float(r[0]) for r in conn.execute("SELECT last_full_scan FROM store_state")), default=0.0)
    finally:
        conn.close()
    time.sleep(max(0.0, last + settings.reconcile_full_scan_seconds + 0.1 - time.time()))


def steady(svc: MemoryService, stores: Sequence[str]) -> str:
    """Wait for the background full scans a first read started, and say what vouches for each of
    ``stores`` on a read from now on: the inotify feed's state of it, or folder mtimes."""
    for thread in threading.enumerate():
        if thread.name.startswith("coffer-scan-"):
            thread.join(300)
    feed = svc.index.reconciler.feed
    return ", ".join("folder mtimes (no feed)" if feed is None else feed.status(s) for s in stores)


def drop_index(home: Path) -> None:
    """Delete the home's index.db and its WAL files."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{home / 'index.db'}{suffix}").unlink(missing_ok=True)


def run_size(n: int, queries: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """Every figure for one store size."""
    base = Path(tempfile.mkdtemp(prefix=f"coffer-limit-{n}-", dir=args.tmpdir))
    out: dict[str, Any] = {"size": n}
    try:
        home, repo = base / "home", base / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        settings = Settings.load(home)
        with MemoryService(settings=settings) as svc:
            files = write_corpus(svc, repo, n)
            # Files changed in the last 2 s (RACY_NS in _index/reindex.py) keep no ctime in their
            # index row and are read again by every scan (git's "racily clean" rule): wait that
            # out, or every recall of a small store timed in its first seconds re-reads the store.
            time.sleep(2.1)
            svc.reindex()
            folders = [
                folder
                for sp in (svc.paths(svc.target(cwd=repo).store), svc.paths(GLOBAL_STORE))
                for folder in sp.recall_dirs()
                if folder.is_dir()
            ]
        limit_db = base / "limit.db"

        def coffer_rebuild() -> None:
            drop_index(home)
            with MemoryService(settings=settings) as fresh:
                fresh.reindex()

        # The schema and settings of an index a cold rebuild made (settings a bulk load writes,
        # such as the trigram index's hashsize, are not in an index built fact by fact).
        coffer_rebuild()
        schema = index_schema(home / "index.db") + fts_settings(home / "index.db")

        def plain_rebuild() -> None:
            limit_rebuild(limit_db, files, schema).close()

        if args.rebuilds:
            with_cpu(out, "rebuild_s", interleave(args.rebuilds, coffer_rebuild, plain_rebuild))
        conn = limit_rebuild(limit_db, files, schema)
        out["word_segments"] = (segments(home / "index.db"), segments(limit_db))
        keyword = queries[: args.keyword_queries if args.keyword_queries is not None else len(queries)]
        if keyword:
            past_the_last_scan(home, settings)
            with MemoryService(settings=settings) as svc:
                svc.recall(queries[0], cwd=repo, mode="keyword", limit=LIMIT)  # warm: opens, reconciles
                out["keyword_feed"] = steady(svc, [svc.target(cwd=repo).store, GLOBAL_STORE])
                svc.recall(queries[0], cwd=repo, mode="keyword", limit=LIMIT)
                limit_keyword(conn, queries[0])
                timings = interleave_queries(
                    keyword,
                    lambda q: svc.recall(q, cwd=repo, mode="keyword", limit=LIMIT),
                    lambda q: limit_keyword(conn, q),
                )
                with_cpu(out, "keyword_s", timings)
        rg_count = len(queries) if args.grep_queries is None else args.grep_queries
        auto_count = rg_count if args.auto_grep_queries is None else args.auto_grep_queries
        grep_runs = (("ripgrep", rg_count), ("python", args.python_grep_queries), ("auto", auto_count))
        for backend, count in grep_runs:
            if not count:
                continue
            with MemoryService(settings=Settings.load(home, grep_backend=backend)) as svc:
                # Warm, as a long-lived process is: the pure-Python backend reads every file on its
                # first search and watches the folders from its second; auto greps with rg once.
                for query in queries[:GREP_WARMUP]:
                    svc.recall(query, cwd=repo, mode="grep", limit=LIMIT)
                out[f"grep_{backend}_s"], out[f"grep_{backend}_cpu_s"] = interleave_cpu(
                    queries[:count],
                    lambda q, svc=svc: svc.recall(q, cwd=repo, mode="grep", limit=LIMIT),
                    lambda q: limit_grep(folders, q),
                )
        for provider in args.embedders.split(",") if args.embedders else []:
            hybrid = Settings.load(
                home,
                embedding={"provider": f"bench-{provider}"},
                memory={"retrieval_modes": ["grep", "keyword", "vector", "hybrid"]},
            )
            with MemoryService(settings=hybrid) as svc:
                svc.reindex()  # vectors for every chunk
                matrix = coffer_vectors(home / "index.db")
                embedder = real_embedder(provider)
                svc.recall(queries[0], cwd=repo, mode="hybrid", limit=LIMIT)
                limit_hybrid(conn, matrix, n, embedder, queries[0])
                timings = interleave_queries(
                    queries,
                    functools.partial(coffer_hybrid, svc, repo),
                    functools.partial(limit_hybrid, conn, matrix, n, embedder),
                )
                with_cpu(out, f"hybrid_{provider}_s", timings)  # the process's CPU: the worker's too
                out[f"embed_{provider}_s"] = [
                    timed(functools.partial(query_vector, embedder, q)) for q in queries[:50]
                ]
        conn.close()
        return out
    finally:
        shutil.rmtree(base, ignore_errors=True)


def embedding_rebuild(n: int, provider: str, tmp: str | None) -> dict[str, Any]:
    """A cold rebuild of ``n`` facts that embeds every chunk with the real ``provider``:
    seconds, chunks embedded and texts per second (the embedding throughput of a rebuild)."""
    base = Path(tempfile.mkdtemp(prefix=f"coffer-embed-{n}-", dir=tmp))
    try:
        home, repo = base / "home", base / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        settings = Settings.load(
            home,
            embedding={"provider": provider},
            memory={"retrieval_modes": ["keyword", "vector", "hybrid"]},
        )
        with MemoryService(settings=Settings.load(home)) as svc:
            write_corpus(svc, repo, n)
        start = time.perf_counter()
        with MemoryService(settings=settings) as svc:
            svc.reindex()
        seconds = time.perf_counter() - start
        conn = apsw.Connection(str(home / "index.db"), flags=apsw.SQLITE_OPEN_READONLY)
        chunks = int(conn.execute("SELECT count(*) FROM chunks").get)
        conn.close()
        return {
            "size": n,
            "provider": provider,
            "seconds": seconds,
            "chunks": chunks,
            "texts_per_s": chunks / seconds,
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)


FIGURES = (
    ("keyword_s", "keyword recall", "ms"),
    ("grep_ripgrep_s", "grep recall, ripgrep", "ms"),
    ("grep_ripgrep_cpu_s", "  the same, CPU time (rg's included)", "ms"),
    ("grep_python_s", "grep recall, pure Python", "ms"),
    ("grep_python_cpu_s", "  the same, CPU time (rg's included)", "ms"),
    ("grep_auto_s", "grep recall, auto (the default)", "ms"),
    ("grep_auto_cpu_s", "  the same, CPU time (rg's included)", "ms"),
    ("hybrid_multilingual-e5_s", "hybrid recall, multilingual-e5", "ms"),
    ("hybrid_minilm_s", "hybrid recall, MiniLM", "ms"),
    ("rebuild_s", "cold rebuild", "s"),
)


def rows_of(result: dict[str, Any]) -> list[list[object]]:
    """Table rows: figure, coffer p50/p95, limit p50/p95, ratios."""
    out: list[list[object]] = []
    n = result["size"]
    for key, label, unit in FIGURES:
        if key not in result:
            continue
        scale = 1000.0 if unit == "ms" else 1.0
        coffer, plain = result[key]
        c50, c95 = percentile(coffer, 50) * scale, percentile(coffer, 95) * scale
        l50, l95 = percentile(plain, 50) * scale, percentile(plain, 95) * scale
        row: list[object] = [f"{label} {n:,} ({unit})", c50, c95, l50, l95, c50 / l50, c95 / l95]
        if f"{key}_cpu" in result:
            cpu_coffer, cpu_plain = result[f"{key}_cpu"]
            row.append(percentile(cpu_coffer, 50) / percentile(cpu_plain, 50))
        else:
            row.append("")
        out.append(row)
    if "word_segments" in result:
        ours, plain = result["word_segments"]
        out.append([f"  word-index segments after a rebuild, {n:,}", ours, "", plain, "", "", "", ""])
    for key, value in result.items():
        if key.startswith("embed_"):
            p50 = percentile(value, 50) * 1000
            out.append(
                [
                    f"  query embedding alone, {key[6:-2]} (ms)",
                    p50,
                    percentile(value, 95) * 1000,
                    "",
                    "",
                    "",
                    "",
                    "",
                ]
            )
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Parse options, run every size, print the table of ratios."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rebuilds", type=int, default=3, help="cold rebuilds of each side per size")
    parser.add_argument(
        "--embedders",
        default="multilingual-e5",
        help="hybrid recall with these embedders, comma-separated (empty: none)",
    )
    parser.add_argument(
        "--embed-corpus",
        action="store_true",
        help="embed every fact for real (slow) instead of random unit vectors",
    )
    parser.add_argument(
        "--python-grep-queries",
        type=int,
        default=20,
        help="grep recalls with the pure-Python backend per size (it is slow at 10k)",
    )
    parser.add_argument(
        "--grep-queries",
        type=int,
        default=None,
        help="grep recalls with the ripgrep backend per size (default: --queries; 0: none)",
    )
    parser.add_argument(
        "--auto-grep-queries",
        type=int,
        default=None,
        help="grep recalls with grep_backend = auto, a service's default (default: --grep-queries)",
    )
    parser.add_argument(
        "--embed-rebuild",
        type=int,
        default=0,
        help="also time a cold rebuild of this many facts embedded for real (texts/s)",
    )
    parser.add_argument(
        "--keyword-queries", type=int, default=None, help="keyword recalls per size (default --queries)"
    )
    parser.add_argument("--coffer-src", default=None, help="take coffer_memory from this source tree")
    parser.add_argument("--tmpdir", default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    env = environment(args.tmpdir)
    env["coffer_memory"] = os.path.dirname(coffer_memory.__file__)
    print_environment(env)
    queries = make_queries(args.queries)
    if args.embedders:
        get_plugin_manager().register(_BenchEmbedders(args.embedders.split(","), args.embed_corpus))
    results = []
    rows: list[list[object]] = []
    for n in (int(s) for s in args.sizes.split(",")):
        result = run_size(n, queries, args)
        results.append(result)
        rows += rows_of(result)
    print(
        table(
            [
                "figure",
                "coffer p50",
                "coffer p95",
                "limit p50",
                "limit p95",
                "ratio p50",
                "ratio p95",
                "CPU ratio p50",
            ],
            rows,
            title="coffer beside the limit (same texts, same SQLite, interleaved)",
        )
    )
    for result in results:
        if "keyword_feed" in result:
            print(
                f"keyword recall {result['size']:,}: timed in a long-lived service's steady state, once the "
                f"first read's background scan was done; inotify feed of the project and global stores: "
                f"{result['keyword_feed']}"
            )
    embedded = []
    for provider in args.embedders.split(",") if args.embed_rebuild and args.embedders else []:
        embedded.append(embedding_rebuild(args.embed_rebuild, provider, args.tmpdir))
        e = embedded[-1]
        print(
            f"cold rebuild of {e['size']:,} facts embedded with {provider}: {e['seconds']:.1f} s, "
            f"{e['chunks']:,} chunks, {e['texts_per_s']:.1f} texts/s"
        )
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    write_json(args.json, {"environment": env, "results": results, "embedding_rebuilds": embedded})


if __name__ == "__main__":
    main()
