"""Child-process helper for tests/test_durability.py (run with ``sys.executable``; not a test module).

Commands::

    burst HOME REPO WORKER COUNT GLOBAL_EVERY START_FILE
        Print "ready", wait for START_FILE, then remember COUNT facts into the project store of REPO, plus one
        into "global" after every GLOBAL_EVERY project facts. Even-numbered project facts share
        one title, so their slugs collide across processes.
    loop HOME REPO PREFIX
        Print "ready", then remember facts forever (until killed).
    fsize PATH LIMIT SIZE
        Write SIZE bytes to PATH with atomic_write under RLIMIT_FSIZE=LIMIT; expect EFBIG.

After each ``remember`` returns, the child prints ``<token>\\t<store>\\t<fact id>\\t<path>`` and
flushes: a printed line is an acknowledged write.
"""

from __future__ import annotations

import errno
import resource
import signal
import sys
import time
from pathlib import Path

SHARED_TITLE = "Shared collision title"


def _ack(token: str, result: object) -> None:
    print(f"{token}\t{result.store}\t{result.fact.id}\t{result.path}", flush=True)  # type: ignore[attr-defined]


def burst(home: str, repo: str, worker: int, count: int, global_every: int, start_file: str) -> None:
    from coffer_memory import MemoryService

    with MemoryService(home) as svc:
        _ = svc.db  # open (and migrate) the index before saying ready
        print("ready", flush=True)
        deadline = time.monotonic() + 60
        while not Path(start_file).exists():
            if time.monotonic() > deadline:
                raise SystemExit("start file never appeared")
            time.sleep(0.001)
        for i in range(count):
            token = f"uniq{worker}p{i:03d}z"
            title = SHARED_TITLE if i % 2 == 0 else f"worker {worker} note {i}"
            result = svc.remember(
                f"Project fact {i} of worker {worker}: {token} lives here.", title=title, cwd=repo
            )
            _ack(token, result)
            if (i + 1) % global_every == 0:
                token = f"uniq{worker}g{i:03d}z"
                result = svc.remember(
                    f"Global fact {i} of worker {worker}: {token}.",
                    title=SHARED_TITLE,
                    scope="global",
                    cwd=repo,
                )
                _ack(token, result)


def loop(home: str, repo: str, prefix: str) -> None:
    from coffer_memory import MemoryService

    svc = MemoryService(home)
    _ = svc.db  # open (and migrate) the index before saying ready
    # One write before saying ready: the write path imports its YAML, id and secret-check modules
    # on first use, and the kill window must fall on writes, not on those imports.
    svc.remember(f"Warm-up write {prefix}.", title=f"{prefix} warm-up", scope="global", cwd=repo)
    print("ready", flush=True)
    i = 0
    while True:
        token = f"{prefix}n{i:05d}z"
        padding = " ".join(f"filler{j}" for j in range(i % 7 * 40))  # vary sizes, some multi-chunk
        scope = "global" if i % 4 == 3 else "project"
        title = SHARED_TITLE if i % 2 == 0 else f"{prefix} note {i}"
        result = svc.remember(f"Crash fact {token}.\n\n{padding}", title=title, scope=scope, cwd=repo)
        _ack(token, result)
        i += 1


def fsize(path: str, limit: int, size: int) -> None:
    from coffer_memory._store.files import atomic_write

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        atomic_write(Path(path), b"x" * size, overwrite=True)
    except OSError as exc:
        print(f"raised {exc.errno == errno.EFBIG}", flush=True)
        return
    print("no error", flush=True)


def main(argv: list[str]) -> None:
    command, args = argv[0], argv[1:]
    if command == "burst":
        burst(args[0], args[1], int(args[2]), int(args[3]), int(args[4]), args[5])
    elif command == "loop":
        loop(args[0], args[1], args[2])
    elif command == "fsize":
        fsize(args[0], int(args[1]), int(args[2]))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
