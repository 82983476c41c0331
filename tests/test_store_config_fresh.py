"""A store's settings written by another process are seen by the next recall of a long-lived
service, also when the store had no ``store.json`` before (``_store_config.store_settings`` asks
such a store with ``os.access`` first)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from coffer_memory import MemoryService
from tests.conftest import make_repo

_SET = """
import sys
from coffer_memory import MemoryService
with MemoryService(sys.argv[1]) as svc:
    svc.set_store_config(sys.argv[2], {"default_mode": "grep"})
"""


def test_a_store_file_another_process_writes_is_seen_by_the_next_recall(
    tmp_home: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    with MemoryService(tmp_home) as svc:
        store = svc.remember("the deploy runs on fridays", cwd=repo, scope="global").store
        assert not (svc.paths(store).root / "store.json").exists()
        for _ in range(3):  # the store without its file, asked again and again
            assert svc.recall("deploy", stores=[store]).mode == "keyword"
        subprocess.run([sys.executable, "-c", _SET, str(tmp_home), store], check=True)
        assert (svc.paths(store).root / "store.json").exists()
        assert svc.recall("deploy", stores=[store]).mode == "grep"
