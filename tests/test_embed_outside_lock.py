"""A write embeds its fact before it takes the service's lock: a keyword recall (which needs no
embedder) on another thread is answered while the embedder still runs, through the library and
through REST. A fact that changed between the embedding and the write is indexed as written.

The embedder is a real pluggy plugin (the docs' example hash embedder) that holds any text
holding the word ``slowly`` until the test lets it go."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import embedder_plugin, example_embedder

from coffer_memory import MemoryService, Settings

pytest.importorskip("sqlite_vec")
BOUND = 60.0  # seconds a step may take on a loaded machine: a bound on a hang, not a timing


class Gated(example_embedder()):  # type: ignore[misc]
    """The example embedder, holding each batch with a text holding ``slowly`` at a gate."""

    def __init__(self) -> None:
        super().__init__(64)
        self.gate = threading.Event()
        self.gate.set()
        self.held = threading.Event()  # a batch waits at the gate
        self.texts: list[str] = []
        self.lock = threading.Lock()

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        with self.lock:
            self.texts.extend(texts)
        if any("slowly" in t for t in texts):
            self.held.set()
            assert self.gate.wait(BOUND), "the test never opened the gate"
        return super().embed_batch(texts)  # type: ignore[no-any-return]


@pytest.fixture
def gated() -> Iterator[Gated]:
    embedder = Gated()
    with embedder_plugin("gated", embedder):
        try:
            yield embedder
        finally:
            embedder.gate.set()


def service(home: Path) -> MemoryService:
    return MemoryService(
        settings=Settings.load(
            home,
            embedding={"provider": "gated"},
            memory={"retrieval_modes": ["keyword", "vector", "hybrid"], "default_mode": "keyword"},
        )
    )


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """``call`` started on a thread of its own; its result (or exception) lands in the list."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(call())
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def vectors(home: Path) -> dict[str, bytes]:
    """Every vector of the global store in ``home``'s index, by chunk id."""
    import apsw
    import sqlite_vec

    conn = apsw.Connection(str(home / "index.db"))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    table = next(conn.execute("SELECT table_name FROM vec_stores WHERE resource_name = 'global'"))[0]
    return {str(c): bytes(e) for c, e in conn.execute(f"SELECT chunk_id, embedding FROM {table}")}


def rebuilt(home: Path, tmp_path: Path) -> dict[str, bytes]:
    """The vectors a home holding a copy of ``home``'s files computes from them, from nothing."""
    fresh = tmp_path / "rebuilt"
    shutil.copytree(home / "memory", fresh / "memory")
    with service(fresh) as svc:
        svc.recall("anything", stores=["global"])  # the first read indexes (and embeds) every file
    return vectors(fresh)


def test_a_keyword_recall_is_answered_while_a_remember_embeds(
    gated: Gated, tmp_home: Path, tmp_path: Path
) -> None:
    """The remember held the index lock while the embedder ran, and the recall's reconcile-on-read
    waited for the lock: a keyword recall took as long as the slowest embedding under way."""
    with service(tmp_home) as svc:
        svc.remember("the otters sleep holding hands", store="global")
        gated.gate.clear()
        writer, wrote = in_thread(lambda: svc.remember("the otters swim slowly at dawn", store="global"))
        assert gated.held.wait(BOUND)
        reader, found = in_thread(lambda: svc.recall("otters", stores=["global"], mode="keyword"))
        reader.join(BOUND)
        assert not reader.is_alive(), "the keyword recall waited for the embedding"
        assert writer.is_alive() and not gated.gate.is_set()  # the embedder still runs
        assert [h.text for h in found[0].hits] == ["the otters sleep holding hands"]
        gated.gate.set()
        writer.join(BOUND)
        assert not writer.is_alive() and not isinstance(wrote[0], BaseException), wrote
        slow = "the otters swim slowly at dawn"
        assert sum(slow in t for t in gated.texts) == 1  # embedded once, before the lock
        hits = svc.recall("swim slowly at dawn", stores=["global"], mode="vector").hits
        assert hits[0].text == slow
    assert vectors(tmp_home) == rebuilt(tmp_home, tmp_path)


def test_an_edit_whose_fact_changed_while_it_embedded_indexes_what_it_wrote(
    gated: Gated, tmp_home: Path, tmp_path: Path
) -> None:
    """The vectors embedded before the lock are those of the fact as it read then; another edit
    changed its title meanwhile. The write keeps both edits, and its vectors are those of the
    file as written (embedded again under the lock), as a rebuild from the files computes them;
    a compare-and-swap on the sha the first edit read is refused."""
    from coffer_memory import MemoryConflict

    with service(tmp_home) as svc:
        first = svc.remember("the heron fishes at the weir", title="Heron", store="global")
        gated.gate.clear()
        editor, edited = in_thread(
            lambda: svc.edit_fact(first.fact.id, body="the heron fishes slowly at the weir", store="global")
        )
        assert gated.held.wait(BOUND)
        svc.edit_fact(first.fact.id, title="Grey heron", store="global")  # while the first embeds
        gated.gate.set()
        editor.join(BOUND)
        assert not editor.is_alive() and not isinstance(edited[0], BaseException), edited
        fact = svc.get_fact(first.fact.id, store="global").fact
        assert (fact.title, fact.body) == ("Grey heron", "the heron fishes slowly at the weir")
        with pytest.raises(MemoryConflict):  # the sha the first edit read is stale by now
            svc.edit_fact(first.fact.id, body="lost", expected_sha256=first.after_sha256, store="global")
        assert [
            h.title for h in svc.recall("grey heron fishes slowly", stores=["global"], mode="vector").hits
        ][:1] == ["Grey heron"]
    assert vectors(tmp_home) == rebuilt(tmp_home, tmp_path)


def test_a_rest_keyword_recall_is_answered_while_a_rest_remember_embeds(gated: Gated, tmp_home: Path) -> None:
    """REST's calls share the service and its lock: the same wait, through the server's threads."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from coffer_memory_fastapi import create_app

    with service(tmp_home) as svc, TestClient(create_app(svc)) as client:
        base = "/api/v1/memory_stores/global"
        assert client.post(f"{base}/facts", json={"text": "the badgers dig at night"}).status_code == 201
        gated.gate.clear()
        writer, wrote = in_thread(
            lambda: client.post(f"{base}/facts", json={"text": "the badgers dig slowly"})
        )
        assert gated.held.wait(BOUND)
        reader, found = in_thread(
            lambda: client.get(f"{base}/recall", params={"query": "badgers", "mode": "keyword"})
        )
        reader.join(BOUND)
        assert not reader.is_alive(), "the keyword recall waited for the embedding"
        assert writer.is_alive() and not gated.gate.is_set()
        assert found[0].status_code == 200, found[0].text
        assert [h["text"] for h in found[0].json()["hits"]] == ["the badgers dig at night"]
        gated.gate.set()
        writer.join(BOUND)
        assert wrote[0].status_code == 201, wrote[0].text


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_mcp_keyword_recall_is_answered_while_an_mcp_remember_embeds(
    gated: Gated, tmp_home: Path, anyio_backend: Any
) -> None:
    """MCP's tool calls share the service and its lock too."""
    pytest.importorskip("mcp")
    import asyncio

    import anyio
    from mcp import Client
    from mcp_types import TextContent

    from coffer_memory_mcp import build_server

    def said(result: Any) -> str:
        return "\n".join(b.text for b in result.content if isinstance(b, TextContent))

    with service(tmp_home) as svc:
        svc.remember("the swifts sleep on the wing", store="global")
        async with Client(build_server(svc)) as client:
            gated.gate.clear()
            remember = asyncio.ensure_future(
                client.call_tool("coffer__remember", {"text": "the swifts turn slowly", "scope": "global"})
            )
            try:
                assert await anyio.to_thread.run_sync(gated.held.wait, BOUND)
                asked = {"query": "swifts", "mode": "keyword", "cwd": str(tmp_home)}
                recall = await asyncio.wait_for(client.call_tool("coffer__recall", asked), BOUND)
                assert not remember.done() and not gated.gate.is_set()  # the embedder still runs
            finally:
                gated.gate.set()
            assert not recall.is_error and "the swifts sleep on the wing" in said(recall), said(recall)
            assert "turn slowly" not in said(recall)
            assert not (await asyncio.wait_for(remember, BOUND)).is_error


def test_a_session_fact_is_embedded_ahead_with_the_line_before_it(
    gated: Gated, tmp_home: Path, tmp_path: Path
) -> None:
    """A fact of an agent session is embedded with the last line of the fact before it in front:
    that context is read ahead too, so the write embeds nothing under the lock."""
    session = "3f1c2a9e-session"
    with service(tmp_home) as svc:
        svc.remember("which lock does the migration take?", store="global", origin_session_id=session)
        gated.gate.clear()
        writer, wrote = in_thread(
            lambda: svc.remember(
                "it takes the advisory lock, slowly", store="global", origin_session_id=session
            )
        )
        try:
            assert gated.held.wait(BOUND)
            reader, found = in_thread(lambda: svc.recall("migration", stores=["global"], mode="keyword"))
            reader.join(BOUND)
            assert not reader.is_alive(), "the keyword recall waited for the embedding"
            assert [h.text for h in found[0].hits] == ["which lock does the migration take?"]
        finally:
            gated.gate.set()
        writer.join(BOUND)
        assert not isinstance(wrote[0], BaseException), wrote
        with_context = [t for t in gated.texts if "advisory lock, slowly" in t]
        assert len(with_context) == 1 and with_context[0].startswith("which lock does the migration take?\n")
    assert vectors(tmp_home) == rebuilt(tmp_home, tmp_path)


# -- every other write that indexes: the first write, lanes, the organizer, imports -----------
def answered_while_held(gated: Gated, write: Callable[[], Any], read: Callable[[], Any]) -> tuple[Any, Any]:
    """Run ``write`` on a thread until it holds the gate, then ``read`` on another: the read must
    be answered while the write's embedder is still held. Returns (read's answer, write's)."""
    gated.gate.clear()
    writer, wrote = in_thread(write)
    try:
        assert gated.held.wait(BOUND), "the write never embedded"
        reader, found = in_thread(read)
        reader.join(BOUND)
        assert not reader.is_alive(), "the keyword recall waited for the embedding"
        assert writer.is_alive() and not gated.gate.is_set()  # the embedder still runs
    finally:
        gated.gate.set()
    writer.join(BOUND)
    assert not writer.is_alive() and not isinstance(wrote[0], BaseException), wrote
    assert not isinstance(found[0], BaseException), found
    return found[0], wrote[0]


def test_a_services_first_write_embeds_before_the_lock(gated: Gated, tmp_home: Path, tmp_path: Path) -> None:
    """A service whose index is not open yet opened it under the write's lock and then embedded
    there: the first write of every process (a CLI ``remember``, a hook) held keyword reads."""
    with service(tmp_home) as svc:
        svc.remember("the otters sleep holding hands", store="global")
    with service(tmp_home) as svc:
        assert not svc.index.is_open
        found, _ = answered_while_held(
            gated,
            lambda: svc.remember("the otters swim slowly at dawn", store="global"),
            lambda: svc.recall("otters", stores=["global"], mode="keyword"),
        )
        assert [h.text for h in found.hits] == ["the otters sleep holding hands"]
        assert sum("swim slowly" in t for t in gated.texts) == 1
    assert vectors(tmp_home) == rebuilt(tmp_home, tmp_path)


def test_a_journal_append_embeds_its_day_file_before_the_lock(
    gated: Gated, tmp_home: Path, repo: Path, tmp_path: Path
) -> None:
    """A journal append re-indexes its whole day file: that file as the append leaves it is
    embedded ahead, and an append that lands in between is embedded under the lock as written."""
    with service(tmp_home) as svc:
        store = svc.journal_append("the kestrel hovers over the verge", cwd=repo).store
        found, _ = answered_while_held(
            gated,
            lambda: svc.journal_append("the kestrel dives slowly", cwd=repo),
            lambda: svc.recall("kestrel", cwd=repo, mode="keyword"),
        )
        assert [h.text for h in found.hits if "kestrel" in h.text] == [
            "the kestrel hovers over the verge"
        ] or all("dives slowly" not in h.text for h in found.hits)
        texts = [t for t in gated.texts if "dives slowly" in t]
        assert len(texts) == 1, texts  # embedded once, before the lock
        hits = svc.recall("kestrel dives slowly", cwd=repo, mode="vector").hits
        assert "dives slowly" in hits[0].text
    assert vectors_of(tmp_home, store) == vectors_of(rebuilt_all(tmp_home, tmp_path), store)


def test_a_journal_append_that_another_append_overtook_indexes_the_file_as_written(
    gated: Gated, tmp_home: Path, repo: Path, tmp_path: Path
) -> None:
    """While one append embeds ahead, another lands first: the day file the first one writes is
    not the one it embedded, and what differs is embedded under the lock."""
    with service(tmp_home) as svc:
        store = svc.journal_append("the plover runs along the tideline", cwd=repo).store
        gated.gate.clear()
        first, done = in_thread(lambda: svc.journal_append("the plover stops slowly", cwd=repo))
        assert gated.held.wait(BOUND)
        svc.journal_append("the plover calls at dusk", cwd=repo)  # overtakes the first
        gated.gate.set()
        first.join(BOUND)
        assert not first.is_alive() and not isinstance(done[0], BaseException), done
        text = svc.journal(cwd=repo)[0].text
        assert text.index("calls at dusk") < text.index("stops slowly")
    assert vectors_of(tmp_home, store) == vectors_of(rebuilt_all(tmp_home, tmp_path), store)


def test_an_organizer_topic_is_embedded_before_the_lock(gated: Gated, tmp_home: Path, tmp_path: Path) -> None:
    """The organizer writes the topic document the model drafted: it is embedded before the
    write takes the lock (the model's answer is known by then)."""
    from scripted_llm import ScriptedLLM, installed, item_of

    def script(messages: Any) -> dict[str, Any]:  # the coot's item is left (an empty body)
        body = "the moorhen nests in the reeds and feeds slowly" if "moorhen" in item_of(messages)[1] else ""
        return {"action": "create", "target": "", "slug": "moorhen", "title": "Moorhen",
                "description": "", "body": body, "rule": ""}  # fmt: skip

    settings = Settings.load(
        tmp_home,
        embedding={"provider": "gated"},
        llm={"provider": "scripted"},
        memory={"retrieval_modes": ["keyword", "vector", "hybrid"], "default_mode": "keyword"},
    )
    with MemoryService(settings=settings) as svc, installed(ScriptedLLM(script)):
        svc.remember("the coot dives for weed", store="global")
        svc.remember("a moorhen by the pond", title="moorhen note", store="global")
        found, report = answered_while_held(
            gated,
            lambda: svc.organize("global"),
            lambda: svc.recall("coot", stores=["global"], mode="keyword"),
        )
        assert [h.text for h in found.hits] == ["the coot dives for weed"]
        assert (report.count("created"), report.skipped) == (1, 1)
        assert sum("feeds slowly" in t for t in gated.texts) == 1
    assert vectors(tmp_home) == rebuilt(tmp_home, tmp_path)


def test_an_import_embeds_what_its_check_pass_planned_before_the_lock(
    gated: Gated, tmp_home: Path, tmp_path: Path
) -> None:
    """An import writes what its check pass (a dry run) planned: those files are embedded
    before each write takes the lock, and keyword reads are answered meanwhile."""
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(3):
        (folder / f"note{i}.md").write_text(f"# Grebe {i}\n\nthe grebe {i} dives slowly under the ice\n")
    with service(tmp_home) as svc:
        svc.remember("the grebe courts on the lake", store="global")
        found, report = answered_while_held(
            gated,
            lambda: svc.import_memory(folder, kind="basic-memory", store="global"),
            lambda: svc.recall("grebe", stores=["global"], mode="keyword"),
        )
        assert [h.text for h in found.hits] == ["the grebe courts on the lake"]
        assert report.counts == {"created": 3}
        for i in range(3):
            assert sum(f"grebe {i} dives slowly" in t for t in gated.texts) == 1
    assert vectors(tmp_home) == rebuilt(tmp_home, tmp_path)


def vectors_of(home: Path, store: str) -> dict[str, bytes]:
    """Every vector of ``store`` in ``home``'s index, by chunk id."""
    import apsw
    import sqlite_vec

    conn = apsw.Connection(str(home / "index.db"))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    table = next(conn.execute("SELECT table_name FROM vec_stores WHERE resource_name = ?", (store,)))[0]
    return {str(c): bytes(e) for c, e in conn.execute(f"SELECT chunk_id, embedding FROM {table}")}


def rebuilt_all(home: Path, tmp_path: Path) -> Path:
    """A home holding a copy of ``home``'s files, its index computed from them, from nothing."""
    fresh = tmp_path / "rebuilt-all"
    shutil.copytree(home / "memory", fresh / "memory")
    with service(fresh) as svc:
        svc.reindex(rebuild=True)
    return fresh
