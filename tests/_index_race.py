"""Child-process helper for tests/test_attack_left_open.py's index race (run with ``sys.executable``;
not a test module).

Commands::

    recall HOME SECONDS    one long-lived service recalls "kiln" in a loop (its connections
                           stay open while the file is moved aside under them); then, once the
                           file HOME/../repairs-done is there, once more: it must answer
    open HOME SECONDS      a new connection (``IndexDB``) opened, read and closed in a loop
    repair HOME SECONDS    the index moved aside (with its -wal and -shm) and made anew in a loop,
                           as the repair of a damaged index does

Each prints one line at the end: ``<role> <rounds> <errors>`` and then each distinct error with
its count, tab-separated (a JSON object).
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path


def _loop(seconds: float, step: object) -> tuple[int, Counter[str]]:
    errors: Counter[str] = Counter()
    rounds = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            step()  # type: ignore[operator]
            rounds += 1
        except Exception as exc:
            errors[f"{type(exc).__name__}: {str(exc)[:120]}"] += 1
    return rounds, errors


def main(role: str, home: Path, seconds: float) -> None:
    import apsw

    from coffer_memory import MemoryService
    from coffer_memory._index.db import IndexDB

    if role == "recall":
        with MemoryService(home) as svc:
            rounds, errors = _loop(seconds, lambda: svc.recall("kiln", stores=["global"], mode="keyword"))
            # After the storm (the repairs are over) a recall answers from the files again.
            done = home.parent / "repairs-done"
            while not done.exists():
                time.sleep(0.05)
            # Up to three: a recall may meet the end of the storm's last repair. All three
            # answered [] once in a full suite: a reconcile that straddled a repair left the new
            # file with the store's state and without its rows (``_reconcile_once``).
            answers = []
            for _ in range(3):
                try:
                    answers.append(
                        [h.title for h in svc.recall("kiln", stores=["global"], mode="keyword").hits]
                    )
                except Exception as exc:
                    answers.append([f"{type(exc).__name__}: {exc}"])
                if answers[-1] == ["kiln"]:
                    break
            if answers[-1] != ["kiln"]:
                errors[f"final recalls answered {answers}"] += 1
    elif role == "open":

        def open_read() -> None:
            db = IndexDB(home / "index.db", home=home)
            try:
                db.scalar("SELECT count(*) FROM documents")
            finally:
                db.close()

        rounds, errors = _loop(seconds, open_read)
    else:

        def move_aside() -> None:
            db = IndexDB(home / "index.db", home=home)
            db.note_damage(apsw.CorruptError("moved aside by the race test"))
            db.repair()
            db.close()
            time.sleep(0.01)

        rounds, errors = _loop(seconds, move_aside)
    print(role, rounds, json.dumps(dict(errors)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]))
