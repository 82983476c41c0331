"""Session listing benchmark: cold (a new SessionLister parses every file) vs warm (nothing changed).

``--sessions`` synthetic sessions are written into a temporary agent home: 45 % Claude Code
(spread over 30 project folders, plus a subagent file per ten sessions), 45 % Codex rollouts (dated
folders) and 10 % OpenCode sessions in one ``opencode.db``. Each session has 20-200 lines of the
agents' real shapes: prompts, responses split over several lines, tool calls and tool output of
100 B - 2 KB (one in twenty 8-24 KB), reasoning, token counts. The seed is fixed.

A *cold* listing is ``SessionLister(homes)`` then ``list_sessions`` for each agent (the OS page
cache is warm after the first round: "cold" means our parse cache is empty). A *warm* listing is
the same lister again, nothing changed: a directory walk and a ``stat`` per file. The last row
re-lists after appending one line to one file (one file re-parsed). Target (a goal, not an
assertion): warm at least 20x faster than cold.

    .venv/bin/python bench/transcripts_list.py [--sessions 2000] [--repeats 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import environment, ms, print_environment, summary, table, write_json

from coffer_memory._agents.homes import AGENTS, AgentHomes
from coffer_memory._transcripts.listing import SessionLister

SEED = 20261120
TARGET_RATIO = 20.0
_VOCABULARY = (
    "deploy release branch pipeline docker cache redis postgres migration schema index query latency retry "
    "timeout queue worker cron token config parser compiler linter test fixture coverage frontend backend "
    "gateway route handler middleware auth session header proxy logging metrics alert rollback canary flag"
)
WORDS = _VOCABULARY.split(" ")


def sentence(r: random.Random, n: int) -> str:
    """``n`` words from the vocabulary."""
    return " ".join(r.choice(WORDS) for _ in range(n))


def tool_output(r: random.Random) -> str:
    """100 B - 2 KB of command output; one in twenty is a long log (8-24 KB)."""
    size = r.randint(8_000, 24_000) if r.random() < 0.05 else int(r.uniform(100, 2_000))
    lines, total = [], 0
    while total < size:
        line = f"{r.choice(WORDS)}/{r.choice(WORDS)}.py:{r.randint(1, 900)}: {sentence(r, r.randint(4, 14))}"
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


def iso(moment: datetime) -> str:
    """Claude Code's / Codex's timestamp format (UTC, milliseconds, Z)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def claude_session(r: random.Random, path: Path, cwd: str, start: datetime) -> None:
    """A Claude Code session of 20-200 lines."""
    sid, rows, now, parent = path.stem, [], start, None
    target = r.randint(20, 200)

    def line(kind: str, message: dict[str, Any], **extra: Any) -> None:
        nonlocal now, parent
        now += timedelta(seconds=r.uniform(0.2, 20))
        row = {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": cwd,
            "sessionId": sid,
            "version": "2.1.42",
            "gitBranch": "main",
            "type": kind,
            "message": message,
            **extra,
            "uuid": str(uuid.UUID(int=r.getrandbits(128), version=4)),
            "timestamp": iso(now),
        }
        parent = row["uuid"]
        rows.append(row)

    rows.append({"type": "permission-mode", "permissionMode": "default", "sessionId": sid})
    while len(rows) < target:
        line("user", {"role": "user", "content": sentence(r, r.randint(8, 60))})
        for _ in range(r.randint(1, 4)):  # a response spread over lines sharing message.id
            mid = f"msg_{r.getrandbits(64):016x}"
            line(
                "assistant",
                {
                    "id": mid,
                    "role": "assistant",
                    "model": "claude-opus-4-5",
                    "content": [{"type": "thinking", "thinking": sentence(r, 30), "signature": "x" * 80}],
                },
            )
            line(
                "assistant",
                {
                    "id": mid,
                    "role": "assistant",
                    "model": "claude-opus-4-5",
                    "content": [{"type": "text", "text": sentence(r, r.randint(10, 80))}],
                },
            )
            tool = f"toolu_{r.getrandbits(64):016x}"
            line(
                "assistant",
                {
                    "id": mid,
                    "role": "assistant",
                    "model": "claude-opus-4-5",
                    "content": [
                        {"type": "tool_use", "id": tool, "name": "Bash", "input": {"command": sentence(r, 5)}}
                    ],
                },
            )
            out = tool_output(r)
            line(
                "user",
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool, "content": out}]},
                toolUseResult={"stdout": out, "stderr": ""},
            )
    if r.random() < 0.5:
        rows.append({"type": "ai-title", "aiTitle": sentence(r, 6), "sessionId": sid})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def codex_session(r: random.Random, folder: Path, cwd: str, start: datetime) -> None:
    """A Codex rollout of 20-200 lines."""
    sid = str(uuid.UUID(int=r.getrandbits(128), version=4))
    rows: list[dict[str, Any]] = []
    now = start
    target = r.randint(20, 200)

    def line(kind: str, payload: dict[str, Any]) -> None:
        nonlocal now
        now += timedelta(seconds=r.uniform(0.2, 20))
        rows.append({"timestamp": iso(now), "type": kind, "payload": payload})

    def message(role: str, text: str) -> None:
        block = "output_text" if role == "assistant" else "input_text"
        line("response_item", {"type": "message", "role": role, "content": [{"type": block, "text": text}]})
        line("event_msg", {"type": "user_message" if role == "user" else "agent_message", "message": text})

    line(
        "session_meta",
        {
            "id": sid,
            "timestamp": iso(now),
            "cwd": cwd,
            "originator": "codex_cli_rs",
            "cli_version": "0.98.0",
            "base_instructions": {"text": sentence(r, 200)},
        },
    )
    line(
        "response_item",
        {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": f"<environment_context>\n  <cwd>{cwd}</cwd>\n</environment_context>",
                }
            ],
        },
    )
    while len(rows) < target:
        line("turn_context", {"cwd": cwd, "approval_policy": "on-request", "model": "gpt-5.1-codex"})
        message("user", sentence(r, r.randint(8, 60)))
        for _ in range(r.randint(1, 4)):
            line(
                "response_item",
                {
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": sentence(r, 12)}],
                    "encrypted_content": "g" * 400,
                },
            )
            call = f"call_{r.getrandbits(64):016x}"
            line(
                "response_item",
                {
                    "type": "function_call",
                    "name": "shell_command",
                    "call_id": call,
                    "arguments": json.dumps({"command": sentence(r, 5)}),
                },
            )
            line("response_item", {"type": "function_call_output", "call_id": call, "output": tool_output(r)})
            line("event_msg", {"type": "token_count", "info": {"total_token_usage": {"input_tokens": 1000}}})
        message("assistant", sentence(r, r.randint(10, 80)))
    name = f"rollout-{start.strftime('%Y-%m-%dT%H-%M-%S')}-{sid}.jsonl"
    day = folder / start.strftime("%Y") / start.strftime("%m") / start.strftime("%d")
    day.mkdir(parents=True, exist_ok=True)
    (day / name).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def opencode_sessions(r: random.Random, db: Path, count: int, cwds: list[str], start: datetime) -> None:
    """``count`` sessions in one v1.2-layout database (WAL mode, closed cleanly)."""
    db.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.executescript(
        """
        CREATE TABLE session (id text PRIMARY KEY, project_id text, parent_id text, directory text, title text,
          time_created integer, time_updated integer);
        CREATE TABLE message (id text PRIMARY KEY, session_id text, time_created integer, time_updated integer,
          data text);
        CREATE TABLE part (id text PRIMARY KEY, message_id text, session_id text, time_created integer,
          time_updated integer, data text);
        CREATE INDEX message_session_idx ON message (session_id, time_created, id);
        CREATE INDEX part_message_idx ON part (message_id, id);
        """
    )
    n = 0
    for i in range(count):
        sid = f"ses_{i:06d}{r.getrandbits(40):010x}"
        t = int((start + timedelta(hours=i)).timestamp() * 1000)
        con.execute(
            "INSERT INTO session VALUES (?,?,?,?,?,?,?)",
            (sid, "p", None, r.choice(cwds), sentence(r, 6), t, t + 600_000),
        )
        for turn in range(r.randint(3, 30)):
            for role in ("user", "assistant"):
                n += 1
                mid, mt = f"msg_{n:012d}", t + turn * 20_000 + (role == "assistant") * 5000
                con.execute(
                    "INSERT INTO message VALUES (?,?,?,?,?)",
                    (mid, sid, mt, mt + 4000, json.dumps({"role": role, "time": {"created": mt}})),
                )
                parts = [{"type": "text", "text": sentence(r, r.randint(8, 60))}]
                if role == "assistant":
                    parts += [
                        {"type": "reasoning", "text": sentence(r, 20)},
                        {
                            "type": "tool",
                            "tool": "bash",
                            "state": {"status": "completed", "output": tool_output(r)},
                        },
                        {"type": "step-finish", "reason": "stop"},
                    ]
                for k, part in enumerate(parts):
                    con.execute(
                        "INSERT INTO part VALUES (?,?,?,?,?,?)",
                        (f"prt_{n:012d}{k}", mid, sid, mt, mt, json.dumps(part)),
                    )
    con.commit()
    con.close()


def generate(root: Path, sessions: int) -> tuple[AgentHomes, dict[str, int], int]:
    """Write the sample home; returns its homes, sessions per agent and bytes written."""
    r = random.Random(SEED)
    env = {
        "HOME": str(root / "home"),
        "CLAUDE_CONFIG_DIR": str(root / "claude"),
        "CODEX_HOME": str(root / "codex"),
        "XDG_DATA_HOME": str(root / "data"),
        "XDG_CONFIG_HOME": str(root / "config"),
    }
    homes = AgentHomes.from_env(env)
    cwds = [f"/home/dev/src/project-{i:02d}" for i in range(30)]
    counts = {"claude-code": sessions * 45 // 100, "codex": sessions * 45 // 100}
    counts["opencode"] = sessions - counts["claude-code"] - counts["codex"]
    start = datetime(2026, 6, 1, tzinfo=UTC)
    for i in range(counts["claude-code"]):
        cwd = cwds[i % len(cwds)]
        folder = homes.claude / "projects" / cwd.replace("/", "-")
        sid = str(uuid.UUID(int=r.getrandbits(128), version=4))
        claude_session(r, folder / f"{sid}.jsonl", cwd, start + timedelta(hours=i))
        if i % 10 == 0:  # subagent transcripts are walked past, never parsed
            claude_session(
                r, folder / sid / "subagents" / "agent-a1b2c3.jsonl", cwd, start + timedelta(hours=i)
            )
    for i in range(counts["codex"]):
        codex_session(r, homes.codex / "sessions", r.choice(cwds), start + timedelta(hours=i, minutes=7))
    opencode_sessions(r, homes.opencode_data / "opencode.db", counts["opencode"], cwds, start)
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    return homes, counts, size


def list_all(lister: SessionLister) -> int:
    """One listing of every agent (the first page, as a UI would ask); returns the sessions found."""
    return sum(lister.list_sessions(agent, limit=50).total for agent in AGENTS)


def run(sessions: int, repeats: int, warm_repeats: int, tmp: str | None) -> dict[str, Any]:
    """Generate, then time cold, warm and one-file-changed listings."""
    root = Path(tempfile.mkdtemp(prefix="coffer-bench-transcripts-", dir=tmp))
    try:
        t0 = time.perf_counter()
        homes, counts, size = generate(root, sessions)
        out: dict[str, Any] = {"sessions": counts, "bytes": size, "generate_s": time.perf_counter() - t0}
        cold: list[float] = []
        per_agent: dict[str, list[float]] = {agent: [] for agent in AGENTS}
        lister = SessionLister(homes)
        found = 0
        for _ in range(repeats):
            lister = SessionLister(homes)
            found = total = 0
            for agent in AGENTS:
                t0 = time.perf_counter()
                found += lister.list_sessions(agent, limit=50).total
                elapsed = ms(time.perf_counter() - t0)
                per_agent[agent].append(elapsed)
                total += elapsed
            cold.append(total)
        scans_before = lister.scans
        warm: list[float] = []
        for _ in range(warm_repeats):
            t0 = time.perf_counter()
            list_all(lister)
            warm.append(ms(time.perf_counter() - t0))
        out["warm_scans"] = lister.scans - scans_before  # must be 0
        touched: list[float] = []
        victims = sorted((homes.claude / "projects").glob("*/*.jsonl"))[:warm_repeats]
        for path in victims:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(
                    json.dumps(
                        {
                            "type": "user",
                            "cwd": "/x",
                            "uuid": str(uuid.uuid4()),
                            "timestamp": iso(datetime.now(UTC)),
                            "message": {"role": "user", "content": "one more"},
                        }
                    )
                    + "\n"
                )
            t0 = time.perf_counter()
            list_all(lister)
            touched.append(ms(time.perf_counter() - t0))
        out.update(
            found=found,
            cold_ms=summary(cold),
            warm_ms=summary(warm),
            one_changed_ms=summary(touched),
            cold_per_agent_ms={agent: summary(v) for agent, v in per_agent.items()},
        )
        out["warm_over_cold"] = out["cold_ms"]["p50"] / out["warm_ms"]["p50"]
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=2000, help="sessions to generate (default 2000)")
    parser.add_argument("--repeats", type=int, default=5, help="cold listings (default 5)")
    parser.add_argument("--warm-repeats", type=int, default=30, help="warm listings (default 30)")
    parser.add_argument("--json", metavar="PATH", help="also write the raw figures as JSON to PATH")
    parser.add_argument("--tmpdir", help="where to generate the sessions (default: the system temp dir)")
    args = parser.parse_args(argv)

    env = environment(args.tmpdir or tempfile.gettempdir())
    print_environment(env)
    out = run(args.sessions, args.repeats, args.warm_repeats, args.tmpdir)
    payload = {"environment": env, "results": out, "target_warm_over_cold": TARGET_RATIO}
    write_json(args.json, payload)
    counts = ", ".join(f"{agent} {n}" for agent, n in out["sessions"].items())
    print(
        f"{sum(out['sessions'].values())} sessions ({counts}), {out['bytes'] / 1e6:.1f} MB, "
        f"generated in {out['generate_s']:.1f} s; {out['found']} listed\n"
    )
    rows = [
        [
            "cold: new lister, all agents",
            out["cold_ms"]["n"],
            out["cold_ms"]["p50"],
            out["cold_ms"]["p95"],
            out["cold_ms"]["max"],
        ],
        *[
            [f"  cold, {agent} only", s["n"], s["p50"], s["p95"], s["max"]]
            for agent, s in out["cold_per_agent_ms"].items()
        ],
        [
            "warm: same lister, nothing changed",
            out["warm_ms"]["n"],
            out["warm_ms"]["p50"],
            out["warm_ms"]["p95"],
            out["warm_ms"]["max"],
        ],
        [
            "warm after appending to 1 file",
            out["one_changed_ms"]["n"],
            out["one_changed_ms"]["p50"],
            out["one_changed_ms"]["p95"],
            out["one_changed_ms"]["max"],
        ],
    ]
    print(table(["listing (ms)", "runs", "p50", "p95", "max"], rows, title="Session listing"))
    ratio = out["warm_over_cold"]
    verdict = "met" if ratio >= TARGET_RATIO else "NOT met"
    print(
        f"\nwarm/cold speed-up (p50): {ratio:.0f}x (target >= {TARGET_RATIO:.0f}x: {verdict}); "
        f"files parsed by warm listings: {out['warm_scans']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
