"""Built-in embedder for any OpenAI-compatible ``/embeddings`` endpoint over httpx.

Works with OpenAI, Ollama, vLLM, llama.cpp server and Voyage-compatible gateways. Retries
429, 5xx, timeouts and connection errors with tenacity (bounded, jittered, honouring
``Retry-After``). The API key comes from an environment variable or a keyring reference,
never from a file.
"""

from __future__ import annotations

import email.utils
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from ...config import EmbeddingSettings
from ...errors import EmbeddingUnavailable
from ..hookspecs import EmbedderFactory, Vector, hookimpl

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None  # unreadable: the ordinary back-off applies
    return max(0.0, parsed.timestamp() - time.time())


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error or body)[:300]


def resolve_api_key(settings: EmbeddingSettings) -> str | None:
    """The API key from ``api_key_env`` or the keyring reference ``credential_ref`` (``service/user``)."""
    if settings.api_key_env:
        key = os.environ.get(settings.api_key_env)
        if not key:
            raise EmbeddingUnavailable(f"environment variable {settings.api_key_env} is not set")
        return key
    if settings.credential_ref:
        try:
            import keyring
        except ImportError as exc:
            raise EmbeddingUnavailable(
                "credential_ref needs the 'keyring' package: pip install keyring"
            ) from exc
        service, _, user = settings.credential_ref.partition("/")
        key = keyring.get_password(service, user or "default")
        if not key:
            raise EmbeddingUnavailable(f"no secret found in the keyring for {settings.credential_ref!r}")
        return str(key)
    return None


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible server; needs ``model`` and ``dimensions``."""

    name = "openai"

    def __init__(self, settings: EmbeddingSettings, *, transport: httpx.BaseTransport | None = None) -> None:
        self.settings = settings
        self.base_url = (settings.base_url or DEFAULT_BASE_URL).rstrip("/")
        self.model = settings.model or ""
        self.dimensions = settings.dimensions or 0
        self.model_id = f"openai-compatible:{self.model}:{self.dimensions}"
        self._transport = transport
        self._client: httpx.Client | None = None

    def available(self) -> bool:
        """True when a model and its dimensions are configured."""
        return bool(self.model and self.dimensions)

    def _http(self) -> httpx.Client:
        if self._client is None:
            headers = {"Accept": "application/json"}
            key = resolve_api_key(self.settings)
            if key:
                headers["Authorization"] = f"Bearer {key}"
            self._client = httpx.Client(
                base_url=self.base_url,
                headers=headers,
                timeout=self.settings.timeout_seconds,
                transport=self._transport,
            )
        return self._client

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Retryable) and exc.retry_after is not None:
            return min(exc.retry_after, self.settings.retry_max_seconds)
        backoff = wait_exponential_jitter(multiplier=0.25, max=self.settings.retry_max_seconds, jitter=0.25)
        return float(backoff(state))

    def _post(self, texts: Sequence[str]) -> list[Vector]:
        payload: dict[str, Any] = {"model": self.model, "input": list(texts), "encoding_format": "float"}
        if self.settings.request_dimensions:
            payload["dimensions"] = self.dimensions
        try:
            response = self._http().post("/embeddings", json=payload)
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise _Retryable(
                f"HTTP {response.status_code}: {_error_message(response)}", _retry_after(response)
            )
        if response.status_code >= 400:
            raise EmbeddingUnavailable(
                f"{self.base_url} rejected embedding model {self.model!r} "
                f"(HTTP {response.status_code}): {_error_message(response)}"
            )
        try:
            data = sorted(response.json()["data"], key=lambda item: item.get("index", 0))
            vectors: list[Vector] = [item["embedding"] for item in data]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise EmbeddingUnavailable(f"{self.base_url} returned a malformed embeddings response") from exc
        if len(vectors) != len(texts):
            raise EmbeddingUnavailable(
                f"{self.base_url} returned {len(vectors)} embeddings for {len(texts)} inputs"
            )
        for vector in vectors:
            if not isinstance(vector, list) or not all(isinstance(x, int | float) for x in vector):
                raise EmbeddingUnavailable(f"{self.base_url} returned a malformed embeddings response")
            if len(vector) != self.dimensions:
                raise EmbeddingUnavailable(
                    f"model {self.model!r} returned {len(vector)} dimensions but embedding.dimensions is "
                    f"{self.dimensions}: fix the setting (changing it re-embeds every store)"
                )
        return vectors

    def embed_batch(self, texts: Sequence[str]) -> Sequence[Vector]:
        """Embed ``texts`` in requests of ``batch_size``; raises EmbeddingUnavailable on give-up."""
        if not self.available():
            raise EmbeddingUnavailable("the openai embedder needs embedding.model and embedding.dimensions")
        out: list[Vector] = []
        size = self.settings.batch_size
        for start in range(0, len(texts), size):
            retrying = Retrying(
                stop=stop_after_attempt(self.settings.max_retries + 1),
                wait=self._wait,
                retry=retry_if_exception_type(_Retryable),
                reraise=True,
            )
            try:
                out += retrying(self._post, texts[start : start + size])
            except _Retryable as exc:
                raise EmbeddingUnavailable(
                    f"{self.base_url} failed after {self.settings.max_retries + 1} attempts: {exc}"
                ) from exc
        return out

    def close(self) -> None:
        """Close the HTTP client."""
        if self._client is not None:
            self._client.close()
            self._client = None


@hookimpl
def register_embedders(register: Callable[[str, EmbedderFactory], None]) -> None:
    """Register the OpenAI-compatible embedder as ``openai``."""
    register("openai", OpenAIEmbedder)
