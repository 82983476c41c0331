"""Scrubber benchmark: ``scrub_text`` and ``redact_secrets`` on a seeded corpus of agent messages.

Messages of about 2 KB and 20 KB mix prose, short code fences, JSON, YAML, shell commands, log
lines and URLs (git SHAs, UUIDs, sha256 digests, base64 of plain text), and one in five carries a
planted fake secret (built from random characters at run time). Figures are CPU time of this
process (``time.process_time``: on a shared machine, wall time mostly measures the neighbours),
per message and in MB/s over the whole corpus; the seed is fixed, so runs compare.

    .venv/bin/python bench/scrub.py [--messages 300] [--repeats 3] [--json out.json]

``--quality`` measures what ``redact_secrets`` catches instead, on the labelled set of
``bench/_scrub_labelled.py`` (secrets in some 60 formats, and hashes, ids, code and prose that
hold none), and the held-out set of ``bench/_scrub_heldout.py`` (written before the session-14
rules for keyless secrets, never tuned on): recall (secrets whose every character is gone), precision (of the texts it changed,
those that held a secret), and the names of the misses and false alarms. ``--fixtures DIR`` adds
the samples of ``/work/shared/fixtures/agents/tools/gen_samples.py DIR``: each planted secret its
README lists, searched for in every sample file before and after redaction.

    .venv/bin/python bench/scrub.py --quality [--fixtures DIR] [--json out.json]
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
from _scrub_heldout import heldout
from _scrub_labelled import cases, score

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


def planted(fixtures: str) -> list[str]:
    """The fake secrets the sample generator's README lists (backquoted, 12+ characters), and the
    first lines of its PEM blocks (a block is redacted whole, its BEGIN line included)."""
    with open(os.path.join(fixtures, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    section = readme.split("## Fake secrets", 1)[1].split("\n## ", 1)[0]
    found = [part for part in section.split("`")[1::2] if len(part) >= 12]
    return [*found, "BEGIN RSA PRIVATE KEY", "BEGIN OPENSSH PRIVATE KEY"]


def fixture_leaks(fixtures: str) -> dict[str, list[int]]:
    """For each planted secret: the sample files that hold it before, and after, redaction."""
    texts = []
    for dirpath, _dirs, files in os.walk(fixtures):
        for name in sorted(files):
            if name != "README.md":
                with open(os.path.join(dirpath, name), "rb") as handle:
                    texts.append(handle.read().decode("utf-8", "replace"))
    redacted = [redact_secrets(t) for t in texts]
    return {s: [sum(s in t for t in texts), sum(s in t for t in redacted)] for s in planted(fixtures)}


def quality(fixtures: str | None) -> dict[str, object]:
    out: dict[str, object] = {
        "labelled": score(redact_secrets, cases(random.Random(SEED))),
        "heldout": score(redact_secrets, heldout(random.Random(SEED))),
    }
    if fixtures:
        out["fixtures"] = fixture_leaks(fixtures)
    return out


def print_quality(out: dict[str, object]) -> None:
    for name in ("labelled", "heldout"):
        s: dict[str, object] = out[name]  # type: ignore[assignment]
        print(
            f"{name} set: {s['positives']} texts with a secret, {s['negatives']} without; "
            f"recall {s['recall']:.3f}, precision {s['precision']:.3f}"
        )
        print(f"  missed: {', '.join(s['missed']) or '-'}")  # type: ignore[arg-type]
        print(f"  false alarms: {', '.join(s['false_alarms']) or '-'}")  # type: ignore[arg-type]
    leaks: dict[str, list[int]] = out.get("fixtures", {})  # type: ignore[assignment]
    for secret, (before, after) in leaks.items():
        print(f"  fixture secret {secret[:12]}…: in {before} sample files, {after} after redaction")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("--quality", action="store_true", help="recall and precision on the labelled set")
    parser.add_argument("--fixtures", help="with --quality: a folder gen_samples.py wrote")
    args = parser.parse_args()
    env = environment()
    print_environment(env)
    if args.quality:
        result = quality(args.fixtures)
        write_json(args.json, {"environment": env, "quality": result})
        print_quality(result)
        return
    out = run(args.messages, args.repeats)
    write_json(args.json, {"environment": env, "results": out})
    rows = [[k, v["n"], v["p50"], v["p95"], v["max"], v["mb_per_s"]] for k, v in out.items()]  # type: ignore[index]
    print(table(["what (message size)", "n", "p50 ms", "p95 ms", "max ms", "MB/s"], rows))


if __name__ == "__main__":
    main()
