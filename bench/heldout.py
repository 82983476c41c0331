"""Recall quality on the held-out developer-memory sets: R@5, R@10, MRR per mode and language.

The sets (``bench/data/heldout_zh.jsonl``, ``heldout_en.jsonl``, ``heldout_ja_ko.jsonl``) were written
for issue #14 before the CJK question handling and the stopwords were read, so nothing in the index
was tuned to their wording. Their format is ``bench/zh.py``'s (a ``kind: fact`` or ``kind: query``
line each); a question also carries ``tags``: ``synonym`` (no word shared with its fact that
matters: for vector/hybrid), ``traditional`` (traditional characters against simplified facts),
``fullwidth`` (full-width forms, as an IME types them), ``typo``.

``heldout_zh_hant.jsonl`` is the Chinese set with every question that was in simplified characters
converted to traditional ones by OpenCC's phrase-aware ``s2t`` (tag ``converted``; facts unchanged),
made after the first measurement to test the traditional folding on the whole set:
``--data bench/data/heldout_zh_hant.jsonl``.

Each file goes into its own temporary home through the public ``MemoryService`` (every fact
remembered into the global store, every question recalled with ``limit=10``).

    .venv/bin/python bench/heldout.py                         # grep and keyword
    .venv/bin/python bench/heldout.py --embedder auto         # also vector and hybrid
    .venv/bin/python bench/heldout.py --misses keyword        # each miss with its top hits
    .venv/bin/python bench/heldout.py --data bench/data/asked_s13.jsonl --split dev

``asked_s13.jsonl`` (session 13) holds what developers ask of such a memory: code identifiers in
another case than the fact's, dotted paths, file names, flags, versions, URLs, error messages,
British and American spelling, typos, FTS5 syntax characters, Chinese (simplified and traditional),
Japanese, Korean, and Chinese questions about English facts (tag ``cross``). Its questions carry the
``split`` of their fact (dev or test, drawn with a fixed seed before the first measurement):
``--split`` keeps one half (tune on dev, report test). ``--with-facts`` adds the facts of other
sets to each home as distractors (a store of 71 facts is too small for ranking to matter):

    .venv/bin/python bench/heldout.py --data bench/data/asked_s13.jsonl --with-facts \\
        bench/data/heldout_en.jsonl bench/data/heldout_zh.jsonl bench/data/heldout_ja_ko.jsonl

``asked_s14.jsonl`` (session 14, the same format, 62 facts and 168 questions, written before the
code it measured) adds the tags ``apart`` (the question writes apart what the fact joins),
``joined`` (the reverse), ``glued`` (a version glued to its name), ``transposed`` (two letters
swapped) and ``synonym``.

``asked_s15.jsonl`` (session 15: 52 facts of a made-up project ``marlin`` as developers write them,
commands, config keys, error messages, versions, paths, Chinese, Japanese and Korean; 107
questions) was written and split by fact with ``random.Random(15)`` before the code it measures
was changed, and committed alone; its tags add ``command`` and ``config``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import environment, print_environment, recall_modes, table, write_json
from zh import METRICS, K, load, run

DATA = Path(__file__).resolve().parent / "data"
SETS = ("heldout_zh.jsonl", "heldout_en.jsonl", "heldout_ja_ko.jsonl")


def groups_of(query: dict[str, Any]) -> list[str]:
    """The rows a question counts in: its language, and its language with each of its tags."""
    lang = query["lang"]
    return [lang, *(f"{lang}:{tag}" for tag in query.get("tags", []))]


def report(
    rows: list[dict[str, Any]], queries: dict[str, dict[str, Any]], modes: list[str]
) -> list[dict[str, Any]]:
    """Mean metrics per (group, mode); the question's tags give sub-groups."""
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    order: list[str] = []
    for r in rows:
        for group in groups_of(queries[r["id"]]):
            by[(group, r["mode"])].append(r)
            if group not in order:
                order.append(group)
    order.sort(key=lambda g: (g.split(":")[0], ":" in g, g))
    out = []
    for group in order:
        for mode in modes:
            items = by.get((group, mode), [])
            if items:
                entry: dict[str, Any] = {
                    "group": group,
                    "mode": mode,
                    "n": len(items),
                    "zero_hit": sum(1 for i in items if i["R@10"] == 0.0),
                }
                entry.update({m: sum(i[m] for i in items) / len(items) for m in METRICS})
                out.append(entry)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data",
        nargs="+",
        default=[str(DATA / name) for name in SETS],
        help="the JSONL sets (default: the three held-out files)",
    )
    parser.add_argument(
        "--modes", help="comma-separated modes (default grep,keyword; plus vector,hybrid with --embedder)"
    )
    parser.add_argument(
        "--embedder", help="embedding provider for vector/hybrid: auto (the built-in default)"
    )
    parser.add_argument(
        "--with-facts", nargs="+", default=[], metavar="PATH", help="sets whose facts join every home"
    )
    parser.add_argument("--split", choices=("dev", "test"), help="only the questions of this split")
    parser.add_argument("--misses", metavar="MODE", help="list the questions MODE misses in its top 5")
    parser.add_argument("--json", metavar="PATH", help="also write the figures and per-question rows as JSON")
    parser.add_argument("--tmpdir", help="where to create the temporary homes (default: system)")
    args = parser.parse_args(argv)
    modes = recall_modes(parser, args.modes, args.embedder)

    tmp_root = Path(args.tmpdir or tempfile.gettempdir())
    env = environment(str(tmp_root))
    env["embedder"] = args.embedder or "none"
    rows: list[dict[str, Any]] = []
    queries: dict[str, dict[str, Any]] = {}
    texts: dict[str, str] = {}
    extra = [f for path in args.with_facts for f in load(Path(path))[0]]
    if extra:
        env["distractors"] = f"{len(extra)} facts of {', '.join(Path(p).name for p in args.with_facts)}"
    for path in args.data:
        facts, qs = load(Path(path))
        if args.split:
            qs = [q for q in qs if q.get("split") == args.split]
        env[f"data {Path(path).name}"] = f"{len(facts)} facts, {len(qs)} questions"
        queries.update({q["id"]: q for q in qs})
        texts.update({f["id"]: f["text"] for f in facts})
        work = Path(tempfile.mkdtemp(prefix="coffer-heldout-", dir=tmp_root))
        try:
            got, _ = run([*facts, *extra], qs, modes, args.embedder, work / "home")
        finally:
            shutil.rmtree(work, ignore_errors=True)
        rows.extend(got)
    print_environment(env)
    results = report(rows, queries, modes)
    print(
        table(
            ["set", "mode", "questions", "zero hits", *METRICS],
            [[s["group"], s["mode"], s["n"], s["zero_hit"], *(s[m] for m in METRICS)] for s in results],
            digits=3,
            left=2,
            title=f"Held-out recall (top {K}; set = language, language:tag = its subset)",
        )
    )
    if args.misses:
        print(f"\nquestions {args.misses} misses in its top 5 (want -> got top 5; the first hit's text):")
        for r in rows:
            if r["mode"] == args.misses and r["R@5"] < 1.0:
                tags = ",".join(queries[r["id"]].get("tags", []))
                first = texts.get(r["top"][0], "") if r["top"] else ""
                print(
                    f"  {r['id']} [{tags}] {r['question']}  want {','.join(r['relevant'])}"
                    f"  got {','.join(r['top']) or '-'}\n      top1: {first[:90]}"
                )
    write_json(args.json, {"environment": env, "modes": modes, "summary": results, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
