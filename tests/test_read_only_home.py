"""A home this process may read, not write (its folder read-only: another user's, a backup
restored so) is read through a private index and creates nothing in the home, even where a
folder below it was left writable: the read-only mode's index still took its repair lock in the
home, so ``locks/index-repair.lock`` was made in an existing home's ``locks/``. Real homes made
by another user than root, every step in a subprocess as that user (root writes any file)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from test_fault_sweep import _SEED_CHILD, _UNWRITABLE_CHILD, ROOT, _as_another_user


def _entries(home: Path) -> list[tuple[str, int, int]]:
    """Each entry below ``home`` with its size and mtime (a file written in place shows too)."""
    out = []
    for p in sorted(home.rglob("*")):
        st = p.lstat()
        out.append((str(p.relative_to(home)), st.st_size if p.is_file() else 0, st.st_mtime_ns))
    return out


def test_a_read_only_home_with_writable_folders_below_gets_nothing_new(tmp_path: Path) -> None:
    base, who = _as_another_user(tmp_path)
    try:
        home = base / "home"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(base), "TMPDIR": str(base)}
        run = functools.partial(subprocess.run, capture_output=True, text=True, env=env, timeout=120)
        fact_id = run([*who, sys.executable, "-c", _SEED_CHILD, str(home)], check=True).stdout.strip()
        for lock in (home / "locks").glob("*"):  # an existing home whose locks were never taken
            lock.unlink()
        for folder, _, _ in os.walk(home):  # read-only but for locks/ and logs/
            if Path(folder).name not in ("locks", "logs"):
                os.chmod(folder, 0o555)
        before = _entries(home)
        proc = run([*who, sys.executable, "-c", _UNWRITABLE_CHILD, str(home), fact_id])
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "not writable by this process" in proc.stderr
        after = _entries(home)
        assert after == before, (sorted(set(after) - set(before)), sorted(set(before) - set(after)))
    finally:
        for folder, _, _ in os.walk(base):
            os.chmod(folder, 0o755)
        if who:
            shutil.rmtree(base)
