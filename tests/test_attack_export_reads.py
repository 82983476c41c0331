"""A store file the export cannot read (review28, session 28).

``coffer export`` took a fact file it had no permission to read for one deleted since its walk
and left it out without a word: the backup said ``exported 8 files`` and exit status 0, one fact
short. It now refuses, naming the file (``InvalidExport`` ``unreadable``), as it refuses a file
holding a NUL byte; a file that is gone is still skipped.

Root reads a file of mode 000, so as root the export runs under ``setpriv`` without the
capabilities that let it (``CAP_DAC_OVERRIDE``, ``CAP_DAC_READ_SEARCH``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coffer_memory import MemoryService
from coffer_memory._porting.export import truth_files
from coffer_memory._store.paths import StorePaths

DROP = ["-dac_override,-dac_read_search"]


def without_file_powers(argv: list[str]) -> list[str]:
    """``argv`` run so that file modes bind it, as root too."""
    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("as root, a mode-000 file is readable unless setpriv drops the capabilities")
    return [setpriv, "--bounding-set", *DROP, "--inh-caps", *DROP, *argv]


def test_an_unreadable_fact_file_fails_the_export_and_names_the_file(tmp_home: Path, tmp_path: Path) -> None:
    with MemoryService(home=tmp_home) as svc:
        kept = svc.remember("the deploy runs from main", scope="global")
        hidden = svc.remember("the staging password rotates monthly", scope="global")
    hidden.path.chmod(0)
    out = tmp_path / "backup.zip"
    exe = Path(sys.executable).parent / "coffer"
    env = {**os.environ, "COFFER_HOME": str(tmp_home)}
    r = subprocess.run(
        without_file_powers([str(exe), "export", "--json", "-o", str(out)]),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    hidden.path.chmod(0o600)
    assert r.returncode != 0 and not out.exists(), r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    error = json.loads(r.stdout or r.stderr)["error"]
    assert error["code"] == "INVALID_INPUT" and error["details"]["reason"] == "unreadable", error
    assert error["details"]["member"].endswith(hidden.path.name), error
    assert kept.path.name not in json.dumps(error)


def test_a_file_deleted_after_the_walk_is_left_out(
    svc: MemoryService, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = svc.remember("first fact to export", scope="global")
    b = svc.remember("second fact to export", scope="global")
    sp = StorePaths.of(tmp_home / "memory", "global")
    real_lstat = os.lstat

    def lstat_after_delete(path: str | os.PathLike[str], *args: object, **kw: object) -> os.stat_result:
        if os.fspath(path).endswith(b.path.name) and b.path.exists():
            b.path.unlink()  # deleted between the folder's listing and the look at the file
        return real_lstat(path)

    monkeypatch.setattr(os, "lstat", lstat_after_delete)
    names = [rel for rel, _data in truth_files(sp, 1 << 22)]
    assert any(rel.endswith(a.path.name) for rel in names)
    assert not any(rel.endswith(b.path.name) for rel in names)
