"""Review of session 30: what a demanding new user still met, on every face.

The read-only home runs a child in a private mount namespace (``unshare -rm``) on a tmpfs made
read-only after the home is written, so no write can get through; where the kernel allows no such
namespace the test skips and says so.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from tests.test_review26 import SCRIPTS, _on_tmpfs, full_disk  # noqa: F401  (full_disk: a fixture)


def test_a_read_only_home_can_still_be_exported(full_disk: Path, tmp_path: Path) -> None:  # noqa: F811
    """docs/repair.md: a home this process may read but not write (a backup restored read-only)
    is read through a private index. Yet ``coffer export`` of it, which only reads the home,
    failed with STORAGE_NOT_WRITABLE "cannot change <home>" because it took the stores' write
    locks: the one way to copy that memory elsewhere was refused."""
    home, out = full_disk / "home", tmp_path / "backup.zip"
    coffer = str(SCRIPTS / "coffer")
    script = (
        f"{coffer} --home '{home}' remember --global 'The kiln fires at 1200 C.' >/dev/null && "
        f"mount -o remount,ro '{full_disk}' && "
        f"{coffer} --home '{home}' export -o '{out}' --json"
    )
    proc = _on_tmpfs(full_disk, "size=4m", ["sh", "-c", script], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["files"] >= 1, proc.stdout
    with zipfile.ZipFile(out) as archive:
        assert any(name.endswith(".md") and "global" in name for name in archive.namelist()), (
            archive.namelist()
        )
