"""The OpenAI-compatible embedder.

Request shape and error mapping go through ``httpx.MockTransport``; retries, timeouts and
refused connections go against a real HTTP server on 127.0.0.1 that each test scripts; the
degrade-and-recover path (sentinel, fallback, re-embedding) goes end to end through
MemoryService talking to that server.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import math
import re
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import httpx
import pytest
from http_scripted import Behaviour, Reply, ScriptedServer, fail, serve
from served import closed_port

from coffer_memory import MemoryService, Settings
from coffer_memory._config import EmbeddingSettings
from coffer_memory._errors import EmbeddingUnavailable
from coffer_memory.plugins.builtin.openai_embeddings import OpenAIEmbedder

VECTOR_MODES = {"retrieval_modes": ["grep", "keyword", "vector", "hybrid"], "default_mode": "hybrid"}
MOCK_URL = "http://embed.test/v1"


# -- deterministic "model" --------------------------------------------------------------------
def text_vector(text: str, dims: int) -> list[float]:
    """A normalised hashed bag of words: texts sharing words are near."""
    row = [0.0] * dims
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        row[hashlib.sha256(word.encode()).digest()[0] % dims] += 1.0
    norm = math.sqrt(sum(x * x for x in row)) or 1.0
    return [x / norm for x in row]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def embeddings_payload(inputs: list[str], dims: int) -> dict[str, Any]:
    return {
        "object": "list",
        "model": "test-embed",
        "data": [
            {"object": "embedding", "index": i, "embedding": text_vector(t, dims)}
            for i, t in enumerate(inputs)
        ],
    }


def settings(**overrides: Any) -> EmbeddingSettings:
    base: dict[str, Any] = {
        "provider": "openai",
        "base_url": MOCK_URL,
        "model": "test-embed",
        "dimensions": 8,
        "retry_max_seconds": 0.05,
        "timeout_seconds": 5.0,
        "max_retries": 2,
    }
    base.update(overrides)
    return EmbeddingSettings(**base)


# -- MockTransport ----------------------------------------------------------------------------
Handler = Callable[[httpx.Request], httpx.Response]


def mock_embedder(handler: Handler, **overrides: Any) -> tuple[OpenAIEmbedder, list[httpx.Request]]:
    """An embedder whose HTTP goes to ``handler``; every request it sends is recorded."""
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    return OpenAIEmbedder(settings(**overrides), transport=httpx.MockTransport(record)), seen


def ok(request: httpx.Request, dims: int = 8) -> httpx.Response:
    return httpx.Response(200, json=embeddings_payload(json.loads(request.content)["input"], dims))


def scripted(*responses: Handler) -> Handler:
    """Answer with each handler in turn, the last one forever."""
    queue = deque(responses)

    def handle(request: httpx.Request) -> httpx.Response:
        step = queue.popleft() if len(queue) > 1 else queue[0]
        return step(request)

    return handle


def test_request_shape_and_bearer_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COFFER_TEST_EMBED_KEY", "sk-shape-123")
    emb, seen = mock_embedder(ok, base_url=MOCK_URL + "/", api_key_env="COFFER_TEST_EMBED_KEY")
    vectors = emb.embed_batch(["first text", "second text"])
    assert vectors == [text_vector("first text", 8), text_vector("second text", 8)]
    assert len(seen) == 1
    request = seen[0]
    assert request.method == "POST"
    assert str(request.url) == "http://embed.test/v1/embeddings"
    assert json.loads(request.content) == {
        "model": "test-embed",
        "input": ["first text", "second text"],
        "encoding_format": "float",
    }
    assert request.headers["authorization"] == "Bearer sk-shape-123"
    assert request.headers["content-type"] == "application/json"
    emb.close()


def test_dimensions_sent_only_when_requested() -> None:
    emb, seen = mock_embedder(ok, request_dimensions=True)
    emb.embed_batch(["x"])
    assert json.loads(seen[0].content)["dimensions"] == 8
    plain, seen_plain = mock_embedder(ok)
    plain.embed_batch(["x"])
    assert "dimensions" not in json.loads(seen_plain[0].content)


def test_no_authorization_header_without_a_key() -> None:
    emb, seen = mock_embedder(ok)
    emb.embed_batch(["x"])
    assert "authorization" not in seen[0].headers


@pytest.mark.parametrize("value", [None, ""])
def test_missing_key_env_var_is_embedding_unavailable(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("COFFER_TEST_ABSENT_KEY", raising=False)
    else:
        monkeypatch.setenv("COFFER_TEST_ABSENT_KEY", value)
    emb, seen = mock_embedder(ok, api_key_env="COFFER_TEST_ABSENT_KEY")
    with pytest.raises(EmbeddingUnavailable, match="COFFER_TEST_ABSENT_KEY"):
        emb.embed_batch(["x"])
    assert seen == []


def test_out_of_order_indexes_are_reordered() -> None:
    def shuffled(request: httpx.Request) -> httpx.Response:
        inputs = json.loads(request.content)["input"]
        data = [{"index": i, "embedding": text_vector(inputs[i], 8)} for i in (2, 0, 1)]
        return httpx.Response(200, json={"data": data})

    emb, _ = mock_embedder(shuffled)
    texts = ["alpha one", "bravo two", "charlie three"]
    assert emb.embed_batch(texts) == [text_vector(t, 8) for t in texts]


def test_batches_of_batch_size() -> None:
    emb, seen = mock_embedder(ok, batch_size=4)
    texts = [f"text number {i} word{i}" for i in range(10)]
    assert emb.embed_batch(texts) == [text_vector(t, 8) for t in texts]
    assert [json.loads(r.content)["input"] for r in seen] == [texts[0:4], texts[4:8], texts[8:10]]
    assert emb.embed_batch([]) == [] and len(seen) == 3


def test_wrong_width_names_both_widths() -> None:
    emb, _ = mock_embedder(lambda request: ok(request, dims=3))
    with pytest.raises(EmbeddingUnavailable) as info:
        emb.embed_batch(["x"])
    assert "returned 3 dimensions" in info.value.message
    assert "embedding.dimensions is 8" in info.value.message


@pytest.mark.parametrize("status", [400, 404])
def test_rejected_model_is_not_retried(status: int) -> None:
    body = {"error": {"message": "model not found", "type": "invalid_request_error"}}
    emb, seen = mock_embedder(lambda request: httpx.Response(status, json=body), model="nope", max_retries=4)
    with pytest.raises(EmbeddingUnavailable) as info:
        emb.embed_batch(["x"])
    message = info.value.message
    assert "rejected embedding model 'nope'" in message
    assert f"HTTP {status}" in message and "model not found" in message
    assert len(seen) == 1


@pytest.mark.parametrize(
    "content",
    [
        b"not json {",
        b"<html><body>502 Bad Gateway</body></html>",
        b"{}",
        b"[]",
        b'{"data": "nope"}',
        b'{"data": [{"index": 0}]}',
    ],
)
def test_malformed_body_is_embedding_unavailable(content: bytes) -> None:
    emb, seen = mock_embedder(lambda request: httpx.Response(200, content=content))
    with pytest.raises(EmbeddingUnavailable):
        emb.embed_batch(["x"])
    assert len(seen) == 1


def test_null_embedding_is_embedding_unavailable() -> None:
    # A gateway answering null for an input must not leak a bare TypeError.
    emb, _ = mock_embedder(
        lambda request: httpx.Response(200, json={"data": [{"index": 0, "embedding": None}]})
    )
    with pytest.raises(EmbeddingUnavailable):
        emb.embed_batch(["x"])


def test_count_mismatch_is_embedding_unavailable() -> None:
    emb, _ = mock_embedder(lambda request: httpx.Response(200, json=embeddings_payload(["only one"], 8)))
    with pytest.raises(EmbeddingUnavailable, match="1 embeddings for 2 inputs"):
        emb.embed_batch(["a", "b"])


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"model": None}, False),
        ({"dimensions": None}, False),
        ({"model": None, "dimensions": None}, False),
        ({"model": ""}, False),
        ({}, True),
    ],
)
def test_available_needs_model_and_dimensions(overrides: dict[str, Any], expected: bool) -> None:
    emb, seen = mock_embedder(ok, **overrides)
    assert emb.available() is expected
    if not expected:
        with pytest.raises(EmbeddingUnavailable, match=r"embedding\.model and embedding\.dimensions"):
            emb.embed_batch(["x"])
        assert seen == []


def test_http_date_retry_after_is_honoured() -> None:
    past = email.utils.format_datetime(datetime.now(UTC) - timedelta(seconds=30), usegmt=True)
    emb, seen = mock_embedder(
        scripted(lambda request: httpx.Response(503, headers={"Retry-After": past}), ok)
    )
    assert emb.embed_batch(["x"]) == [text_vector("x", 8)]
    assert len(seen) == 2


def test_unparseable_retry_after_still_retries() -> None:
    # Retry-After is a hint: a value that is neither seconds nor an HTTP date must not
    # crash the call, the normal back-off applies.
    emb, seen = mock_embedder(
        scripted(lambda request: httpx.Response(429, headers={"Retry-After": "soon"}), ok)
    )
    assert emb.embed_batch(["x"]) == [text_vector("x", 8)]
    assert len(seen) == 2


def test_huge_retry_after_is_capped_by_retry_max_seconds() -> None:
    emb, seen = mock_embedder(
        scripted(lambda request: httpx.Response(429, headers={"Retry-After": "3600"}), ok)
    )
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(emb.embed_batch(["x"])), daemon=True)
    worker.start()
    worker.join(timeout=10)  # a bound, not a timing assertion: uncapped it would sleep an hour
    assert not worker.is_alive()
    assert result == [[text_vector("x", 8)]] and len(seen) == 2


# -- a real HTTP server on 127.0.0.1 ----------------------------------------------------------
def embed(dims: int = 8, delay: float = 0.0) -> Behaviour:
    return lambda body: Reply(200, embeddings_payload(body["input"], dims), delay=delay)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    yield from serve(monkeypatch, embed(8))


def test_server_429_retry_after_zero_then_success(server: ScriptedServer) -> None:
    server.script.extend([fail(429, "slow down", {"Retry-After": "0"}), embed(8)])
    emb = OpenAIEmbedder(settings(base_url=server.url, max_retries=3))
    texts = ["alpha beta", "gamma"]
    assert emb.embed_batch(texts) == [text_vector(t, 8) for t in texts]
    assert len(server.requests) == 2
    assert all(r.path == "/v1/embeddings" and r.body["input"] == texts for r in server.requests)
    emb.close()


def test_server_500_gives_up_after_max_retries(server: ScriptedServer) -> None:
    server.default = fail(500, "overloaded")
    emb = OpenAIEmbedder(settings(base_url=server.url, max_retries=2))
    with pytest.raises(EmbeddingUnavailable) as info:
        emb.embed_batch(["x"])
    assert len(server.requests) == 3
    assert "failed after 3 attempts" in info.value.message
    assert "HTTP 500" in info.value.message and "overloaded" in info.value.message
    emb.close()


class CountingTransport(httpx.HTTPTransport):
    """The real httpx transport, counting the requests it is handed."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        return super().handle_request(request)


# How long a held request may wait for the test to let it go: a bound on a thread, not a timing
# assertion (the server answers it only after the client gave up on it, whatever the load).
HOLD_SECONDS = 60.0


def held(until: threading.Event, then: Behaviour) -> Behaviour:
    """A request answered only once ``until`` is set: the client times out on it for sure."""

    def behaviour(body: Any) -> Reply:
        until.wait(HOLD_SECONDS)
        return then(body)

    return behaviour


def test_server_slow_response_is_retried(server: ScriptedServer) -> None:
    """A read timeout is retried. The first answer is held until the retry arrives (it was a fixed
    1.5 s against a 0.2 s timeout, and under load the quick answer to the retry took longer than
    0.2 s too: a third attempt, or none left); the client allows 1 s and a few attempts for the
    quick one, and the first one times out however loaded the machine is."""
    retried = threading.Event()

    def answer_retry(body: Any) -> Reply:
        retried.set()  # the client gave up on the first request: let its handler go
        return embed(8)(body)

    server.script.append(held(retried, embed(8)))
    server.default = answer_retry
    transport = CountingTransport()
    emb = OpenAIEmbedder(
        settings(base_url=server.url, timeout_seconds=1.0, max_retries=4), transport=transport
    )
    try:
        assert emb.embed_batch(["slow one"]) == [text_vector("slow one", 8)]
    finally:
        retried.set()
        emb.close()
    assert transport.calls >= 2 and len(server.requests) == transport.calls


def test_server_always_slow_gives_up_with_timeout(server: ScriptedServer) -> None:
    """Every answer held past the client's timeout: two attempts (``max_retries=1``), then the
    read timeout is the error. The attempts are counted as the client makes them: the server's
    record of the second could lag the client's giving up under load."""
    release = threading.Event()
    server.default = held(release, embed(8))
    transport = CountingTransport()
    emb = OpenAIEmbedder(
        settings(base_url=server.url, timeout_seconds=0.2, max_retries=1), transport=transport
    )
    try:
        with pytest.raises(EmbeddingUnavailable, match=r"failed after 2 attempts: ReadTimeout"):
            emb.embed_batch(["x"])
    finally:
        release.set()
        emb.close()
    assert transport.calls == 2


def test_connection_refused_gives_up_after_max_retries() -> None:
    port = closed_port()  # nothing listens on it
    transport = CountingTransport()
    emb = OpenAIEmbedder(
        settings(base_url=f"http://127.0.0.1:{port}/v1", max_retries=2, timeout_seconds=2.0),
        transport=transport,
    )
    with pytest.raises(EmbeddingUnavailable) as info:
        emb.embed_batch(["x"])
    assert transport.calls == 3
    assert "failed after 3 attempts: ConnectError" in info.value.message
    assert isinstance(info.value.__cause__.__cause__, httpx.ConnectError)  # type: ignore[union-attr]
    emb.close()


# -- end to end through MemoryService ---------------------------------------------------------
DEPLOY = "Deploys go through the release pipeline on Fridays."
BACKUP = "Backups are copied to the cold storage bucket nightly."
DEPLOY_QUERY = "release pipeline deploys"
BACKUP_QUERY = "backups storage bucket copied"


def service(home: Path, url: str, **embedding: Any) -> MemoryService:
    config = {
        "provider": "openai",
        "base_url": url,
        "model": "test-embed",
        "dimensions": 8,
        "retry_max_seconds": 0.01,
        "max_retries": 1,
        **embedding,
    }
    return MemoryService(settings=Settings.load(home, memory=VECTOR_MODES, embedding=config))


def index_rows(svc: MemoryService, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = apsw.Connection(str(svc.settings.index_path))
    try:
        return [tuple(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def doc_sha(svc: MemoryService, fact_id: str) -> str:
    rows = index_rows(
        svc, "SELECT content_sha256 FROM documents WHERE resource_name = 'global' AND id = ?", (fact_id,)
    )
    assert len(rows) == 1
    return str(rows[0][0])


def files_containing(home: Path, needle: str) -> list[Path]:
    return [p for p in home.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def test_precondition_the_fake_model_puts_related_texts_near() -> None:
    for dims in (8, 16):
        for query, near, far in ((DEPLOY_QUERY, DEPLOY, BACKUP), (BACKUP_QUERY, BACKUP, DEPLOY)):
            q = text_vector(query, dims)
            assert cosine(q, text_vector(near, dims)) > cosine(q, text_vector(far, dims))


def test_end_to_end_outage_sentinel_and_recovery(
    server: ScriptedServer, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = f"sk-coffer-{uuid.uuid4().hex}"
    monkeypatch.setenv("COFFER_TEST_EMBED_KEY", key)
    with service(tmp_home, server.url, api_key_env="COFFER_TEST_EMBED_KEY") as svc:
        deploy = svc.remember(DEPLOY, scope="global")
        res = svc.recall(DEPLOY_QUERY, stores=["global"], mode="vector")
        assert not res.fallback and res.hits[0].id == deploy.fact.id
        assert doc_sha(svc, deploy.fact.id) == deploy.after_sha256
        assert server.requests and all(r.headers["authorization"] == f"Bearer {key}" for r in server.requests)
        assert {r.body["model"] for r in server.requests} == {"test-embed"}

        # Outage: writes still land, keyword rows are searchable, the row keeps the sentinel.
        server.default = fail(500, "embedding backend down")
        backup = svc.remember(BACKUP, scope="global")
        assert backup.path.is_file() and BACKUP in backup.path.read_text()
        assert doc_sha(svc, backup.fact.id) == ""
        assert doc_sha(svc, deploy.fact.id) == deploy.after_sha256
        keyword = svc.recall("backups", stores=["global"], mode="keyword")
        assert [h.id for h in keyword.hits] == [backup.fact.id]
        before = len(server.requests)
        degraded = svc.recall(BACKUP_QUERY, stores=["global"], mode="vector")
        assert degraded.fallback and degraded.mode == "vector"
        assert degraded.hits and degraded.hits[0].id == backup.fact.id
        # The failed write paused the embedder for every process: the query is not even sent.
        assert len(server.requests) - before == 0
        hybrid = svc.recall(BACKUP_QUERY + " again", stores=["global"])
        assert hybrid.mode == "hybrid" and hybrid.fallback

        # Recovery. A failed embedding pauses the embedder for vec.PAUSE_SECONDS (60 s);
        # end that back-off explicitly instead of waiting it out.
        server.default = embed(8)
        assert svc.reindexer.vectors is not None and svc.reindexer.vectors.paused()
        svc.reindexer.vectors.resume()
        svc.reindex("global")
        assert doc_sha(svc, backup.fact.id) == backup.after_sha256
        assert index_rows(svc, "SELECT count(*) FROM documents WHERE content_sha256 = ''") == [(0,)]
        healed = svc.recall(BACKUP_QUERY, stores=["global"], mode="vector")
        assert not healed.fallback and healed.hits[0].id == backup.fact.id
        assert all(r.headers["authorization"] == f"Bearer {key}" for r in server.requests)
        assert files_containing(tmp_home, key) == []  # index.db, its WAL, the fact files...
    assert files_containing(tmp_home, key) == []
    assert any(p.name == "index.db" for p in tmp_home.rglob("*"))


def test_changing_dimensions_reembeds_the_store(server: ScriptedServer, tmp_home: Path) -> None:
    with service(tmp_home, server.url) as svc:
        deploy = svc.remember(DEPLOY, scope="global")
        backup = svc.remember(BACKUP, scope="global")
        assert index_rows(svc, "SELECT model_id, dimensions FROM vec_stores") == [
            ("openai-compatible:test-embed:8", 8)
        ]
    server.default = embed(16)
    before = len(server.requests)
    with service(tmp_home, server.url, dimensions=16) as svc:
        res = svc.recall(BACKUP_QUERY, stores=["global"], mode="vector")
        assert not res.fallback and res.hits[0].id == backup.fact.id
        assert index_rows(svc, "SELECT model_id, dimensions FROM vec_stores") == [
            ("openai-compatible:test-embed:16", 16)
        ]
        assert doc_sha(svc, deploy.fact.id) == deploy.after_sha256
        assert doc_sha(svc, backup.fact.id) == backup.after_sha256
        sent = {text for r in server.requests[before:] for text in r.body["input"]}
        assert {DEPLOY, BACKUP} <= sent
        res = svc.recall(DEPLOY_QUERY, stores=["global"], mode="vector")
        assert not res.fallback and res.hits[0].id == deploy.fact.id


def test_incomplete_openai_config_degrades_without_calling_out(
    server: ScriptedServer, tmp_home: Path
) -> None:
    with service(tmp_home, server.url, model=None) as svc:
        fact = svc.remember(DEPLOY, scope="global")
        res = svc.recall(DEPLOY_QUERY, stores=["global"], mode="vector")
        assert res.fallback and res.hits[0].id == fact.fact.id
        assert doc_sha(svc, fact.fact.id) == fact.after_sha256  # no vectors: no sentinel either
    assert server.requests == []
