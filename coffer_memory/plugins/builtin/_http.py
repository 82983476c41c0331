"""HTTP helpers shared by the built-in OpenAI-compatible clients (embeddings and chat).

Both clients retry 429, 5xx, timeouts and connection errors with tenacity (bounded, jittered,
honouring ``Retry-After`` up to a cap) and read their API key from an environment variable or
a keyring reference, never from a file.
"""

from __future__ import annotations

import email.utils
import importlib.util
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..._errors import CofferError

if TYPE_CHECKING:  # both come with the [openai] extra: imported on first use, never at start-up
    import httpx
    from tenacity import RetryCallState

HTTP_EXTRA = "openai"
"""The extra that brings httpx and tenacity: ``pip install 'coffer-memory[openai]'``."""


def require_http(error: type[CofferError], what: str) -> None:
    """Raise ``error`` naming the install command when httpx or tenacity is missing.

    A plain ``pip install coffer-memory`` has neither (they are the ``[openai]`` extra's), so the
    OpenAI-compatible clients check on first use and say what to install instead of failing on an
    import at start-up (the plugin manager imports every built-in that registers providers).
    """
    missing = [m for m in ("httpx", "tenacity") if importlib.util.find_spec(m) is None]
    if missing:
        raise error(
            f"{what} needs {' and '.join(missing)}, not installed here: pip install 'coffer-memory[{HTTP_EXTRA}]'"
        )


class Retryable(Exception):
    """A failure worth another attempt; ``retry_after`` is the server's hint in seconds."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def retry_after(response: httpx.Response) -> float | None:
    """The ``Retry-After`` header in seconds (a number or an HTTP date); None if absent or unreadable."""
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


def error_message(response: httpx.Response) -> str:
    """The server's error message: ``error.message`` of an OpenAI-style body, else the body's start;
    the API key the request carried is cut out of it."""
    try:
        body = response.json()
    except ValueError:
        return _without_key(response, response.text[:300])
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return _without_key(response, str(error.get("message") or error))
    return _without_key(response, str(error or body)[:300])


def _without_key(response: httpx.Response, message: str) -> str:
    """``message`` without the request's bearer key: some servers answer a refused key with the key
    itself ("Incorrect API key provided: ..."), and the message is shown, logged and kept in results."""
    try:
        header = response.request.headers.get("authorization", "")
    except RuntimeError:  # a response built by hand has no request
        return message
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or len(key.strip()) < 8:  # a key that short would blank ordinary words
        return message
    return message.replace(key.strip(), "[REDACTED:api_key]")


def retry_wait(state: RetryCallState, max_seconds: float) -> float:
    """Seconds before the next attempt: ``Retry-After`` when given, else jittered back-off; at most ``max_seconds``."""
    exc = state.outcome.exception() if state.outcome else None
    if isinstance(exc, Retryable) and exc.retry_after is not None:
        return min(exc.retry_after, max_seconds)
    from tenacity import wait_exponential_jitter

    backoff = wait_exponential_jitter(multiplier=0.25, max=max_seconds, jitter=0.25)
    return float(backoff(state))


def resolve_secret(
    api_key_env: str | None, credential_ref: str | None, error: type[CofferError]
) -> str | None:
    """The API key from the variable ``api_key_env`` or the keyring entry ``credential_ref`` (``service/user``).

    None when neither is set; ``error(message)`` is raised when the one that is set holds nothing.
    """
    if api_key_env:
        key = os.environ.get(api_key_env)
        if not key:
            raise error(f"environment variable {api_key_env} is not set")
        return key
    if credential_ref:
        try:
            import keyring
        except ImportError as exc:
            raise error("credential_ref needs the 'keyring' package: pip install keyring") from exc
        service, _, user = credential_ref.partition("/")
        key = keyring.get_password(service, user or "default")
        if not key:
            raise error(f"no secret found in the keyring for {credential_ref!r}")
        return str(key)
    return None


def json_client(
    base_url: str, *, key: str | None, timeout: float, transport: httpx.BaseTransport | None
) -> httpx.Client:
    """An httpx client for a JSON API, with a bearer key when there is one."""
    import httpx

    headers = {"Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.Client(base_url=base_url, headers=headers, timeout=timeout, transport=transport)


class JsonApi:
    """What both OpenAI-compatible clients hold: an httpx client made on first use with the API key
    ``key()`` resolves, and POSTs of JSON retried as the module docstring says."""

    def __init__(
        self,
        base_url: str,
        *,
        key: Callable[[], str | None],
        timeout: float,
        transport: httpx.BaseTransport | None,
    ) -> None:
        self.base_url = base_url
        self._key = key
        self._timeout = timeout
        self._transport = transport
        self._client: httpx.Client | None = None

    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = json_client(
                self.base_url, key=self._key(), timeout=self._timeout, transport=self._transport
            )
        return self._client

    def _post(self, path: str, payload: dict[str, Any]) -> httpx.Response:
        import httpx

        try:
            response = self._http().post(path, json=payload)
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            raise Retryable(f"{type(exc).__name__}: {exc}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise Retryable(f"HTTP {response.status_code}: {error_message(response)}", retry_after(response))
        return response

    def post(
        self, path: str, payload: dict[str, Any], *, attempts: int, max_seconds: float
    ) -> httpx.Response:
        """The server's answer to ``payload`` (any status but 429 and 5xx); a timeout, a lost
        connection, 429 or 5xx is tried again, ``attempts`` times in all with ``retry_wait``'s
        waits, and the last one raised as ``Retryable``."""
        from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

        retrying = Retrying(
            stop=stop_after_attempt(attempts),
            wait=lambda state: retry_wait(state, max_seconds),
            retry=retry_if_exception_type(Retryable),
            reraise=True,
        )
        return retrying(self._post, path, payload)

    def close(self) -> None:
        """Close the HTTP client (a later POST makes another)."""
        if self._client is not None:
            self._client.close()
            self._client = None
