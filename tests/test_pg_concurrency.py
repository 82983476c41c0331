"""Three coffer-api processes serve one store on one PostgreSQL index: nothing is lost, every write
is found through the other processes at once, and the index matches the files afterwards."""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from served import Served

from coffer_memory import MemoryService
from coffer_memory._config import Settings

API = "/api/v1/memory_stores"
PROCESSES = 3
# Writes per process (the figure); COFFER_TEST_PG_WRITES scales it for a quick local run.
WRITES = int(os.environ.get("COFFER_TEST_PG_WRITES", "500"))


@pytest.fixture
def servers(tmp_home: Path, pg_url: str) -> Iterator[list[str]]:
    """Three real ``coffer-api`` processes on one home and one database, on 127.0.0.1."""
    exe = Path(sys.executable).parent / "coffer-api"
    env = {
        **os.environ,
        "COFFER_HOME": str(tmp_home),
        "COFFER_INDEX_BACKEND": "postgresql",
        "COFFER_PG_URL": pg_url,
    }
    started: list[Served] = []
    try:
        for _ in range(PROCESSES):
            started.append(Served([str(exe), "--log-level", "warning"], env))
        yield [served.base for served in started]
    finally:
        for served in started:
            served.proc.terminate()
        for served in started:
            served.stop(timeout=20)


@pytest.mark.timeout(1200)  # 1,500 writes and 1,500 recalls over HTTP on a shared 2-core machine
def test_three_processes_lose_nothing_and_see_each_others_writes(
    servers: list[str], tmp_home: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures: list[str] = []

    def work(me: int) -> None:
        writer = httpx.Client(base_url=servers[me], timeout=60)
        reader = httpx.Client(base_url=servers[(me + 1) % PROCESSES], timeout=60)
        try:
            for i in range(WRITES):
                token = f"tok{me}x{i}q"
                r = writer.post(f"{API}/global/facts", json={"text": f"note {token} from process {me}"})
                if r.status_code != 201:
                    failures.append(f"write {token}: {r.status_code} {r.text[:300]}")
                    continue
                # Read through another process at once: the shared index has the write already.
                found = reader.get(f"{API}/global/recall", params={"query": token}).json()
                if [h["text"] for h in found.get("hits", [])] != [f"note {token} from process {me}"]:
                    failures.append(f"recall {token} through another process: {found}")
        finally:
            writer.close()
            reader.close()

    threads = [threading.Thread(target=work, args=(me,)) for me in range(PROCESSES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == [], failures[:5]

    inbox = Settings.load(tmp_home).memory_dir / "global" / "knowledge" / "inbox"
    files = {
        f"knowledge/inbox/{p.name}": hashlib.sha256(p.read_bytes()).hexdigest() for p in inbox.glob("*.md")
    }
    assert len(files) == PROCESSES * WRITES  # 0 lost
    monkeypatch.setenv("COFFER_PG_URL", pg_url)
    with MemoryService(settings=Settings.load(tmp_home, index={"backend": "postgresql"})) as svc:
        backend = svc.index.backend
        assert backend is not None
        assert backend.digests("global") == files  # index == files, hash by hash
        assert next(s for s in svc.stores() if s.name == "global").fact_count == PROCESSES * WRITES
