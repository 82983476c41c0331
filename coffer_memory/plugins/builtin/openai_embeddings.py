"""Built-in embedder for any OpenAI-compatible ``/embeddings`` endpoint over httpx.

Works with OpenAI, Ollama, vLLM, llama.cpp server and Voyage-compatible gateways. Retries
429, 5xx, timeouts and connection errors with tenacity (bounded, jittered, honouring
``Retry-After``). The API key comes from an environment variable or a keyring reference,
never from a file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..._config import EmbeddingSettings
from ..._errors import EmbeddingUnavailable
from ..hookspecs import EmbedderFactory, Vector, hookimpl
from ._http import JsonApi, Retryable, error_message, require_http, resolve_secret

if TYPE_CHECKING:  # the [openai] extra's: imported on first use (``require_http`` says what to install)
    import httpx

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def resolve_api_key(settings: EmbeddingSettings) -> str | None:
    """The API key from ``api_key_env`` or the keyring reference ``credential_ref`` (``service/user``)."""
    return resolve_secret(settings.api_key_env, settings.credential_ref, EmbeddingUnavailable)


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible server; needs ``model`` and ``dimensions``."""

    name = "openai"

    def __init__(self, settings: EmbeddingSettings, *, transport: httpx.BaseTransport | None = None) -> None:
        self.settings = settings
        self.base_url = (settings.base_url or DEFAULT_BASE_URL).rstrip("/")
        self.model = settings.model or ""
        self.dimensions = settings.dimensions or 0
        self.model_id = f"openai-compatible:{self.model}:{self.dimensions}"
        self._api = JsonApi(
            self.base_url,
            key=lambda: resolve_api_key(settings),
            timeout=settings.timeout_seconds,
            transport=transport,
        )

    def available(self) -> bool:
        """True when a model and its dimensions are configured."""
        return bool(self.model and self.dimensions)

    def _request(self, texts: Sequence[str]) -> list[Vector]:
        """One batch's vectors: its request retried (``JsonApi.post``), then the answer checked."""
        payload: dict[str, Any] = {"model": self.model, "input": list(texts), "encoding_format": "float"}
        if self.settings.request_dimensions:
            payload["dimensions"] = self.dimensions
        attempts = self.settings.max_retries + 1
        try:
            response = self._api.post(
                "/embeddings", payload, attempts=attempts, max_seconds=self.settings.retry_max_seconds
            )
        except Retryable as exc:
            raise EmbeddingUnavailable(f"{self.base_url} failed after {attempts} attempts: {exc}") from exc
        if response.status_code >= 400:
            raise EmbeddingUnavailable(
                f"{self.base_url} rejected embedding model {self.model!r} "
                f"(HTTP {response.status_code}): {error_message(response)}"
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
        require_http(EmbeddingUnavailable, "the openai embedder")
        size = self.settings.batch_size
        return [v for start in range(0, len(texts), size) for v in self._request(texts[start : start + size])]

    def close(self) -> None:
        """Close the HTTP client."""
        self._api.close()


@hookimpl
def register_embedders(register: Callable[[str, EmbedderFactory], None]) -> None:
    """Register the OpenAI-compatible embedder as ``openai``."""
    register("openai", OpenAIEmbedder)
