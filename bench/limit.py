"""The physical limit beside coffer: the same texts, the same SQLite, interleaved in one run.

For each size a fresh temporary home and git repository get the bench's fact files (written as
coffer renders them, half to the project store, half to the global store). Then, alternating
call by call so that load on a shared machine hits both sides alike:

- **keyword recall** (in-process): ``MemoryService.recall(mode="keyword")`` from the repository
  (git lookup, fast-path reconcile of both stores, search, hits) against the limit: one bm25
  MATCH of the same query terms on a plain FTS5 table of the same texts (the same tokenizer as
  coffer's word index) plus one query for the matched texts. Timed in a long-lived service's
  steady state: the service opens once the stores' last full scan is ``reconcile_full_scan_seconds``
  old, so its first read starts the scan that arms the inotify feed (the due background scan of a
  larger store, an inline one of a store of at most ``reconcile_full_scan_max_files``), and the timed
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

Its parts, shared with other bench scripts: ``_limit_corpus.py`` (the facts and how they are
written), ``_limit_side.py`` (the limit's FTS5 and ripgrep side), ``_limit_vectors.py`` (the corpus
embedder and the limit's hybrid recall) and ``_interleave.py`` (alternating, wall and CPU timing).

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
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
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

from _interleave import interleave, interleave_cpu, interleave_queries, timed, with_cpu  # noqa: E402
from _limit_corpus import LIMIT, write_corpus  # noqa: E402
from _limit_side import fts_settings, index_schema, limit_grep, limit_keyword, limit_rebuild, segments  # noqa: E402
from _limit_vectors import (  # noqa: E402
    _BenchEmbedders,
    coffer_hybrid,
    coffer_vectors,
    limit_hybrid,
    query_vector,
    real_embedder,
)
from core import make_queries  # noqa: E402

import coffer_memory  # noqa: E402
from coffer_memory import MemoryService, Settings  # noqa: E402
from coffer_memory._store.paths import GLOBAL_STORE  # noqa: E402
from coffer_memory.plugins import get_plugin_manager  # noqa: E402

GREP_WARMUP = 3  # grep recalls before the timed ones, per backend


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
                f"first read's scan was done (in the background for a larger store); inotify feed of the "
                f"project and global stores: {result['keyword_feed']}"
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
