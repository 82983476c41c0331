"""Retrieval quality on LoCoMo (locomo10.json): R@5, R@10, nDCG@10 and MRR per mode, granularity, category.

LoCoMo (Maharana et al., 2024) is licensed CC BY-NC 4.0. The data is NOT part of this
repository and is never copied into it: pass its path with ``--data``.

Everything goes through the public API (``MemoryService.remember`` / ``MemoryService.recall``).
Each conversation gets its own temporary COFFER_HOME per granularity, facts in the global store:

* turn level: one fact per dialog turn, text ``"speaker: text"`` (plus ``(image: <blip_caption>)``
  when the turn shared an image), title = the turn's dia_id;
* session level: one fact per session, all its turns joined one per line; a session is relevant
  when it holds any evidence turn.

Each fact names its LoCoMo session as ``origin_session_id`` (``<sample_id>-session_<n>``), as an
agent remembering a chat passes the session it came from; ``--no-session-ids`` leaves it out.

For every question with evidence, ``recall(question, stores=["global"], mode=m, limit=10)``;
scores are computed against the evidence turns (or their sessions). Categories: 1 multi-hop,
2 temporal, 3 open-domain, 4 single-hop (overall = 1-4), 5 adversarial (reported apart); a "1-5" row
averages every question, as peers that publish LoCoMo retrieval recall do.

    .venv/bin/python bench/locomo.py [--data PATH] [--modes grep,keyword] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import REPO_ROOT, environment, ms, print_environment, summary, table, write_json

from coffer_memory import MemoryService, RecallResult, Settings
from coffer_memory._config import env_overrides

DEFAULT_DATA = REPO_ROOT.parent / "shared" / "bench" / "locomo10.json"
K = 10
STORE = "global"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
MAIN_CATEGORIES = (1, 2, 3, 4)
GRANULARITIES = ("turn", "session")
DEV_CONVERSATIONS = 5  # conversations 0-4 are the dev split, 5-9 the test split
_EVIDENCE = re.compile(r"^D:?(\d+):(\d+)$")

# A mode is a name and how to ask the service for it. Vector/hybrid slot in here once an
# embedder exists: the default runner already passes the name through to recall().
Runner = Callable[[MemoryService, str, int], RecallResult]


def _recall_with(mode: str) -> Runner:
    def run(svc: MemoryService, question: str, limit: int) -> RecallResult:
        return svc.recall(question, stores=[STORE], mode=mode, limit=limit)

    return run


MODE_RUNNERS: dict[str, Runner] = {}  # overrides for modes that need more than recall(mode=...)


def runner_for(mode: str) -> Runner:
    return MODE_RUNNERS.get(mode, _recall_with(mode))


def service_for(home: Path, modes: Sequence[str]) -> MemoryService:
    """A service on ``home`` with every requested mode enabled (vector/hybrid are off by default)."""
    enabled = list(dict.fromkeys(["grep", "keyword", *modes]))
    provider = os.environ.get("COFFER_BENCH_EMBEDDER", "auto")
    cache = os.environ.get("COFFER_BENCH_EMBED_CACHE")
    if cache and any(m in ("vector", "hybrid") for m in modes):
        import _embed_cache

        provider = _embed_cache.use(Path(cache), provider)
    # An override replaces its whole section: the environment's other embedding settings
    # (``COFFER_EMBEDDING_QUERY_INT8``) are carried over by hand.
    embedding = {**env_overrides(os.environ).get("embedding", {}), "provider": provider}
    return MemoryService(
        settings=Settings.load(home, memory={"retrieval_modes": enabled}, embedding=embedding)
    )


# -- data -----------------------------------------------------------------------------------------
def load(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        sys.exit(
            f"error: LoCoMo data not found at {path}\n"
            "Pass the path of locomo10.json with --data PATH. The file is CC BY-NC 4.0 and is not\n"
            "shipped with this repository; get it from https://github.com/snap-research/locomo."
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        sys.exit(f"error: cannot read {path} as JSON: {exc}")
    if not isinstance(data, list) or not all(
        isinstance(c, dict) and "conversation" in c and "qa" in c for c in data
    ):
        sys.exit(f"error: {path} does not look like locomo10.json (a list of conversations with qa)")
    return data


def sessions_of(conversation: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """``[(session_key, turns)]`` in session order (keys ``session_<n>`` holding a list)."""
    found = []
    for key, value in conversation.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if m and isinstance(value, list):
            found.append((int(m.group(1)), key, value))
    return [(key, turns) for _, key, turns in sorted(found)]


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    if caption:
        text += f" (image: {caption})"
    return text


def normalise_evidence(entries: Sequence[str]) -> list[str]:
    """Evidence ids as ``D<session>:<turn>``: ``D:11:26`` -> ``D11:26``; ``"D8:6; D9:17"`` -> two ids.

    Tokens that are not shaped like a dia_id are returned unchanged (they will not match a turn).
    """
    out: list[str] = []
    for entry in entries:
        for token in re.split(r"[;,\s]+", str(entry)):
            token = token.strip()
            if not token:
                continue
            m = _EVIDENCE.match(token)
            out.append(f"D{int(m.group(1))}:{int(m.group(2))}" if m else token)
    return list(dict.fromkeys(out))


# -- metrics --------------------------------------------------------------------------------------
def score(ranked: Sequence[str], relevant: set[str]) -> dict[str, float]:
    """R@5, R@10 (share of relevant items in the top k), nDCG@10 (binary), MRR (first relevant in top 10)."""
    top = list(dict.fromkeys(ranked))[:K]
    found5 = len(relevant.intersection(top[:5]))
    found10 = len(relevant.intersection(top))
    dcg = sum(1.0 / math.log2(i + 2) for i, item in enumerate(top) if item in relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(relevant), K)))
    rr = next((1.0 / (i + 1) for i, item in enumerate(top) if item in relevant), 0.0)
    return {
        "R@5": found5 / len(relevant),
        "R@10": found10 / len(relevant),
        "nDCG@10": dcg / ideal if ideal else 0.0,
        "MRR": rr,
    }


METRICS = ("R@5", "R@10", "nDCG@10", "MRR")


# -- one conversation -----------------------------------------------------------------------------
def run_conversation(
    sample: dict[str, Any],
    modes: Sequence[str],
    granularities: Sequence[str],
    tmp_root: Path,
    with_session_ids: bool = True,
) -> dict[str, Any]:
    started = time.perf_counter()
    conv = sample["conversation"]
    sessions = sessions_of(conv)
    session_of_turn = {t["dia_id"]: key for key, turns in sessions for t in turns}
    out: dict[str, Any] = {
        "sample_id": sample.get("sample_id"),
        "turns": len(session_of_turn),
        "sessions": len(sessions),
        "remember_ms": {},
        "recall_ms": {},
        "scores": [],
        "unscoreable_items": [],
        "unscoreable_questions": 0,
        "no_evidence": 0,
        "fallback": {},
    }

    questions = []
    for qa in sample["qa"]:
        raw = qa.get("evidence") or []
        if not raw:
            out["no_evidence"] += 1
            continue
        ids = normalise_evidence(raw)
        good = [e for e in ids if e in session_of_turn]
        out["unscoreable_items"].extend(e for e in ids if e not in session_of_turn)
        if not good:
            out["unscoreable_questions"] += 1
            continue
        questions.append((qa["question"], int(qa["category"]), set(good), {session_of_turn[e] for e in good}))
    out["scored_questions"] = len(questions)

    for gran in granularities:
        work = Path(tempfile.mkdtemp(prefix=f"coffer-locomo-{gran}-", dir=tmp_root))
        try:
            svc = service_for(work / "home", modes)
            label: dict[str, str] = {}  # fact id -> dia_id (turn) or session key (session)
            timings = []
            if gran == "turn":
                items = [(t["dia_id"], turn_text(t), key) for key, turns in sessions for t in turns]
            else:
                items = [
                    (key, "\n".join(turn_text(t) for t in turns), key) for key, turns in sessions if turns
                ]
            for title, text, key in items:
                # What an agent remembering a chat session passes: the session it came from.
                origin = f"{sample.get('sample_id')}-{key}" if with_session_ids else None
                t0 = time.perf_counter()
                result = svc.remember(text, title=title, store=STORE, origin_session_id=origin)
                timings.append(ms(time.perf_counter() - t0))
                label[result.fact.id] = title
            out["remember_ms"][gran] = timings
            for mode in modes:
                run = runner_for(mode)
                lat = []
                fell_back = 0
                for question, category, turn_ids, session_ids in questions:
                    t0 = time.perf_counter()
                    res = run(svc, question, K)
                    lat.append(ms(time.perf_counter() - t0))
                    fell_back += int(res.fallback)
                    ranked = [label.get(h.id, "?") for h in res.hits]
                    relevant = turn_ids if gran == "turn" else session_ids
                    out["scores"].append(
                        {"mode": mode, "granularity": gran, "category": category, **score(ranked, relevant)}
                    )
                out["recall_ms"][f"{mode}/{gran}"] = lat
                out["fallback"][f"{mode}/{gran}"] = fell_back
            svc.close()
        finally:
            shutil.rmtree(work, ignore_errors=True)
    out["seconds"] = time.perf_counter() - started
    return out


# -- report ---------------------------------------------------------------------------------------
def aggregate(
    scores: list[dict[str, Any]], modes: Sequence[str], granularities: Sequence[str]
) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for s in scores:
        groups[(s["mode"], s["granularity"], str(s["category"]))].append(s)
        if s["category"] in MAIN_CATEGORIES:
            groups[(s["mode"], s["granularity"], "1-4")].append(s)
        # Peers that publish LoCoMo retrieval recall (e.g. MemPalace's locomo_bench.py) average the
        # same share-of-evidence recall over every question, adversarial ones included: this row
        # is the figure to set beside theirs; "1-4" stays ours.
        groups[(s["mode"], s["granularity"], "1-5")].append(s)
    rows = []
    for mode in modes:
        for gran in granularities:
            for cat in ("1-4", "1", "2", "3", "4", "5", "1-5"):
                items = groups.get((mode, gran, cat), [])
                name = {"1-4": "overall", "1-5": "all (as peers)"}.get(cat) or CATEGORIES[int(cat)]
                row: dict[str, Any] = {
                    "mode": mode,
                    "granularity": gran,
                    "category": cat,
                    "name": name,
                    "n": len(items),
                }
                for metric in METRICS:
                    row[metric] = sum(i[metric] for i in items) / len(items) if items else float("nan")
                rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data",
        default=str(DEFAULT_DATA),
        help="path of locomo10.json (default: ../shared/bench/locomo10.json relative to the repository root)",
    )
    parser.add_argument(
        "--modes", default="grep,keyword", help="comma-separated recall modes (default grep,keyword)"
    )
    parser.add_argument(
        "--embedder",
        default="auto",
        help="embedding provider for vector/hybrid: auto (the built-in multilingual-e5), minilm, openai, "
        "a plugin's name",
    )
    parser.add_argument(
        "--granularity", default="turn,session", help="comma-separated: turn, session (default both)"
    )
    parser.add_argument(
        "--conversations",
        type=int,
        default=0,
        help="only the first N conversations (default all; for a quick check)",
    )
    parser.add_argument(
        "--split",
        choices=("all", "dev", "test"),
        default="all",
        help="dev = conversations 0-4 (tune on these only), test = 5-9 (default all)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=2,
        help="conversations run in parallel processes (default 2; latency figures are "
        "cleaner with 1, the scores are the same)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the raw figures as JSON to PATH")
    parser.add_argument(
        "--embedding-cache",
        metavar="PATH",
        help="keep every vector in this SQLite file and reuse it on the next run (the "
        "same model's vectors, computed once; for tuning runs: see bench/_embed_cache.py)",
    )
    parser.add_argument(
        "--no-session-ids",
        dest="session_ids",
        action="store_false",
        help="remember turns and sessions without origin_session_id (by default each "
        "fact names its LoCoMo session, '<sample_id>-session_<n>', as an agent "
        "remembering a chat session would)",
    )
    parser.add_argument("--tmpdir", help="where to create the temporary homes (default: system)")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    os.environ["COFFER_BENCH_EMBEDDER"] = args.embedder  # read by the worker processes
    if args.embedding_cache:
        os.environ["COFFER_BENCH_EMBED_CACHE"] = str(Path(args.embedding_cache).resolve())
    grans = [g.strip() for g in args.granularity.split(",") if g.strip()]
    if not modes:
        parser.error("--modes is empty")
    if not grans or any(g not in GRANULARITIES for g in grans):
        parser.error(f"--granularity takes {', '.join(GRANULARITIES)}")

    data = load(Path(args.data))
    data = {"all": data, "dev": data[:DEV_CONVERSATIONS], "test": data[DEV_CONVERSATIONS:]}[args.split]
    if args.conversations:
        data = data[: args.conversations]
    tmp_root = Path(args.tmpdir or tempfile.gettempdir())
    env = environment(str(tmp_root))
    env["data"] = f"{Path(args.data).resolve()} ({args.split} split)"
    env["session_ids"] = "on (origin_session_id per LoCoMo session)" if args.session_ids else "off"
    print_environment(env)

    started = time.perf_counter()
    jobs = max(1, min(args.jobs, len(data)))
    results: dict[int, dict[str, Any]] = {}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {
            pool.submit(run_conversation, sample, modes, grans, tmp_root, args.session_ids): i
            for i, sample in enumerate(data)
        }
        for future in as_completed(futures):
            i = futures[future]
            results[i] = future.result()
            print(
                f"  [{len(results)}/{len(data)}] {results[i]['sample_id']}: {results[i]['turns']} turns, "
                f"{results[i]['seconds']:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    per_conv = [results[i] for i in range(len(data))]
    elapsed = time.perf_counter() - started

    scores = [s for c in per_conv for s in c["scores"]]
    rows = aggregate(scores, modes, grans)
    unscoreable = [e for c in per_conv for e in c["unscoreable_items"]]
    n_questions = sum(len(s["qa"]) for s in data)
    scored_q = sum(c["scored_questions"] for c in per_conv)

    print(
        table(
            ["mode", "granularity", "category", "questions", *METRICS],
            [
                [
                    r["mode"],
                    r["granularity"],
                    f"{r['category']} {r['name']}",
                    r["n"],
                    *(r[m] for m in METRICS),
                ]
                for r in rows
            ],
            digits=3,
            left=3,
            title=f"LoCoMo retrieval quality (top {K}; overall = categories 1-4; 5 adversarial apart; "
            "1-5 = every question, as peers average)",
        )
    )
    print()
    summary_rows = []
    for r in rows:
        if r["category"] == "1-4":
            summary_rows.append([r["mode"], r["granularity"], r["n"], *(r[m] for m in METRICS)])
    print(
        table(
            ["mode", "granularity", "questions", *METRICS],
            summary_rows,
            digits=3,
            left=2,
            title="Overall (categories 1-4)",
        )
    )
    print()

    lat_rows = []
    latency: dict[str, Any] = {}
    for gran in grans:
        rem = [t for c in per_conv for t in c["remember_ms"].get(gran, [])]
        latency[f"remember/{gran}"] = summary(rem)
        lat_rows.append(
            [
                f"remember ({gran} facts)",
                len(rem),
                *(latency[f"remember/{gran}"][k] for k in ("p50", "p95", "max")),
            ]
        )
    fallbacks = {}
    for mode in modes:
        for gran in grans:
            key = f"{mode}/{gran}"
            lat = [t for c in per_conv for t in c["recall_ms"].get(key, [])]
            latency[f"recall/{key}"] = summary(lat)
            fallbacks[key] = sum(c["fallback"].get(key, 0) for c in per_conv)
            lat_rows.append(
                [
                    f"recall {mode}, {gran} facts",
                    len(lat),
                    *(latency[f"recall/{key}"][k] for k in ("p50", "p95", "max")),
                ]
            )
    print(
        table(
            ["call (ms)", "n", "p50", "p95", "max"],
            lat_rows,
            title=f"Latency ({jobs} conversation(s) in parallel on {os.cpu_count()} cores)",
        )
    )
    print()

    no_ev = sum(c["no_evidence"] for c in per_conv)
    unq = sum(c["unscoreable_questions"] for c in per_conv)
    turns = sum(c["turns"] for c in per_conv)
    sess = sum(c["sessions"] for c in per_conv)
    print(
        f"conversations: {len(data)}, turns: {turns}, sessions: {sess}, questions: {n_questions} "
        f"(scored: {scored_q}, without evidence: {no_ev}, all evidence unmatched: {unq})"
    )
    print(
        f"unscoreable evidence items (match no turn): {len(unscoreable)}"
        + (f": {', '.join(sorted(set(unscoreable)))}" if unscoreable else "")
    )
    for key, n in fallbacks.items():
        if n:
            print(f"note: {key} fell back to another mode on {n} recalls (RecallResult.fallback)")
    env["load_average_at_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"run time: {elapsed:.0f} s ({jobs} parallel job(s)); load average at start "
        f"{env['load_average_at_start']}, at end {env['load_average_at_end']}"
    )

    write_json(
        args.json,
        {
            "environment": env,
            "modes": modes,
            "granularities": grans,
            "k": K,
            "seconds": elapsed,
            "jobs": jobs,
            "table": rows,
            "latency_ms": latency,
            "unscoreable_items": unscoreable,
            "questions": n_questions,
            "scored_questions": scored_q,
            "no_evidence": no_ev,
            "unscoreable_questions": unq,
            "fallback": fallbacks,
            "conversations": [
                {
                    k: c[k]
                    for k in (
                        "sample_id",
                        "turns",
                        "sessions",
                        "scored_questions",
                        "unscoreable_questions",
                        "seconds",
                    )
                }
                for c in per_conv
            ],
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
