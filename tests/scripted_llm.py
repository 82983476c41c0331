"""A scripted LLM plugin for organizer tests: registered through the real plugin manager."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from coffer_memory._config import LLMSettings
from coffer_memory._llm import ChatMessage, Completion, TokenUsage
from coffer_memory.plugins import get_plugin_manager, hookimpl

Script = Callable[[Sequence[ChatMessage]], str | dict[str, Any]]


class ScriptedLLM:
    """Answers each completion with ``script(messages)``; records every call."""

    name = "scripted"
    model_id = "scripted-1"

    def __init__(self, script: Script, delay: float = 0.0) -> None:
        self.script = script
        self.delay = delay
        self.calls: list[Sequence[ChatMessage]] = []

    def available(self) -> bool:
        return True

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> Completion:
        self.calls.append(list(messages))
        if self.delay:
            time.sleep(self.delay)
        answer = self.script(messages)
        text = answer if isinstance(answer, str) else json.dumps(answer)
        return Completion(text=text, usage=TokenUsage(100, 20), model=self.model_id, finish_reason="stop")


class _Plugin:
    def __init__(self, llm: ScriptedLLM) -> None:
        self.llm = llm

    @hookimpl
    def register_llms(self, register: Callable[[str, Callable[[LLMSettings], ScriptedLLM]], None]) -> None:
        register("scripted", lambda settings: self.llm)


@contextmanager
def installed(llm: ScriptedLLM) -> Iterator[ScriptedLLM]:
    """Register ``llm`` as provider ``scripted`` for the duration of the block."""
    pm = get_plugin_manager()
    plugin = _Plugin(llm)
    pm.register(plugin, name="test-scripted-llm")
    try:
        yield llm
    finally:
        pm.unregister(plugin)


def item_of(messages: Sequence[ChatMessage]) -> tuple[str, str]:
    """The inbox file name and text of an organize prompt."""
    prompt = messages[-1].content
    name = re.search(r"New note \(inbox/(.+?)\):", prompt)
    text = prompt.split("Text:\n", 1)[1].split("\n\nCandidate topic documents:", 1)[0]
    return (name.group(1) if name else ""), text


def candidates_of(messages: Sequence[ChatMessage]) -> list[str]:
    """The candidate file names offered in an organize prompt."""
    return re.findall(r"^\[(.+?\.md)\]$", messages[-1].content, flags=re.MULTILINE)
