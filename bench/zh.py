"""Recall quality on Chinese (and a few Japanese and Korean) developer memories: R@5, R@10, MRR.

The set is ``bench/data/zh_memory.jsonl``, written for this project (same licence as the code).
Each line is a fact (``kind: fact``: id, lang, text) or a question (``kind: query``: id, lang,
split, question, relevant fact ids). Facts without questions are distractors. Questions are
split into ``dev`` and ``test`` halves by fact (all questions of a fact are in the same half):
tune on dev only, report test and all.

Everything goes through the real ``MemoryService`` in a temporary home: every fact is
remembered into the global store, every question is recalled with ``limit=10``.

    .venv/bin/python bench/zh.py                       # grep and keyword
    .venv/bin/python bench/zh.py --embedder auto       # also vector and hybrid (built-in MiniLM)
    .venv/bin/python bench/zh.py --misses keyword      # list the dev questions a mode misses
    .venv/bin/python bench/zh.py --segmenter jieba     # jieba words instead of bigrams (pip install jieba)
    .venv/bin/python bench/zh.py --scale 10000         # 10k more made-up facts: latency and a harder set

``--scale N`` adds N distractor facts made of two to four clauses of the set's facts, recombined
with a fixed seed: their characters and words are as frequent as in real facts (so the latency
figures are fair), and since they repeat parts of the relevant facts the quality figures at
scale are a stress test, lower than a real store of that size would give.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import environment, ms, print_environment, recall_modes, summary, table, write_json

from coffer_memory import MemoryService, Settings

DATA = Path(__file__).resolve().parent / "data" / "zh_memory.jsonl"
K = 10
STORE = "global"
METRICS = ("R@5", "R@10", "MRR")
SPLITS = ("dev", "test", "all")
SEED = 20261201


def load(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The facts and the questions of the set."""
    facts, queries = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            (facts if record["kind"] == "fact" else queries).append(record)
    return facts, queries


def score(ranked: Sequence[str], relevant: set[str]) -> dict[str, float]:
    """R@5 and R@10 (share of the relevant facts in the top k) and MRR (first relevant in the top 10)."""
    top = ranked[:K]
    rr = next((1.0 / (i + 1) for i, item in enumerate(top) if item in relevant), 0.0)
    return {
        "R@5": len(relevant.intersection(top[:5])) / len(relevant),
        "R@10": len(relevant.intersection(top)) / len(relevant),
        "MRR": rr,
    }


def group_of(lang: str) -> str:
    """Chinese is reported on its own; the Japanese and Korean pairs together."""
    return "zh" if lang == "zh" else "ja+ko"


def use_segmenter(name: str) -> None:
    """Measure another CJK segmentation: it replaces the tokens of index and query runs in this process."""
    if name == "unigram+bigram":
        return
    from coffer_memory._index import cjk

    if name == "jieba":
        import jieba

        jieba.setLogLevel(60)
        cjk.run_tokens = lambda run: [w for w in jieba.lcut_for_search(run) if w.strip()]  # type: ignore[assignment]
    elif name == "bigram":
        cjk.run_tokens = cjk.bigrams
    elif name == "unigram":
        cjk.run_tokens = list  # type: ignore[assignment]
    else:
        sys.exit(f"error: unknown segmenter {name!r} (unigram+bigram, bigram, unigram, jieba)")


def distractors(facts: list[dict[str, Any]], n: int) -> list[str]:
    """``n`` made-up facts, each two to four clauses of different Chinese facts of the set."""
    clauses = [c for f in facts if f["lang"] == "zh" for c in re.split(r"[，。；]", f["text"]) if c.strip()]
    rng = random.Random(SEED)
    return ["，".join(rng.sample(clauses, rng.randint(2, 4))) + "。" for _ in range(n)]


def run(
    facts: list[dict[str, Any]],
    queries: list[dict[str, Any]],
    modes: Sequence[str],
    embedder: str | None,
    home: Path,
    scale: int = 0,
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Remember every fact, ask every question in every mode; one score row per (question, mode)."""
    enabled = list(dict.fromkeys(["grep", "keyword", *modes]))
    embedding = {"provider": embedder} if embedder else {"provider": "none"}
    settings = Settings.load(home, memory={"retrieval_modes": enabled}, embedding=embedding)
    rows: list[dict[str, Any]] = []
    seconds: dict[str, float] = {}
    with MemoryService(settings=settings) as svc:
        label: dict[str, str] = {}
        t0 = time.perf_counter()
        for fact in facts:
            label[svc.remember(fact["text"], store=STORE).fact.id] = fact["id"]
        for text in distractors(facts, scale):
            svc.remember(text, store=STORE)
        seconds["remember"] = time.perf_counter() - t0
        for mode in modes:
            t0 = time.perf_counter()
            for q in queries:
                started = time.perf_counter()
                res = svc.recall(q["question"], stores=[STORE], mode=mode, limit=K)
                took = ms(time.perf_counter() - started)
                ranked = [label.get(h.id, "?") for h in res.hits]
                rows.append(
                    {
                        "mode": mode,
                        "id": q["id"],
                        "split": q["split"],
                        "group": group_of(q["lang"]),
                        "question": q["question"],
                        "relevant": q["relevant"],
                        "top": ranked[:5],
                        "fallback": res.fallback,
                        "ms": took,
                        **score(ranked, set(q["relevant"])),
                    }
                )
            seconds[mode] = time.perf_counter() - t0
    return rows, seconds


def report(rows: list[dict[str, Any]], modes: Sequence[str]) -> list[dict[str, Any]]:
    """Mean metrics per (group, mode, split), ``all`` = dev + test."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["group"], r["mode"], r["split"])].append(r)
        groups[(r["group"], r["mode"], "all")].append(r)
    out = []
    for group in ("zh", "ja+ko"):
        for mode in modes:
            for split in SPLITS:
                items = groups.get((group, mode, split), [])
                if not items:
                    continue
                entry: dict[str, Any] = {
                    "group": group,
                    "mode": mode,
                    "split": split,
                    "n": len(items),
                    "zero_hit": sum(1 for i in items if i["R@10"] == 0.0),
                }
                for metric in METRICS:
                    entry[metric] = sum(i[metric] for i in items) / len(items)
                out.append(entry)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data", default=str(DATA), help="the JSONL set (default bench/data/zh_memory.jsonl)"
    )
    parser.add_argument(
        "--modes", help="comma-separated modes (default grep,keyword; plus vector,hybrid with --embedder)"
    )
    parser.add_argument(
        "--embedder",
        help="embedding provider for vector/hybrid: auto (built-in MiniLM), openai, or a plugin's name",
    )
    parser.add_argument(
        "--misses", metavar="MODE", help="list the dev questions MODE does not find in its top 5"
    )
    parser.add_argument(
        "--segmenter",
        default="unigram+bigram",
        help="CJK segmentation to measure: unigram+bigram (what the index does), bigram, "
        "unigram, jieba (pip install jieba)",
    )
    parser.add_argument("--scale", type=int, default=0, help="add N made-up distractor facts (see above)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures and per-question rows as JSON")
    parser.add_argument("--tmpdir", help="where to create the temporary home (default: system)")
    args = parser.parse_args(argv)
    modes = recall_modes(parser, args.modes, args.embedder)

    use_segmenter(args.segmenter)
    facts, queries = load(Path(args.data))
    tmp_root = Path(args.tmpdir or tempfile.gettempdir())
    env = environment(str(tmp_root))
    env["data"] = f"{args.data} ({len(facts)} facts, {len(queries)} questions)"
    env["embedder"] = args.embedder or "none"
    env["segmenter"] = args.segmenter
    env["distractors_added"] = args.scale
    print_environment(env)

    work = Path(tempfile.mkdtemp(prefix="coffer-zh-", dir=tmp_root))
    try:
        rows, seconds = run(facts, queries, modes, args.embedder, work / "home", args.scale)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = report(rows, modes)
    print(
        table(
            ["set", "mode", "split", "questions", "zero hits", *METRICS],
            [
                [s["group"], s["mode"], s["split"], s["n"], s["zero_hit"], *(s[m] for m in METRICS)]
                for s in results
            ],
            digits=3,
            left=3,
            title=f"Recall quality (top {K}; zero hits = no relevant fact in the top 10)",
        )
    )
    print()
    latency = {mode: summary([r["ms"] for r in rows if r["mode"] == mode]) for mode in modes}
    print(
        table(
            ["recall (ms)", "n", "p50", "p95", "max"],
            [[mode, lat["n"], lat["p50"], lat["p95"], lat["max"]] for mode, lat in latency.items()],
            title="Latency",
        )
    )
    print("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))
    if args.misses:
        print(f"\ndev questions {args.misses} misses in its top 5:")
        for r in rows:
            if r["mode"] == args.misses and r["split"] == "dev" and r["R@5"] < 1.0:
                print(
                    f"  {r['id']} {r['question']}  want {','.join(r['relevant'])}  got {','.join(r['top'])}"
                )
    fell_back = sum(1 for r in rows if r["fallback"])
    if fell_back:
        print(f"note: {fell_back} recalls fell back to keyword (RecallResult.fallback)")
    write_json(
        args.json,
        {
            "environment": env,
            "modes": modes,
            "summary": results,
            "latency_ms": latency,
            "seconds": seconds,
            "rows": rows,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
