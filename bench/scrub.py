"""Scrubber benchmark: ``scrub_text`` and ``redact_secrets`` on a seeded corpus of agent messages.

Messages of about 2 KB and 20 KB mix prose, short code fences, JSON, YAML, shell commands, log
lines and URLs (git SHAs, UUIDs, sha256 digests, base64 of plain text), and one in five carries a
planted fake secret (built from random characters at run time). Figures are CPU time of this
process (``time.process_time``: on a shared machine, wall time mostly measures the neighbours),
per message and in MB/s over the whole corpus; the seed is fixed, so runs compare.

    .venv/bin/python bench/scrub.py [--messages 300] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import random
import string
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import environment, ms, print_environment, summary, table, write_json

from coffer_memory._transcripts.scrub import redact_secrets, scrub_text

SEED = 20261201
ALNUM = string.ascii_letters + string.digits
WORDS = [
    *[
        "deploy",
        "release",
        "branch",
        "pipeline",
        "docker",
        "cache",
        "redis",
        "postgres",
        "migration",
        "schema",
        "index",
        "query",
        "latency",
    ],
    *[
        "retry",
        "token",
        "secret",
        "password",
        "key",
        "the",
        "a",
        "to",
        "of",
        "and",
        "in",
        "we",
        "should",
        "use",
        "this",
        "config",
        "file",
        "test",
        "build",
        "run",
    ],
]
FENCE = "`" * 3


def _rand(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _secret(rng: random.Random) -> str:
    pick = rng.randrange(6)
    if pick == 0:
        return "gh" + "p_" + _rand(rng, ALNUM, 36)
    if pick == 1:
        return "DB_PASSWORD=" + _rand(rng, ALNUM, 16)
    if pick == 2:
        return "https://deploy:" + _rand(rng, ALNUM, 14) + "@git.example.com/r.git"
    if pick == 3:
        return "S" + "K" + _rand(rng, "0123456789abcdef", 32)
    if pick == 4:
        return base64.b64encode(rng.randbytes(64)).decode()
    return "Authorization: Bearer " + _rand(rng, ALNUM, 40)


def _block(rng: random.Random) -> str:
    pick = rng.randrange(8)
    prose = " ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 60)))
    if pick == 0:
        return f"{FENCE}python\ndef f(x):\n    return x + {rng.randint(1, 9)}  # {prose[:40]}\n{FENCE}"
    if pick == 1:
        return json.dumps(
            {"id": str(uuid.UUID(int=rng.getrandbits(128))), "sha": _rand(rng, "0123456789abcdef", 40)}
        )
    if pick == 2:
        return f"image: app@sha256:{hashlib.sha256(prose.encode()).hexdigest()}\nreplicas: 3\nname: web"
    if pick == 3:
        return f"$ git log --oneline -1\n{_rand(rng, '0123456789abcdef', 7)} {prose[:50]}"
    if pick == 4:
        return f"see https://github.com/org/repo/commit/{_rand(rng, '0123456789abcdef', 40)} and https://example.com/docs/{rng.choice(WORDS)}"
    if pick == 5:
        return "echo " + base64.b64encode(prose.encode()).decode()[:60] + " | base64 -d"
    if pick == 6:
        return f"2026-12-01T10:00:0{rng.randint(0, 9)}Z INFO {prose[:60]}"
    return prose


def corpus(n: int, size: int, rng: random.Random) -> list[str]:
    out = []
    for _ in range(n):
        parts: list[str] = []
        while sum(len(p) + 2 for p in parts) < size:
            parts.append(_block(rng))
        if rng.random() < 0.2:
            parts.insert(rng.randrange(len(parts)), _secret(rng))
        out.append("\n\n".join(parts))
    return out


def run(messages: int, repeats: int) -> dict[str, object]:
    rng = random.Random(SEED)
    results: dict[str, object] = {}
    for size in (2_000, 20_000):
        texts = corpus(messages if size == 2_000 else max(1, messages // 10), size, rng)
        total = sum(len(t) for t in texts)
        for name, fn in (
            ("scrub_text", lambda t: scrub_text(t, max_segment_chars=10**9)),
            ("redact_secrets", redact_secrets),
        ):
            per: list[float] = []
            start = time.process_time()
            for _ in range(repeats):
                for t in texts:
                    t0 = time.process_time()
                    fn(t)
                    per.append(ms(time.process_time() - t0))
            elapsed = time.process_time() - start
            results[f"{name}@{size}"] = {**summary(per), "mb_per_s": total * repeats / elapsed / 1e6}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    env = environment()
    print_environment(env)
    out = run(args.messages, args.repeats)
    write_json(args.json, {"environment": env, "results": out})
    rows = [[k, v["n"], v["p50"], v["p95"], v["max"], v["mb_per_s"]] for k, v in out.items()]  # type: ignore[index]
    print(table(["what (message size)", "n", "p50 ms", "p95 ms", "max ms", "MB/s"], rows))


if __name__ == "__main__":
    main()
