"""Keyword recall gives the same hits before and after a change: one JSON line per recall to compare.

``build`` writes two homes with the checkout's code: 1,000 bench facts in a project and the global
store plus facts remembered with tags, agent sessions and the Chinese set's texts; and a 300-fact
home (its stores are small enough for the per-file check); ``--sizes`` names others (``10000``:
``DIR/10k``). ``run`` copies a built home to a fixed
path (hits carry absolute paths), runs 394 keyword recalls on it (bench and Chinese questions and
odd ones, limits 1-50, tags, since/until, the global store alone) with hand edits every 60
recalls (a fact rewritten through a rename, one deleted, one hand-written file added), and writes
every hit's fields. Run it with the code before and after (``--coffer-src``) and compare the files:

    .venv/bin/python bench/keyword_same.py build /tmp/same
    .venv/bin/python bench/keyword_same.py run /tmp/same/1k /tmp/before.jsonl --coffer-src /tmp/base
    .venv/bin/python bench/keyword_same.py run /tmp/same/1k /tmp/after.jsonl
    cmp /tmp/before.jsonl /tmp/after.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

for i, arg in enumerate(sys.argv):  # before anything imports coffer_memory
    if arg == "--coffer-src" and i + 1 < len(sys.argv):
        sys.path.insert(0, os.path.abspath(sys.argv[i + 1]))

import coffer_memory  # noqa: E402
from coffer_memory import MemoryService, RecallResult, Settings  # noqa: E402

sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
from _limit_corpus import write_corpus  # noqa: E402
from core import fact_text, make_queries  # noqa: E402

ZH = Path(__file__).parent / "data" / "zh_memory.jsonl"
TAGS = ["deploy", "db", "ui", "ops", "内部"]
ODD = ["make-release", "ab", "数据", "库", "depl", '"quoted" OR x', "the a of", "kind agent", "部署", "x",
       "redis 缓存", "ＡＢＣ１２３", "instruments melanie play", "kind: knowledge"]  # fmt: skip


def build(base: Path, n: int) -> None:
    """A home of ``n`` bench facts (two stores) and remembered facts with tags, sessions, CJK."""
    shutil.rmtree(base, ignore_errors=True)
    home, repo = base / "home", base / "repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    zh = [json.loads(line) for line in ZH.read_text().splitlines() if line.strip()]
    r = random.Random(7)
    with MemoryService(settings=Settings.load(home)) as svc:
        write_corpus(svc, repo, n)
        svc.reindex()
        for i, fact in enumerate(f for f in zh if f["kind"] == "fact"):
            scope = "project" if i % 2 else "global"
            session = f"zh-{i // 6}" if i % 3 else None
            svc.remember(fact["text"], tags=r.sample(TAGS, r.randint(0, 2)), scope=scope, cwd=repo,
                         origin_session_id=session)  # fmt: skip
        for s in range(12):
            for _ in range(r.randint(3, 8)):
                svc.remember(fact_text(r), tags=r.sample(TAGS, r.randint(0, 3)), cwd=repo,
                             scope="project" if s % 2 else "global", origin_session_id=f"sess-{s}")  # fmt: skip
        for _ in range(40):
            svc.remember(fact_text(r), tags=r.sample(TAGS, r.randint(1, 2)), cwd=repo, scope="global")


def _edit(home: Path, step: int) -> None:
    """Hand edits as editors and users make them: a rename over a fact, a delete, a new file."""
    facts = sorted(p for p in home.rglob("*.md") if "/knowledge/inbox/" in str(p))
    path = facts[(step * 37) % len(facts)]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(path.read_text().replace("\n\n", f"\n\nedited {step} deploy redis 部署 ", 1))
    tmp.rename(path)
    gone = facts[(step * 53 + 5) % len(facts)]
    if gone != path:
        gone.unlink()
    day = f"2026-02-0{1 + step % 9}T10:00:00.000+00:00"
    new = path.parent / f".hand-{step}.tmp"
    new.write_text(
        f"---\nkind: knowledge\ntitle: hand {step}\ndescription: d\nmetadata:\n  actor: user\n"
        f"origin_session_id: sess-{step % 3}\ncreated_at: {day}\nupdated_at: {day}\ntags: [deploy]\n---\n\n"
        f"hand written {step}: {fact_text(random.Random(step))} 数据库迁移\n"
    )
    new.rename(path.parent / f"hand-{step}.md")


def _dump(result: RecallResult) -> dict[str, Any]:
    hits = [[h.id, h.text, repr(h.score), h.source, h.time.isoformat(), h.store, str(h.path), h.title]
            for h in result.hits]  # fmt: skip
    return {"mode": result.mode, "fallback": result.fallback, "stores": list(result.stores), "hits": hits}


def run(
    built: Path, out: Path, at: Path, mode: str = "keyword", settings: dict[str, Any] | None = None
) -> int:
    """394 recalls on a copy of ``built`` at ``at``, with hand edits between them; one line each
    (``mode`` and the home's ``settings``: ``bench/hybrid_same.py`` runs hybrid recalls)."""
    shutil.rmtree(at, ignore_errors=True)
    shutil.copytree(built, at)
    home, repo = at / "home", at / "repo"
    zh = [json.loads(line) for line in ZH.read_text().splitlines() if line.strip()]
    r = random.Random(11)
    queries = make_queries(300, seed=99) + [q["question"] for q in zh if q["kind"] == "query"][:80] + ODD
    r.shuffle(queries)
    lines = []
    with MemoryService(settings=Settings.load(home, **(settings or {}))) as svc:
        for i, query in enumerate(queries):
            if i and i % 60 == 0:
                _edit(home, i // 60)
            kw: dict[str, Any] = {}
            match i % 7:
                case 1:
                    kw["tags"] = [r.choice(TAGS)]
                case 2:
                    kw["since"], kw["until"] = "2026-01-01T00:05:00+00:00", "2026-01-01T00:12:00+00:00"
                case 3:
                    kw["since"] = "2026-06-01T00:00:00+00:00"
                case 4:
                    kw["stores"] = ["global"]
                case 5:
                    kw["tags"], kw["until"] = ["deploy"], "2026-12-31T00:00:00+00:00"
            if "stores" not in kw:
                kw["cwd"] = repo
            limit = [10, 10, 3, 1, 25, 10, 50][i % 7]
            try:
                found = _dump(svc.recall(query, mode=mode, limit=limit, **kw))
            except Exception as exc:  # an error is an answer to compare too
                found = {"error": f"{type(exc).__name__}: {exc}"}
            line = {"i": i, "q": query, "kw": {k: str(v) for k, v in kw.items()}, "limit": limit, **found}
            lines.append(json.dumps(line, ensure_ascii=False))
    out.write_text("\n".join(lines) + "\n")
    return len(lines)


def commands(
    doc: str | None, at: Path
) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser, argparse.ArgumentParser]:
    """The ``build DIR`` / ``run BUILT OUT [--at DIR] [--coffer-src SRC]`` command line: the
    parser and its two subcommands' (``hybrid_same.py`` adds its options to them)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write DIR/1k and DIR/300 with this checkout's code")
    b.add_argument("dir", type=Path)
    b.add_argument(
        "--sizes",
        default="1000,300",
        help="the homes' fact counts (DIR/1k, DIR/10k, DIR/300; default 1000,300)",
    )
    r = sub.add_parser("run", help="run the recalls on a copy of a built home, write one JSON line each")
    r.add_argument("built", type=Path)
    r.add_argument("out", type=Path)
    r.add_argument("--at", type=Path, default=at, help="where the copy runs")
    r.add_argument("--coffer-src", default=None, help="take coffer_memory from this source tree")
    return parser, b, r


def main() -> None:
    """``build DIR`` or ``run BUILT OUT [--at DIR] [--coffer-src SRC]``."""
    args = commands(__doc__, Path("/tmp/coffer-keyword-same"))[0].parse_args()
    if args.command == "build":
        sizes = [int(n) for n in args.sizes.split(",")]
        names = [f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n) for n in sizes]
        for name, n in zip(names, sizes, strict=True):
            build(args.dir / name, n)
        print(
            f"built {', '.join(f'{args.dir}/{n}' for n in names)} with {os.path.dirname(coffer_memory.__file__)}"
        )
    else:
        count = run(args.built, args.out, args.at)
        print(f"{count} recalls with {os.path.dirname(coffer_memory.__file__)} -> {args.out}")


if __name__ == "__main__":
    main()
