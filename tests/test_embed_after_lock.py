"""A reconcile embeds what it indexed after it lets the lock go: ``reindex`` (and its rebuild),
the reconcile-on-read of files edited by hand, and ``merge_stores`` index their keyword rows under
the lock, then embed a batch at a time without it (``_ahead.embed_later``). A write or a keyword
recall on another thread is answered while the embedder still runs.

Before: each held the service's lock (and the store's file lock) for the whole embedding, so a
``remember`` beside a ``reindex`` of N facts waited for N embeddings.

The embedder is the gated example plugin of ``test_embed_outside_lock`` (a text holding
``slowly`` waits at its gate until the test opens it)."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_embed_outside_lock import (  # the gated embedder plugin and its helpers
    BOUND,
    Gated,
    answered_while_held,
    gated,
    in_thread,
    rebuilt,
    rebuilt_all,
    service,
    vectors,
    vectors_of,
)

from coffer_memory import MemoryService, Settings
from tests.test_project_identity import _clone

pytest.importorskip("sqlite_vec")
__all__ = ["gated"]  # the fixture, imported for pytest to find

FACTS = [
    "the otters sleep holding hands",
    "the herons stand in the shallows",
    "the otters swim slowly at dawn",
    "the kingfisher waits on a branch",
]


def nearest(svc: MemoryService, text: str) -> bool:
    """Whether a vector recall of ``text`` finds it first in the global store."""
    return svc.recall(text, stores=["global"], mode="vector").hits[0].text == text


def remembered(svc: MemoryService) -> list[str]:
    """The ids of FACTS, remembered in the global store."""
    return [svc.remember(text, store="global").fact.id for text in FACTS]


@contextlib.contextmanager
def embedding_held(gated: Gated, call: Callable[[], Any]) -> Iterator[None]:
    """``call`` on a thread of its own; the block runs while its embedder waits at the gate, then
    the gate opens and ``call`` must have ended well."""
    gated.held.clear()
    gated.gate.clear()
    worker, done = in_thread(call)
    try:
        assert gated.held.wait(BOUND), "the call never embedded"
        yield
    finally:
        gated.gate.set()
    worker.join(BOUND)
    assert not worker.is_alive() and not isinstance(done[0], BaseException), done


def test_a_remember_lands_while_a_reindex_embeds(gated: Gated, tmp_home: Path, tmp_path: Path) -> None:
    with service(tmp_home) as svc:
        remembered(svc)
        gated.held.clear()
        _, wrote = answered_while_held(
            gated,
            lambda: svc.reindex("global", rebuild=True),
            lambda: svc.remember("the otters float on their backs", store="global"),
        )
        assert wrote[0].store == "global"
        found = svc.recall("otters", stores=["global"], mode="keyword").hits
        assert len(found) == 3
        assert nearest(svc, "the otters swim slowly at dawn")
    assert vectors(tmp_home) == rebuilt(tmp_home, tmp_path)


def test_a_keyword_recall_is_answered_while_a_reindex_embeds(
    gated: Gated, tmp_home: Path, tmp_path: Path
) -> None:
    with service(tmp_home) as svc:
        remembered(svc)
        gated.held.clear()
        found, _ = answered_while_held(
            gated,
            lambda: svc.reindex(rebuild=True),
            lambda: svc.recall("kingfisher", stores=["global"], mode="keyword"),
        )
        assert [h.text for h in found.hits] == ["the kingfisher waits on a branch"]
    assert vectors(tmp_home) == rebuilt(tmp_home, tmp_path)


def test_a_remember_lands_while_a_read_embeds_a_file_edited_by_hand(
    gated: Gated, tmp_home: Path, tmp_path: Path
) -> None:
    """A recall finds a fact written by hand; its reconcile indexes it under the lock and embeds
    it after: a remember on another thread, and a keyword recall on a third (the first recall
    is embedding the store's waiting facts: it answers from the rows as they stand), go on."""
    with service(tmp_home) as svc:
        first = svc.remember(FACTS[0], store="global")
        by_hand = first.path.parent / "by-hand.md"
        by_hand.write_text("the otters dive slowly for clams\n", encoding="utf-8")
        gated.held.clear()
        gated.gate.clear()
        reader, read = in_thread(lambda: svc.recall("clams", stores=["global"], mode="hybrid"))
        try:
            assert gated.held.wait(BOUND), "the read never embedded the file"
            wrote = svc.remember("the otters juggle pebbles", store="global")  # beside the embedding
            keyword = svc.recall("pebbles clams", stores=["global"], mode="keyword").hits
            assert reader.is_alive() and not gated.gate.is_set()  # the embedder still runs
        finally:
            gated.gate.set()
        reader.join(BOUND)
        assert not reader.is_alive() and not isinstance(read[0], BaseException), read
        assert wrote.created
        assert {h.text for h in keyword} == {"the otters juggle pebbles", "the otters dive slowly for clams"}
        assert sum("dive slowly" in t for t in gated.texts) == 1  # embedded once, after the lock
        hits = svc.recall("dive slowly for clams", stores=["global"], mode="vector").hits
        assert "dive slowly" in hits[0].text
    assert vectors(tmp_home) == rebuilt(tmp_home, tmp_path)


def test_a_fact_edited_while_a_reindex_embeds_it_keeps_its_new_vectors(
    gated: Gated, tmp_home: Path, tmp_path: Path
) -> None:
    """The reindex embedded a fact as it read before the edit; under the lock it reads it again,
    finds it changed and leaves it to the reconcile that indexes the edit: the vectors in the
    end are those of the files as they are."""
    with service(tmp_home) as svc:
        ids = remembered(svc)
        with embedding_held(gated, lambda: svc.reindex("global", rebuild=True)):
            svc.edit_fact(ids[2], title="Otters at noon", body="the otters swim fast at noon", store="global")
        assert nearest(svc, "the otters swim fast at noon")
    assert vectors(tmp_home) == rebuilt(tmp_home, tmp_path)


def test_a_remember_lands_while_a_merge_embeds_what_it_moved(
    gated: Gated, tmp_home: Path, tmp_path: Path
) -> None:
    with service(tmp_home) as svc:
        a, b = _clone(tmp_path, "first"), _clone(tmp_path, "second")
        src = svc.remember("the staging database sleeps slowly", cwd=a).store
        dst = svc.remember("deploys go out on tuesdays", cwd=b).store
        gated.held.clear()
        _, wrote = answered_while_held(
            gated,
            lambda: svc.merge_stores(src, dst),
            lambda: svc.remember("the global store takes this one", store="global"),
        )
        assert wrote.retired
        hits = svc.recall("staging database", cwd=b, mode="vector").hits
        assert "staging database" in hits[0].text
    assert vectors_of(tmp_home, dst) == vectors_of(rebuilt_all(tmp_home, tmp_path), dst)
    assert os.path.isdir(tmp_home / "memory")


def test_a_journal_append_embeds_only_the_texts_that_changed(
    gated: Gated, tmp_home: Path, repo: Path, tmp_path: Path
) -> None:
    """Appending one entry to a day of 200 re-indexes the day file; its unchanged chunks keep
    their vectors (looked up by the text each was embedded from), so the embedder is given the
    new entry's texts alone, and the vectors are those a rebuild computes. Before: every chunk of
    the day was embedded again, ahead of the lock."""
    with service(tmp_home) as svc:
        entries = [
            (None, f"entry {i}: the {FACTS[i % 4].split()[1]} were counted at mark {i}") for i in range(200)
        ]
        store = svc.lanes.journal_append_parts(entries, cwd=repo)
        assert store is not None
        chunks = len(vectors_of(tmp_home, store.store))
        gated.texts.clear()
        svc.journal_append("the weasel crossed the lane at noon", cwd=repo)
        assert chunks >= 100, chunks  # the day is many chunks
        assert gated.texts and all("weasel" in t for t in gated.texts), gated.texts
        hits = svc.recall("weasel crossed the lane", cwd=repo, mode="vector").hits
        assert "weasel" in hits[0].text
    assert vectors_of(tmp_home, store.store) == vectors_of(rebuilt_all(tmp_home, tmp_path), store.store)


def test_another_service_on_the_home_recalls_and_writes_while_a_reindex_embeds(
    gated: Gated, tmp_home: Path, tmp_path: Path
) -> None:
    """A second service on the same home (its own index lock, as another process has; the store's
    file lock and index.db shared): its keyword recall finds the documents waiting for vectors,
    leaves them to the reindex that claimed them, and answers; its remember lands. Before, both
    waited for the store's file lock, which the reindex held while its embedder ran."""
    with service(tmp_home) as svc, service(tmp_home) as other:
        remembered(svc)
        gated.held.clear()
        gated.texts.clear()
        found, _ = answered_while_held(
            gated,
            lambda: svc.reindex("global", rebuild=True),
            lambda: (
                other.remember("the voles dig under the hedge", store="global"),
                other.recall("kingfisher", stores=["global"], mode="keyword"),
            ),
        )
        assert [h.text for h in found[1].hits] == ["the kingfisher waits on a branch"]
        assert sum("swim slowly" in t for t in gated.texts) == 1  # the other service left it
        assert nearest(other, "the voles dig under the hedge")
    assert vectors(tmp_home) == rebuilt(tmp_home, tmp_path)


def test_a_frontmatter_edit_while_a_reindex_embeds_reaches_the_index(
    gated: Gated, tmp_home: Path, tmp_path: Path
) -> None:
    """A fact's ``updated_at`` edited by hand (its indexed text the same) while the reindex's
    embedder holds the batch before it: the fact's rows are of the old file, its texts are the
    same, so its vectors are written; the row must not then say it holds the new file, or every
    later reconcile finds the file "unchanged" and the row keeps the old ``updated_at`` (a
    ``since`` filter never found the fact again; found by review16)."""
    settings = Settings.load(
        tmp_home,
        embedding={"provider": "gated", "batch_size": 1},  # one document a batch
        memory={"retrieval_modes": ["keyword", "vector", "hybrid"], "default_mode": "keyword"},
    )
    with MemoryService(settings=settings) as svc:
        wrote = [
            svc.remember(text, title=text.split()[0], store="global")
            for text in ("aardvark digs slowly at night", "zebra grazes slowly on the plain")
        ]
        gated.texts.clear()
        with embedding_held(gated, lambda: svc.reindex("global", rebuild=True)):
            # The other fact's batch comes after the held one: it reads the edited file.
            edited = next(w for w in wrote if w.fact.body not in gated.texts[-1])
            text = edited.path.read_text(encoding="utf-8")
            new = re.sub(r"(?m)^updated_at: .*$", "updated_at: 2031-01-01T00:00:00Z", text)
            assert new != text
            edited.path.write_text(new, encoding="utf-8")
        found = svc.recall(edited.fact.title, stores=["global"], mode="keyword", since="2030-01-01T00:00:00Z")
        assert [h.id for h in found.hits] == [edited.fact.id]
        assert nearest(svc, edited.fact.body)
    assert vectors(tmp_home) == rebuilt(tmp_home, tmp_path)


def test_two_services_never_both_embed_the_first_batch(gated: Gated, tmp_home: Path) -> None:
    """Two services on one home (their own index locks, as two processes have) find the same
    documents waiting. Each read "no claim" and then wrote its own, so both embedded the first
    batch (review16); the claim is now taken under the store's file lock, and the second finds
    the first's. The test holds index.db's write lock until each service is at the claim: in
    SQLite's busy wait for that lock (seen by a busy handler), or waiting for the store's file
    lock that the other holds meanwhile. Before, both were in the busy wait, every time (it held
    the lock for a fixed 3 s, and a slow machine could let it go before both got there)."""
    import apsw

    in_busy_wait: set[int] = set()

    def busy(tries: int) -> bool:  # SQLite's busy timeout, with who waits noted
        in_busy_wait.add(threading.get_ident())
        time.sleep(0.005)
        return tries < BOUND / 0.005

    def at_the_claim(thread: threading.Thread) -> bool:
        if thread.ident in in_busy_wait:
            return True
        frame = sys._current_frames().get(thread.ident or -1)
        while frame is not None and frame.f_code.co_name != "store_lock":  # waiting for it
            frame = frame.f_back
        return frame is not None

    with service(tmp_home) as svc, service(tmp_home) as other:
        first = svc.remember("the otters sleep holding hands", store="global")
        other.recall("otters", stores=["global"], mode="keyword")  # its index open
        for i, text in enumerate(FACTS[1:]):
            (first.path.parent / f"by-hand-{i}.md").write_text(f"{text} by hand\n", encoding="utf-8")
        with svc.index.lock:
            svc.index.reconciler.reconcile("global")  # keyword rows in; vectors left waiting
        assert later_waiting(svc) == 3
        gated.texts.clear()
        for s in (svc, other):
            s.index.db.conn.set_busy_handler(busy)
        writer = apsw.Connection(str(tmp_home / "index.db"))
        writer.execute("BEGIN IMMEDIATE")
        try:
            runs = [in_thread(lambda s=s: s.index.embed_later("global")) for s in (svc, other)]
            deadline = time.monotonic() + BOUND  # a bound on a hang, not a timing
            # One at least in the busy wait (it holds the claim's file lock, if any), the other too
            # or waiting for that file lock.
            while not (
                all(at_the_claim(t) for t, _ in runs) and any(t.ident in in_busy_wait for t, _ in runs)
            ):
                assert time.monotonic() < deadline and all(t.is_alive() for t, _ in runs), runs
                time.sleep(0.005)
        finally:
            writer.execute("COMMIT")
            writer.close()
        for thread, out in runs:
            thread.join(BOUND)
            assert not thread.is_alive() and not isinstance(out[0], BaseException), out
        assert sorted(out[0] for _, out in runs) == [0, 3]
        assert len(gated.texts) == len(set(gated.texts)), gated.texts  # each text embedded once
        assert later_waiting(svc) == 0


def later_waiting(svc: MemoryService) -> int:
    """How many documents of the global store wait for their vectors."""
    return int(svc.index.db.scalar("SELECT count(*) FROM documents WHERE content_sha256 = ''"))
