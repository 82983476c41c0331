"""Value objects and errors for LLM backends, and tolerant JSON extraction from model output.

An LLM backend (see ``coffer_memory.plugins.LLM``) takes ``ChatMessage`` objects and returns a
``Completion`` whose ``text`` is the raw content. Servers without JSON mode wrap JSON in fences
or prose, and a truncated answer ends mid-value: ``extract_json`` finds the first complete
top-level object or array and raises ``LLMOutputInvalid`` when there is none. Errors::

    CofferError
    ├── LLMUnavailable    LLM_UNAVAILABLE      (.model, .status: gave up, refused, rejected)
    └── LLMOutputInvalid  LLM_OUTPUT_INVALID   (.reason: "empty" | "no_json" | "truncated", .text)
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Literal

import attrs

from ._errors import CofferError

log = logging.getLogger("coffer_memory.llm")

Role = Literal["system", "user", "assistant"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant")


class LLMUnavailable(CofferError):
    """The model could not answer: the server gave up, refused, or rejected the model or request."""

    code = "LLM_UNAVAILABLE"

    def __init__(self, message: str, *, model: str | None = None, status: int | None = None) -> None:
        super().__init__(message, model=model, status=status)
        self.model = model
        self.status = status


class LLMOutputInvalid(CofferError):
    """The model's answer holds no usable JSON: ``reason`` is ``empty``, ``no_json`` or ``truncated``."""

    code = "LLM_OUTPUT_INVALID"

    def __init__(self, message: str, *, reason: str, text: str = "") -> None:
        super().__init__(message, reason=reason)
        self.reason = reason
        self.text = text


@attrs.frozen
class ChatMessage:
    """One message of a chat: ``role`` is ``system``, ``user`` or ``assistant``."""

    role: Role = attrs.field(validator=attrs.validators.in_(ROLES))
    content: str = attrs.field(validator=attrs.validators.instance_of(str))


@attrs.frozen
class TokenUsage:
    """Tokens a completion cost, as the server reported them (zeros when it did not)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


@attrs.frozen
class Completion:
    """A model's answer: the raw ``text``, its token usage, the model that answered, why it stopped."""

    text: str
    usage: TokenUsage
    model: str
    finish_reason: str | None = None

    @property
    def truncated(self) -> bool:
        """True when the answer was cut at the token limit (``finish_reason == "length"``)."""
        return self.finish_reason == "length"


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*(?:json5?|jsonc)?[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)
_CLOSERS = {"{": "}", "[": "]"}
_DECODER = json.JSONDecoder(strict=False)  # models put raw newlines and tabs inside strings


class _Unclosed(Exception):
    """A bracket opened and the text ended before it closed."""


def _span_end(text: str, start: int) -> int:
    """The index just past the bracket that closes ``text[start]``, skipping JSON strings."""
    stack = [_CLOSERS[text[start]]]
    in_string = False
    i = start + 1
    while i < len(text):
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in _CLOSERS:
            stack.append(_CLOSERS[ch])
        elif ch in "}]":
            if ch != stack[-1]:
                return i + 1  # mismatched: not JSON, resume the search after it
            stack.pop()
            if not stack:
                return i + 1
        i += 1
    raise _Unclosed


def _first_value(text: str, wanted: tuple[type, ...]) -> Any:
    """The first top-level object or array in ``text`` that parses to a ``wanted`` type.

    Raises _Unclosed when a bracket never closes, LookupError when nothing fits.
    """
    i = 0
    while True:
        starts = [p for p in (text.find("{", i), text.find("[", i)) if p >= 0]
        if not starts:
            raise LookupError
        start = min(starts)
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError:
            i = _span_end(text, start)
            continue
        if isinstance(value, wanted):
            return value
        i = end


def extract_json(text: str, *, expect: Literal["any", "object", "array"] = "any") -> Any:
    """The first complete JSON object or array in a model's answer (a dict or a list).

    Tolerates ```json fences, prose around the JSON and ``<think>`` blocks. ``expect``
    skips values of the other kind (prose such as "see [1]" parses as an array). Raises
    ``LLMOutputInvalid`` when the text is empty, holds no such value, or ends inside one
    (a truncated answer is never half-parsed).
    """
    wanted: tuple[type, ...] = {"any": (dict, list), "object": (dict,), "array": (list,)}[expect]
    cleaned = _THINK.sub("", text).strip()
    if not cleaned:
        raise LLMOutputInvalid("the model returned no text", reason="empty", text=text)
    candidates = [m.group(1) for m in _FENCE.finditer(cleaned)] + [cleaned]
    for candidate in candidates:
        try:
            return _first_value(candidate, wanted)
        except LookupError:
            continue
        except _Unclosed:
            raise LLMOutputInvalid(
                "the model's answer ends inside a JSON value (truncated?)", reason="truncated", text=text
            ) from None
    label = {"any": "object or array", "object": "object", "array": "array"}[expect]
    raise LLMOutputInvalid(f"the model's answer holds no JSON {label}", reason="no_json", text=text)


class PluginLLM:
    """A plugin's LLM as the organizer and distiller use it: whatever its ``complete`` raises
    besides coffer's own errors, or a return that is not a ``Completion``, is ``LLMUnavailable``
    naming the plugin, which callers already catch (they skip the item). A plugin's bug failed the
    whole ``coffer organize`` with "unexpected RuntimeError" and no plugin name."""

    def __init__(self, llm: Any, plugin: str | None) -> None:
        self.llm = llm
        self.plugin = plugin
        self.name: str = llm.name
        self.model_id: str = llm.model_id

    def __repr__(self) -> str:
        return f"PluginLLM({self.llm!r}, plugin={self.plugin!r})"

    def _failed(self, what: str) -> LLMUnavailable:
        return LLMUnavailable(f"the LLM {self.name!r} (plugin {self.plugin}) {what}", model=self.model_id)

    def available(self) -> bool:
        """The plugin's ``available()``; False (not a crash) when it raises, with a warning naming
        the plugin (else the only word was the built-in's hint, "set llm.model")."""
        try:
            return bool(self.llm.available())
        except Exception as exc:
            log.warning(
                "%s",
                self._failed(f"failed in available(): {type(exc).__name__}: {' '.join(str(exc).split())}"),
            )
            return False

    def complete(self, messages: Any, **options: Any) -> Completion:
        """The plugin's ``complete``, its failures typed."""
        try:
            answer = self.llm.complete(messages, **options)
        except CofferError:
            raise
        except Exception as exc:
            raise self._failed(f"failed: {type(exc).__name__}: {' '.join(str(exc).split())}") from exc
        if not isinstance(answer, Completion):
            raise self._failed(f"returned {type(answer).__name__}, not a Completion")
        return answer
