"""Built-in LLM for any OpenAI-compatible ``POST /chat/completions`` endpoint over httpx.

Works with OpenAI, Ollama, vLLM, the llama.cpp server and OpenRouter. Retries 429, 5xx,
timeouts and connection errors with tenacity (bounded, jittered, honouring ``Retry-After``);
any other 4xx is ``LLMUnavailable`` at once, unless it says the server cannot take part of the
request: then the request is adapted once per cause and the adaptation is remembered for later
calls. Causes are an unsupported ``response_format`` (with ``json_mode = "auto"``: JSON schema,
then JSON object mode, then none), ``max_tokens`` where the model wants
``max_completion_tokens``, and a model that only takes its default temperature. The API key
comes from an environment variable or a keyring reference, never from a file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..._config import LLMSettings
from ..._errors import InvalidInput
from ..._llm import ChatMessage, Completion, LLMUnavailable, TokenUsage
from ..hookspecs import LLMFactory, hookimpl
from ._http import JsonApi, Retryable, error_message, require_http, resolve_secret

if TYPE_CHECKING:  # the [openai] extra's: imported on first use (``require_http`` says what to install)
    import httpx

DEFAULT_BASE_URL = "https://api.openai.com/v1"
SCHEMA_NAME = "coffer"

JsonLevel = Literal["json_schema", "json_object", "off"]
_NEXT_LEVEL: dict[JsonLevel, JsonLevel] = {"json_schema": "json_object", "json_object": "off"}
_RESPONSE_FORMAT_HINTS = ("response_format", "response format", "json_schema", "json_object")

logger = logging.getLogger(__name__)


def _error_param(response: httpx.Response) -> str:
    """The OpenAI error body's ``param`` (the request field it blames), or ``""``."""
    try:
        body = response.json()
    except ValueError:
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    param = error.get("param") if isinstance(error, dict) else None
    return param if isinstance(param, str) else ""


def _content_text(content: Any) -> str:
    """The message content as text: a string, or the text parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text") or "")
            for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "output_text")
        )
    raise TypeError(f"unexpected message content {type(content).__name__}")


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _usage(raw: Any) -> TokenUsage:
    if not isinstance(raw, dict):
        return TokenUsage(0, 0)
    return TokenUsage(_count(raw.get("prompt_tokens")), _count(raw.get("completion_tokens")))


class OpenAIChatLLM:
    """Chat completions from an OpenAI-compatible server; needs ``model``."""

    name = "openai"

    def __init__(self, settings: LLMSettings, *, transport: httpx.BaseTransport | None = None) -> None:
        self.settings = settings
        self.base_url = (settings.base_url or DEFAULT_BASE_URL).rstrip("/")
        self.model = settings.model or ""
        self.model_id = f"openai-compatible:{self.model}"
        self._api = JsonApi(
            self.base_url,
            key=lambda: resolve_secret(settings.api_key_env, settings.credential_ref, LLMUnavailable),
            timeout=settings.timeout_seconds,
            transport=transport,
        )
        self.json_level: JsonLevel = "json_schema" if settings.json_mode == "auto" else settings.json_mode
        self._token_field = "max_tokens"
        self._send_temperature = True

    def available(self) -> bool:
        """True when a model is configured."""
        return bool(self.model)

    def _payload(
        self,
        messages: Sequence[ChatMessage],
        json_schema: dict[str, Any] | None,
        max_tokens: int,
        temperature: float,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            self._token_field: max_tokens,
        }
        if self._send_temperature:
            payload["temperature"] = temperature
        if json_schema is not None and self.json_level == "json_schema":
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": SCHEMA_NAME, "schema": json_schema, "strict": True},
            }
        elif json_schema is not None and self.json_level == "json_object":
            payload["response_format"] = {"type": "json_object"}
        return payload

    def _send(self, payload: dict[str, Any]) -> httpx.Response:
        require_http(LLMUnavailable, "the openai LLM")
        attempts = self.settings.max_retries + 1
        try:
            return self._api.post(
                "/chat/completions", payload, attempts=attempts, max_seconds=self.settings.retry_max_seconds
            )
        except Retryable as exc:
            raise LLMUnavailable(
                f"{self.base_url} failed after {attempts} attempts for model {self.model!r}: {exc}",
                model=self.model,
            ) from exc

    def _adapt(self, response: httpx.Response, payload: dict[str, Any]) -> bool:
        """Change the request for a 400 that names a field the server cannot take; False if none fits."""
        if response.status_code not in (400, 422):
            return False
        message = error_message(response)
        blamed = f"{_error_param(response)} {message}".lower()
        if "response_format" in payload and any(hint in blamed for hint in _RESPONSE_FORMAT_HINTS):
            following = _NEXT_LEVEL.get(self.json_level)
            if self.settings.json_mode != "auto" or following is None:
                return False
            logger.warning(
                "%s rejected response_format %r for model %r (%s); using %r from now on",
                self.base_url,
                self.json_level,
                self.model,
                message,
                following,
            )
            self.json_level = following
            return True
        if self._token_field == "max_tokens" and "max_completion_tokens" in blamed:
            self._token_field = "max_completion_tokens"
            return True
        if self._send_temperature and "temperature" in blamed and "unsupported" in blamed:
            self._send_temperature = False
            return True
        return False

    def _parse(self, response: httpx.Response) -> Completion:
        try:
            body = response.json()
            choice = body["choices"][0]
            message = choice["message"]
            refusal = message.get("refusal")
            text = _content_text(message.get("content"))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise LLMUnavailable(
                f"{self.base_url} returned a malformed chat completion for model {self.model!r}: "
                f"{error_message(response)}",
                model=self.model,
            ) from exc
        if refusal:
            raise LLMUnavailable(f"model refused: {refusal}", model=self.model)
        finish = choice.get("finish_reason")
        answered_by = body.get("model")
        return Completion(
            text=text,
            usage=_usage(body.get("usage")),
            model=answered_by if isinstance(answered_by, str) and answered_by else self.model,
            finish_reason=finish if isinstance(finish, str) else None,
        )

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> Completion:
        """The model's answer; raises LLMUnavailable on give-up, refusal or a rejected request."""
        if not self.available():
            raise LLMUnavailable("the openai LLM needs llm.model")
        if not messages:
            raise InvalidInput("complete() needs at least one message", field="messages")
        limit = max_tokens or self.settings.max_tokens
        while True:
            payload = self._payload(messages, json_schema, limit, temperature)
            response = self._send(payload)
            if response.status_code < 400:
                return self._parse(response)
            if not self._adapt(response, payload):
                raise LLMUnavailable(
                    f"{self.base_url} rejected model {self.model!r} "
                    f"(HTTP {response.status_code}): {error_message(response)}",
                    model=self.model,
                    status=response.status_code,
                )

    def close(self) -> None:
        """Close the HTTP client."""
        self._api.close()


@hookimpl
def register_llms(register: Callable[[str, LLMFactory], None]) -> None:
    """Register the OpenAI-compatible chat LLM as ``openai``."""
    register("openai", OpenAIChatLLM)
