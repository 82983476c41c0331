"""Randomised fault sweep: many real processes writing one home at once, and writers killed with
SIGKILL at random points; afterwards every acknowledged write must be in the files and the index
must agree with them.

Two phases (``all`` runs both):

``concurrency``
    For ``--seconds``: Python API workers (remember / edit / forget / recall / journal / handoff on
    facts of their own), a CLI worker (``coffer remember`` / ``coffer facts edit`` /
    ``coffer facts rm``), a REST worker against a real ``coffer-api``, an MCP worker over a real
    ``coffer-mcp`` stdio session, and a maintenance worker (``reindex``, ``reindex --rebuild``,
    ``doctor``, the INDEX.md lane) all on one home.
``crash``
    ``--kills`` times: a Python API writer doing random operations (remember, edit, forget,
    journal, handoff, reindex, rebuild, store label, INDEX.md) is killed with SIGKILL after a random delay; a fresh process then checks.

``damage``
    Each damage case a real machine produces (a FIFO, socket or device named ``*.md``, an
    unreadable fact file, a binary file, a 200 MB file, NFC and NFD spellings of one name, a
    symlink loop, dates in the future, a store folder or home the process may not write, the
    index's WAL/SHM files deleted while a process runs) in a fresh home; a child process (as
    another user than root where permissions matter, through ``setpriv``) then recalls (keyword,
    grep), lists, gets, runs doctor and reindex, remembers and recalls the new fact. A step that
    hangs (60 s), or fails with anything but a typed error, or a read that fails at all, is a
    violation. One table row per case.

The check, after each phase (and after each kill): every acknowledged live fact can be read and
holds its token, keyword and grep recall find it, a replaced or forgotten token is found nowhere
(the operation in flight when a writer was killed may have happened or not), acknowledged journal
and handoff tokens are in their lanes, no temp file is left visible, ``doctor`` finds no broken
file and no index mismatch, and a rebuilt index answers the same. Exit status 1 on any violation.

    .venv/bin/python bench/fault_sweep.py all --seconds 20 --kills 30 --seed 1
    .venv/bin/python bench/fault_sweep.py damage
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


# -- the acknowledgement log every worker writes --------------------------------------------------
class Acks:
    """One worker's log: ``begin`` before an operation, ``ack`` once it returned (flushed, so a
    killed worker's log holds every acknowledgement it made)."""

    def __init__(self, path: Path) -> None:
        self._f = path.open("a", encoding="utf-8")

    def write(self, kind: str, **data: Any) -> None:
        self._f.write(json.dumps({"k": kind, **data}) + "\n")
        self._f.flush()


@dataclass
class Model:
    """What the acknowledgements say the home holds."""

    alive: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (store, token)
    gone: dict[str, tuple[str, str]] = field(default_factory=dict)  # old token -> (store, id)
    lanes: list[tuple[str, str]] = field(default_factory=list)  # (journal|handoff, token)
    uncertain_ids: set[str] = field(default_factory=set)  # in flight at a kill
    uncertain_tokens: set[str] = field(default_factory=set)
    acks: int = 0

    def load(self, path: Path) -> None:
        """Replay one worker's log (its order is the order of its own operations)."""
        pending: dict[str, Any] | None = None
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
            if not line.endswith("\n"):
                continue  # torn by a kill: not an acknowledgement
            try:
                rec = json.loads(line)
            except ValueError:  # a line torn by a kill, with the next record after it
                continue
            if rec["k"] in ("begin", "killed"):
                if pending is not None:
                    self._unsettled(pending)
                pending = rec if rec["k"] == "begin" else None
                continue
            pending = None
            self.acks += 1
            op = rec["k"]
            if op == "remember":
                self.alive[rec["id"]] = (rec["store"], rec["token"])
            elif op == "edit":
                old = self.alive.get(rec["id"])
                if old is not None:
                    self.gone[old[1]] = (old[0], rec["id"])
                self.alive[rec["id"]] = (rec["store"], rec["token"])
            elif op == "forget":
                old = self.alive.pop(rec["id"], None)
                if old is not None:
                    self.gone[old[1]] = (old[0], rec["id"])
            elif op in ("journal", "handoff"):
                self.lanes.append((op, rec["token"]))
        if pending is not None:
            self._unsettled(pending)

    def _unsettled(self, pending: dict[str, Any]) -> None:
        """The operation a kill interrupted: either outcome is fine."""
        if pending.get("id"):
            self.uncertain_ids.add(pending["id"])
            old = self.alive.get(pending["id"])
            if old is not None:
                self.uncertain_tokens.add(old[1])
        if pending.get("token"):
            self.uncertain_tokens.add(pending["token"])


# -- workers (run as child processes of this script) ---------------------------------------------
def _token(rng: random.Random, who: str, i: int) -> str:
    return f"tok{who}x{i:05d}q{rng.randrange(10**6):06d}"


def _turns(rng: random.Random, who: str, stop: str) -> Iterator[tuple[int, str, float]]:
    """Each operation's number, token and die roll, until ``stop`` exists."""
    i = 0
    while not os.path.exists(stop):
        i += 1
        yield i, _token(rng, who, i), rng.random()


def _text(rng: random.Random, token: str) -> str:
    filler = " ".join(f"word{rng.randrange(500)}" for _ in range(rng.choice((5, 40, 400))))
    return f"Sweep fact {token}.\n\n{filler}"


def worker_api(home: str, repo: str, who: str, seed: int, log: str, stop: str, crash: bool) -> None:
    """Random operations through the Python API until ``stop`` exists (or a kill)."""
    from coffer_memory import MemoryService

    rng = random.Random(seed)
    acks = Acks(Path(log))
    mine: dict[str, str] = {}  # id -> store
    with MemoryService(home) as svc:
        svc.remember(f"Warm-up {who}.", title=f"warm {who}", scope="global", cwd=repo)
        print("ready", flush=True)
        for i, token, roll in _turns(rng, who, stop):
            if roll < 0.45 or not mine:
                scope = rng.choice(("project", "global"))
                acks.write("begin", token=token)
                r = svc.remember(_text(rng, token), title=f"{who} {i}", scope=scope, cwd=repo)  # type: ignore[arg-type]
                mine[r.fact.id] = r.store
                acks.write("remember", id=r.fact.id, store=r.store, token=token)
            elif roll < 0.60:
                fid = rng.choice(sorted(mine))
                acks.write("begin", id=fid, token=token)
                svc.edit_fact(fid, body=_text(rng, token), store=mine[fid])
                acks.write("edit", id=fid, store=mine[fid], token=token)
            elif roll < 0.70:
                fid = rng.choice(sorted(mine))
                acks.write("begin", id=fid)
                svc.delete_fact(fid, store=mine.pop(fid))
                acks.write("forget", id=fid)
            elif roll < 0.75:
                acks.write("begin", token=token)
                svc.journal_append(f"journal {token}", cwd=repo)
                acks.write("journal", token=token)
            elif roll < 0.78:
                acks.write("begin", token=token)
                svc.save_handoff(f"handoff {token}", cwd=repo)
                acks.write("handoff", token=token)
            elif crash and roll < 0.82:
                svc.reindex(rebuild=rng.random() < 0.3)
            elif crash and roll < 0.84:
                store = rng.choice(sorted(set(mine.values())))
                if store != "global":
                    svc.set_label(store, f"label{who}{i}")
            else:
                svc.recall(rng.choice(("sweep", "word12", token[:8], '"NEAR(x')), cwd=repo, mode="keyword")


def worker_maint(home: str, repo: str, seed: int, stop: str) -> None:
    """Reindex, rebuild, doctor and the INDEX.md lane in a loop."""
    from coffer_memory import MemoryService

    rng = random.Random(seed)
    with MemoryService(home) as svc:
        print("ready", flush=True)
        while not os.path.exists(stop):
            roll = rng.random()
            if roll < 0.4:
                svc.reindex()
            elif roll < 0.55:
                svc.reindex(rebuild=True)
            elif roll < 0.8:
                svc.store_admin.doctor()
            else:
                svc.regenerate_index("global")
            time.sleep(0.05)


def worker_cli(home: str, repo: str, who: str, seed: int, log: str, stop: str) -> None:
    """``coffer remember`` / ``facts edit`` / ``facts rm`` subprocesses."""
    rng = random.Random(seed)
    acks = Acks(Path(log))
    env = {**os.environ, "COFFER_HOME": home}
    mine: dict[str, str] = {}
    print("ready", flush=True)
    for i, token, roll in _turns(rng, who, stop):
        if roll < 0.6 or not mine:
            args = ["remember", _text(rng, token), "--title", f"{who} {i}", "--json", "--cwd", repo]
            kind, fid = "remember", ""
        elif roll < 0.8:
            fid = rng.choice(sorted(mine))
            args = ["facts", "edit", fid, "--text", _text(rng, token), "--store", mine[fid], "--json"]
            kind = "edit"
        else:
            fid = rng.choice(sorted(mine))
            args = ["facts", "rm", fid, "--store", mine[fid], "--json"]
            kind = "forget"
        acks.write("begin", id=fid, token=token)
        p = subprocess.run([str(BIN / "coffer"), *args], env=env, capture_output=True, text=True)
        if p.returncode != 0 or "Traceback" in p.stderr:
            print(
                f"CLI {args[0]} failed: {p.returncode} {p.stderr.strip()[:300]}", file=sys.stderr, flush=True
            )
            continue
        out = json.loads(p.stdout)
        if kind == "remember":
            fid = out["fact"]["id"]
            mine[fid] = out["store"]
        elif kind == "forget":
            mine.pop(fid)
        acks.write(kind, id=fid, store=out.get("store", mine.get(fid, "")), token=token)


def worker_rest(home: str, port: int, who: str, seed: int, log: str, stop: str) -> None:
    """Facts written, edited and forgotten through a real coffer-api."""
    import httpx

    rng = random.Random(seed)
    acks = Acks(Path(log))
    mine: set[str] = set()
    base = f"http://127.0.0.1:{port}/api/v1/memory_stores/global"
    with httpx.Client(timeout=60) as c:
        print("ready", flush=True)
        for i, token, roll in _turns(rng, who, stop):
            if roll < 0.5 or not mine:
                acks.write("begin", token=token)
                r = c.post(f"{base}/facts", json={"text": _text(rng, token), "title": f"{who} {i}"})
                r.raise_for_status()
                fid = r.json()["fact"]["id"]
                mine.add(fid)
                acks.write("remember", id=fid, store="global", token=token)
            elif roll < 0.7:
                fid = rng.choice(sorted(mine))
                acks.write("begin", id=fid, token=token)
                r = c.patch(f"{base}/facts/{fid}", json={"text": _text(rng, token)})
                r.raise_for_status()
                acks.write("edit", id=fid, store="global", token=token)
            elif roll < 0.8:
                fid = rng.choice(sorted(mine))
                acks.write("begin", id=fid)
                c.delete(f"{base}/facts/{fid}").raise_for_status()
                mine.discard(fid)
                acks.write("forget", id=fid)
            else:
                c.get(
                    f"{base}/recall", params={"query": rng.choice(("sweep", token[:9])), "mode": "grep"}
                ).raise_for_status()


def worker_mcp(home: str, repo: str, who: str, seed: int, log: str, stop: str) -> None:
    """coffer__remember and coffer__recall over a real coffer-mcp stdio session."""
    rng = random.Random(seed)
    acks = Acks(Path(log))
    env = {**os.environ, "COFFER_HOME": home}
    proc = subprocess.Popen(
        [str(BIN / "coffer-mcp")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=repo
    )
    assert proc.stdin is not None and proc.stdout is not None

    def call(n: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}) + "\n")
        proc.stdin.flush()
        while True:
            msg: dict[str, Any] = json.loads(proc.stdout.readline())
            if msg.get("id") == n:
                return msg

    call(
        0,
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "sweep", "version": "1"},
        },
    )
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    proc.stdin.flush()
    print("ready", flush=True)
    for i, token, roll in _turns(rng, who, stop):
        if roll < 0.7:
            acks.write("begin", token=token)
            msg = call(
                i,
                "tools/call",
                {"name": "coffer__remember", "arguments": {"text": _text(rng, token), "cwd": repo}},
            )
            res = msg["result"]
            if res.get("isError"):
                print(f"MCP remember failed: {res}", file=sys.stderr, flush=True)
                continue
            sc = res["structuredContent"]
            acks.write("remember", id=sc["id"], store=sc["store"], token=token)
        else:
            call(i, "tools/call", {"name": "coffer__recall", "arguments": {"query": "sweep", "cwd": repo}})
    proc.stdin.close()
    proc.wait(30)


# -- the check ------------------------------------------------------------------------------------
def check(home: Path, repo: Path, model: Model, *, rebuild: bool = True) -> list[str]:
    """Every violation of what the acknowledgements promise (empty: all held)."""
    from coffer_memory import MemoryNotFound, MemoryService

    bad: list[str] = []
    with MemoryService(home) as svc:
        for fid, (store, token) in model.alive.items():
            try:
                rec = svc.get_fact(fid, store=store)
            except MemoryNotFound:
                if fid not in model.uncertain_ids:
                    bad.append(f"acknowledged fact {fid} ({token}) is gone")
                continue
            if token not in rec.fact.body and fid not in model.uncertain_ids:
                bad.append(f"fact {fid} does not hold its acknowledged token {token}")
        bad += _recall_check(svc, repo, model, "keyword")
        bad += _recall_check(svc, repo, model, "grep")
        journal = " ".join(f.text for f in svc.journal(cwd=repo, limit=100)) if model.lanes else ""
        for lane, token in model.lanes:  # a handoff replaces the last: only the journal keeps each
            if lane == "journal" and token not in journal and token not in model.uncertain_tokens:
                bad.append(f"acknowledged journal entry {token} is missing")
        listed = {r.path.name for st in svc.stores() for r in _facts(svc, st.name)}
        bad += [f"a temp file is listed as a fact: {n}" for n in listed if n.endswith(".part")]
        svc.reindex()  # the documented clean-up of what killed writers left
        for st in svc.stores():
            for p in Path(st.store_dir).rglob("*"):
                if p.is_file() and p.name.endswith(".part"):
                    bad.append(f"temp file left after reindex: {p}")
        report = svc.store_admin.doctor()
        bad += [f"doctor broken: {b}" for b in report.broken]
        bad += [f"doctor mismatch: {m}" for m in report.index_mismatches]
        if rebuild:
            before = _answers(svc, repo, model)
            svc.reindex(rebuild=True)
            after = _answers(svc, repo, model)
            if before != after:
                diff = [k for k in before if before[k] != after.get(k)]
                bad.append(f"a rebuilt index answers differently for {len(diff)} queries, e.g. {diff[:3]}")
                for k in diff[:2]:
                    bad.append(f"  {k}: {before[k]} -> {after[k]}")
    return bad


def _facts(svc: Any, store: str) -> Iterator[Any]:
    cursor = None
    while True:
        page = svc.list_facts(store=store, limit=200, cursor=cursor)
        yield from page.items
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def _recall_check(svc: Any, repo: Path, model: Model, mode: str) -> list[str]:
    bad = []
    for fid, (store, token) in model.alive.items():
        if fid in model.uncertain_ids:
            continue
        ids = [h.id for h in svc.recall(token, stores=[store], mode=mode, limit=5).hits]
        if fid not in ids:
            bad.append(f"{mode} recall of {token} does not find {fid} (got {ids})")
    for token, (store, _fid) in model.gone.items():
        if token in model.uncertain_tokens:
            continue
        ids = [h.id for h in svc.recall(token, stores=[store], mode=mode, limit=5).hits]
        if ids:
            bad.append(f"{mode} recall of replaced/forgotten {token} still finds {ids}")
    return bad


def _answers(svc: Any, repo: Path, model: Model) -> dict[str, list[Any]]:
    """Keyword answers to compare across a rebuild: hits with equal scores keep the index's row
    order (which a rebuild changes), so common words compare by their scores alone and each token
    (one fact holds it) by its hits sorted."""
    out: dict[str, list[Any]] = {}
    for q in ["sweep", "word1", "word42", "fact"]:
        out[q] = [round(h.score, 6) for h in svc.recall(q, cwd=repo, mode="keyword", limit=20).hits]
    for _, token in list(model.alive.values())[:80]:
        out[token] = sorted(
            (h.id, round(h.score, 6)) for h in svc.recall(token, cwd=repo, mode="keyword").hits
        )
    return out


# -- damage cases ---------------------------------------------------------------------------------
# Run by the child, as this script's ``_worker damage CASE HOME``: the steps and their outcomes.
def worker_damage(case: str, home: str, fid: str) -> None:
    """Every step on a damaged home, each outcome as JSON (ok / typed CODE / raw TYPE)."""
    from coffer_memory import CofferError, MemoryService

    out: dict[str, Any] = {}
    try:
        svc = MemoryService(home)
    except CofferError as exc:
        print(json.dumps({"open": ["typed", exc.code]}))
        return
    with svc:
        if case == "wal_deleted":  # while this process has the index open
            svc.recall("kiln", stores=["global"])
            for suffix in ("-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(home, "index.db" + suffix))
        steps: list[tuple[str, Any]] = [
            ("keyword", lambda: len(svc.recall("kiln", stores=["global"], mode="keyword").hits)),
            ("grep", lambda: len(svc.recall("kiln", stores=["global"], mode="grep").hits)),
            ("list", lambda: len(svc.list_facts(store="global").items)),
            ("get", lambda: svc.get_fact(fid, store="global").fact.title),
            ("doctor", lambda: len(svc.doctor().broken)),
            ("reindex", lambda: len(svc.reindex("global"))),
            ("remember", lambda: bool(svc.remember("The loom is oiled.", title="loom", scope="global"))),
            ("recall new", lambda: len(svc.recall("loom", stores=["global"], mode="keyword").hits)),
        ]
        for step, call in steps:
            try:
                out[step] = ["ok", call()]
            except CofferError as exc:
                out[step] = ["typed", exc.code]
            except Exception as exc:
                out[step] = ["raw", type(exc).__name__]
    print(json.dumps(out))


def _damage(case: str, home: Path) -> None:
    """Do ``case``'s damage to a home holding the fact ``kiln``."""
    inbox = home / "memory" / "global" / "knowledge" / "inbox"
    if case == "fifo":
        os.mkfifo(inbox / "pipe.md")
    elif case == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(inbox / "sock.md"))  # the socket file stays after the process
        sock.close()
    elif case == "device":
        os.mknod(inbox / "null.md", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    elif case == "unreadable":
        (inbox / "secret.md").write_text("---\ntitle: secret\n---\nThe kiln secret.\n")
        (inbox / "secret.md").chmod(0)
    elif case == "binary":
        (inbox / "blob.md").write_bytes(random.Random(1).randbytes(100_000) + b"\x00kiln\x00")
    elif case == "200 MB file":
        with open(inbox / "huge.md", "wb") as f:
            f.truncate(200 * 1024 * 1024)
    elif case == "NFC and NFD names":
        for form in ("NFC", "NFD"):
            (inbox / unicodedata.normalize(form, "café.md")).write_text(f"The kiln café, {form}.\n")
    elif case == "symlink loop":
        os.symlink("loop", inbox / "loop")
        (inbox / "sub").mkdir()
        os.symlink("..", inbox / "sub" / "up")
        os.symlink("a.md", inbox / "b.md")
        os.symlink("b.md", inbox / "a.md")
    elif case == "dates in the future":
        p = inbox / "future.md"
        p.write_text("---\ntitle: future\ncreated_at: 2099-01-01T00:00:00Z\n---\nThe kiln of 2099.\n")
        os.utime(p, (4102444800, 4102444800))
    elif case == "store folder not writable":
        for folder, _, _ in os.walk(home / "memory"):
            os.chmod(folder, 0o555)
    elif case == "home not writable":
        for folder, _, _ in os.walk(home):
            os.chmod(folder, 0o555)


DAMAGE_CASES = (
    "fifo",
    "socket",
    "device",
    "unreadable",
    "binary",
    "200 MB file",
    "NFC and NFD names",
    "symlink loop",
    "dates in the future",
    "store folder not writable",
    "home not writable",
    "wal_deleted",
)
# Outcomes a case is known to have and the docs say so (docs/repair.md): not violations.
KNOWN: dict[str, str] = {}
# Cases where this process may not write: remember must fail, typed.
READ_ONLY = ("store folder not writable", "home not writable")


def damage() -> list[tuple[str, dict[str, Any], list[str]]]:
    """Each case: the steps' outcomes and its violations."""
    rows = []
    as_user: list[str] = []
    if os.geteuid() == 0 and shutil.which("setpriv"):  # root ignores permissions: run as nobody
        as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    for case in DAMAGE_CASES:
        base = Path(tempfile.mkdtemp(prefix="coffer-damage-"))
        try:
            if as_user:
                os.chown(base, 65534, 65534)
            home = base / "home"
            env = {**os.environ, "COFFER_HOME": str(home), "HOME": str(base)}
            made = subprocess.run(
                [*as_user, sys.executable, "-c", _SEED, str(home)], env=env, capture_output=True, text=True
            )
            if made.returncode != 0:
                rows.append((case, {}, [f"could not make the home: {made.stderr.strip()[-300:]}"]))
                continue
            try:
                _damage(case, home)
            except PermissionError as exc:  # mknod without the right: not this machine's case
                rows.append((case, {}, [f"not tried: {exc}"]))
                continue
            try:
                proc = subprocess.run(
                    [
                        *as_user,
                        sys.executable,
                        __file__,
                        "_worker",
                        "damage",
                        case,
                        str(home),
                        made.stdout.strip(),
                    ],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
            except subprocess.TimeoutExpired:
                rows.append((case, {}, ["a step hung for 60 s"]))
                continue
            if proc.returncode != 0 or not proc.stdout.strip():
                rows.append((case, {}, [f"the child failed: {proc.stderr.strip()[-300:]}"]))
                continue
            out = json.loads(proc.stdout)
            bad = [f"{step}: raw {o[1]}" for step, o in out.items() if o[0] == "raw"]
            if case not in KNOWN:
                bad += [
                    f"{step}: a read failed ({o[1]})"
                    for step, o in out.items()
                    if o[0] != "ok" and step not in ("remember", "recall new")
                ]
                wanted = "typed" if case in READ_ONLY else "ok"
                if out.get("remember", ["-"])[0] != wanted:
                    bad.append(f"remember: {out.get('remember')}, not {wanted}")
            rows.append((case, out, bad))
        finally:
            for folder, _, _ in os.walk(base):
                with contextlib.suppress(OSError):
                    os.chmod(folder, 0o755)
            shutil.rmtree(base, ignore_errors=True)
    return rows


_SEED = r"""
import sys
from coffer_memory import MemoryService
with MemoryService(sys.argv[1]) as svc:
    print(svc.remember("The kiln runs hot.", title="kiln", scope="global").fact.id)
"""


def _cell(outcome: list[Any] | None) -> str:
    if outcome is None:
        return "-"
    return str(outcome[1]) if outcome[0] == "ok" else f"{outcome[0]} {outcome[1]}"


def print_damage(rows: list[tuple[str, dict[str, Any], list[str]]]) -> None:
    """The damage phase as a Markdown table (the numbers are counts: hits, facts, broken files)."""
    steps = ["keyword", "grep", "list", "get", "doctor", "reindex", "remember", "recall new"]
    print("| case | " + " | ".join(steps) + " | verdict |")
    print("|---" * (len(steps) + 2) + "|")
    for case, out, bad in rows:
        verdict = "; ".join(bad) if bad else KNOWN.get(case, "held")
        if "open" in out:
            cells = [_cell(out["open"])] * len(steps)
        else:
            cells = [_cell(out.get(step)) for step in steps]
        print(f"| {case} | " + " | ".join(cells) + f" | {verdict} |")


# -- driving ----------------------------------------------------------------------------------------
def _spawn(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "_worker", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line != "ready\n":
        raise SystemExit(
            f"worker {args[0]} did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}"
        )
    return proc


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _setup(tmp: Path) -> tuple[Path, Path]:
    home, repo = tmp / "home", tmp / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    os.environ["COFFER_HOME"] = str(home)
    return home, repo


def _serve(home: Path) -> Iterator[int]:
    import httpx

    port = _free_port()
    env = {**os.environ, "COFFER_HOME": str(home)}
    proc = subprocess.Popen(
        [str(BIN / "coffer-api"), "--port", str(port), "--log-level", "warning"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/api/v1/memory_stores", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("coffer-api did not start") from None
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
        if "Traceback" in err:
            print(f"coffer-api printed a traceback:\n{err[-2000:]}", file=sys.stderr)


def concurrency(seconds: float, seed: int) -> tuple[Model, list[str]]:
    """All faces at once on one home for ``seconds``; the check's violations."""
    with tempfile.TemporaryDirectory(prefix="coffer-sweep-") as t:
        tmp = Path(t)
        home, repo = _setup(tmp)
        stop = tmp / "stop"
        logs = []
        serve = _serve(home)
        port = next(serve)
        procs = []
        for n in range(2):
            logs.append(tmp / f"api{n}.log")
            procs.append(
                _spawn("api", str(home), str(repo), f"a{n}", str(seed + n), str(logs[-1]), str(stop), "")
            )
        logs.append(tmp / "cli.log")
        procs.append(_spawn("cli", str(home), str(repo), "c", str(seed + 10), str(logs[-1]), str(stop)))
        logs.append(tmp / "rest.log")
        procs.append(_spawn("rest", str(home), str(port), "r", str(seed + 11), str(logs[-1]), str(stop)))
        logs.append(tmp / "mcp.log")
        procs.append(_spawn("mcp", str(home), str(repo), "m", str(seed + 12), str(logs[-1]), str(stop)))
        procs.append(_spawn("maint", str(home), str(repo), str(seed + 13), str(stop)))
        time.sleep(seconds)
        stop.touch()
        errors = []
        for p in procs:
            _, err = p.communicate(timeout=120)
            if p.returncode != 0 or "Traceback" in err or "failed" in err:
                errors.append(f"worker exit {p.returncode}: {err.strip()[-1500:]}")
        next(serve, None)
        model = Model()
        for log in logs:
            model.load(log)
        return model, errors + check(home, repo, model)


def crash(kills: int, seed: int) -> tuple[Model, list[str]]:
    """Kill a random writer ``kills`` times; the check after each kill."""
    rng = random.Random(seed)
    bad: list[str] = []
    with tempfile.TemporaryDirectory(prefix="coffer-sweep-") as t:
        tmp = Path(t)
        home, repo = _setup(tmp)
        log = tmp / "crash.log"
        model = Model()
        for k in range(kills):
            proc = _spawn(
                "api",
                str(home),
                str(repo),
                f"k{k}",
                str(seed * 1000 + k),
                str(log),
                str(tmp / "never"),
                "crash",
            )
            time.sleep(rng.uniform(0.02, 1.5))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            model = Model()
            model.load(log)
            # each check opens the home as a restart would; rebuild only now and then (it is slow)
            found = check(home, repo, model, rebuild=k % 5 == 4)
            bad += [f"after kill {k}: {b}" for b in found]
            with log.open("a") as f:  # the next writer's operations are its own
                f.write("\n" + json.dumps({"k": "killed"}) + "\n")
        return model, bad


def main(argv: list[str] | None = None) -> int:
    """Run the sweep; print what held and what did not."""
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["_worker"]:
        kind, a = argv[1], argv[2:]
        if kind == "api":
            worker_api(a[0], a[1], a[2], int(a[3]), a[4], a[5], bool(a[6]))
        elif kind == "maint":
            worker_maint(a[0], a[1], int(a[2]), a[3])
        elif kind == "cli":
            worker_cli(a[0], a[1], a[2], int(a[3]), a[4], a[5])
        elif kind == "rest":
            worker_rest(a[0], int(a[1]), a[2], int(a[3]), a[4], a[5])
        elif kind == "mcp":
            worker_mcp(a[0], a[1], a[2], int(a[3]), a[4], a[5])
        elif kind == "damage":
            worker_damage(a[0], a[1], a[2])
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="phases: concurrency, crash, damage, all"
    )
    parser.add_argument("phase", choices=("concurrency", "crash", "damage", "all"))
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the concurrency phase")
    parser.add_argument("--kills", type=int, default=30, help="SIGKILLs in the crash phase")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    failed = False
    if args.phase in ("damage", "all"):
        t0 = time.monotonic()
        rows = damage()
        bad = [b for _, _, found in rows for b in found]
        print(f"damage: {len(rows)} cases, {len(bad)} violations ({time.monotonic() - t0:.0f} s)")
        print_damage(rows)
        failed |= bool(bad)
    for phase in ("concurrency", "crash"):
        if args.phase not in (phase, "all"):
            continue
        t0 = time.monotonic()
        if phase == "concurrency":
            model, bad = concurrency(args.seconds, args.seed)
            what = f"{args.seconds:.0f} s of 5 writers (2 Python API, CLI, REST, MCP) and maintenance"
        else:
            model, bad = crash(args.kills, args.seed)
            what = f"{args.kills} SIGKILLs"
        print(
            f"{phase}: {what}, {model.acks} acknowledged operations, {len(model.alive)} live facts, "
            f"{len(model.gone)} replaced/forgotten tokens, {len(bad)} violations ({time.monotonic() - t0:.0f} s)"
        )
        for b in bad[:40]:
            print("  ", b)
        failed |= bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
