"""``coffer-hook`` wall time per call, as an agent pays it at every session start.

A temporary COFFER_HOME gets project and global rules for a real temporary git repository;
then each variant is run ``--calls`` times as a fresh subprocess fed a SessionStart payload,
and the wall time from spawn to exit is recorded. The baseline rows split the cost: the bare
interpreter, then the interpreter importing the hook module. Target (a goal, not an
assertion): coffer-hook SessionStart p50 <= 150 ms. The variants take turns call by call, with
CPU time beside wall time and ratios to the bare interpreter; ``--baseline DIR`` adds the
SessionStart call from another source tree (PYTHONPATH), so before and after come from one run.

    .venv/bin/python bench/hook.py [--calls 40] [--baseline DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (
    Variant,
    cached_bytecode,
    environment,
    floor_table,
    interleaved,
    print_environment,
    write_json,
)

from coffer_memory import MemoryService

TARGET_P50_MS = 150.0
HOOK = str(Path(sys.executable).parent / "coffer-hook")


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@example.invalid",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@example.invalid",
    }
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "init"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--baseline", default=None, help="a source tree to compare against (PYTHONPATH)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    env_info = environment()
    print_environment(env_info)
    tmp = Path(tempfile.mkdtemp(prefix="coffer-bench-hook-"))
    try:
        home, repo = tmp / "home", make_repo(tmp / "repo")
        with MemoryService(home) as svc:
            for i in range(20):
                svc.append_rule(f"Project rule {i}: run make lint before committing module {i}.", cwd=repo)
                svc.append_rule(f"Global rule {i}: keep answers short, example {i}.", store="global")
        env = cached_bytecode({**os.environ, "COFFER_HOME": str(home)}, tmp / "pycache")
        env.pop("COFFER_API_URL", None)
        env.pop("PYTHONPATH", None)
        start_payload = json.dumps(
            {
                "session_id": "bench",
                "cwd": str(repo),
                "hook_event_name": "SessionStart",
                "source": "startup",
                "transcript_path": str(tmp / "t.jsonl"),
            }
        ).encode()
        check = subprocess.run(
            [HOOK, "--agent", "claude-code"], input=start_payload, env=env, capture_output=True, check=True
        )
        bundle = json.loads(check.stdout)["hookSpecificOutput"]["additionalContext"]
        start = "coffer-hook SessionStart (40 rules)"
        floor = "python -c pass (interpreter start)"
        variants: list[Variant] = [
            (floor, [sys.executable, "-c", "pass"], b"", env),
            (
                "python -c 'import coffer_memory._agents.hook'",
                [sys.executable, "-c", "import coffer_memory._agents.hook"],
                b"",
                env,
            ),
            (start, [HOOK, "--agent", "claude-code"], start_payload, env),
            ("coffer-hook bad stdin (logged, no output)", [HOOK, "--agent", "claude-code"], b"not json", env),
        ]
        if args.baseline:
            baseline_env = {**env, "PYTHONPATH": str(Path(args.baseline).resolve())}
            variants.append(
                (f"{start}, baseline", [HOOK, "--agent", "claude-code"], start_payload, baseline_env)
            )
        figures = interleaved(variants, args.calls)
        load = os.getloadavg()[0]
        print(
            floor_table(
                figures,
                floor,
                f"coffer-hook per call (bundle {len(bundle)} chars, load {load:.1f} at the end)",
            )
        )
        p50 = figures[start]["wall"]["p50"]
        print(
            f"\ntarget SessionStart p50 <= {TARGET_P50_MS:.0f} ms: {'met' if p50 <= TARGET_P50_MS else 'missed'}"
        )
        write_json(args.json, {"environment": env_info, "figures": figures, "bundle_chars": len(bundle)})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
