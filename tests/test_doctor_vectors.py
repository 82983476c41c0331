"""``coffer doctor`` says which documents still wait for their vectors, and why: since reindex,
reconcile and the start-up sweep embed after the lock (``_ahead.embed_later``), a doctor beside a
process that is embedding a store, or after the embedder failed, found every document without
vectors and answered ``ok`` with not a word of it (found by review16). Real processes: the one
embedding is held in its embedder; it is killed with SIGKILL, and the next doctor embeds them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import embedder_plugin, example_embedder

from coffer_memory import MemoryService, Settings

pytest.importorskip("sqlite_vec")
BOUND = 120.0  # seconds a step may take on a loaded machine: a bound on a hang, not a timing
MODES = {"retrieval_modes": ["keyword", "vector", "hybrid"], "default_mode": "keyword"}

# A process whose embedder says so on stdout, then never returns, as a slow provider would.
_HELD = """
import sys, time
sys.path.insert(0, {tests!r})
from conftest import embedder_plugin, example_embedder
from coffer_memory import MemoryService, Settings
from coffer_memory.plugins import get_plugin_manager, hookimpl

class Held(example_embedder()):
    def embed_batch(self, texts):
        print("embedding", flush=True)
        time.sleep(3600)

class Plugin:
    @hookimpl
    def register_embedders(self, register):
        register("switch", lambda _settings: Held(64))

get_plugin_manager().register(Plugin(), name="held")
settings = Settings.load({home!r}, embedding={{"provider": "switch"}}, memory={modes!r})
with MemoryService(settings=settings) as svc:
    svc.reindex("global", rebuild=True)
"""


class Switch(example_embedder()):  # type: ignore[misc]
    """The example embedder, failing while ``failing`` is set."""

    failing = False

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        if self.failing:
            raise RuntimeError("the provider is down")
        return super().embed_batch(texts)  # type: ignore[no-any-return]


@pytest.fixture
def switch() -> Iterator[Switch]:
    with embedder_plugin("switch", Switch(64)) as embedder:
        assert isinstance(embedder, Switch)
        yield embedder


def service(home: Path) -> MemoryService:
    return MemoryService(settings=Settings.load(home, embedding={"provider": "switch"}, memory=MODES))


def test_doctor_says_another_process_is_embedding_and_after_its_kill_embeds_them(
    switch: Switch, tmp_home: Path
) -> None:
    with service(tmp_home) as svc:
        for i in range(5):
            svc.remember(f"fact {i} about the weir", store="global")
    script = _HELD.format(tests=str(Path(__file__).parent), home=str(tmp_home), modes=MODES)
    held = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert held.stdout is not None and held.stdout.readline().strip() == "embedding"
        with service(tmp_home) as svc:
            report = svc.doctor()
            assert report.vectors_waiting == (
                f"global: 5 documents wait for their vectors: process {held.pid} on "
                f"{os.uname().nodename} is embedding them",
            )
            assert svc.recall("weir", stores=["global"], mode="vector").hits == ()
            held.send_signal(signal.SIGKILL)
            held.wait(BOUND)
            report = svc.doctor()  # its claim died with it: this doctor embeds them
            assert report.vectors_waiting == ()
            assert len(svc.recall("weir", stores=["global"], mode="vector").hits) == 5
    finally:
        held.kill()
        held.wait(BOUND)


def test_doctor_says_the_embedder_failed(switch: Switch, tmp_home: Path, tmp_path: Path) -> None:
    with service(tmp_home) as svc:
        svc.remember("the sluice opens at dawn", store="global")
    by_hand = next((tmp_home / "memory" / "global").rglob("*.md")).parent / "by-hand.md"
    by_hand.write_text("the weir floods in spring\n", encoding="utf-8")
    switch.failing = True
    with service(tmp_home) as svc:
        report = svc.doctor()
        assert report.vectors_waiting == (
            "global: 1 document waits for its vectors: the embedder failed; "
            "it is tried again a minute after the failure",
        )
