"""Hook specifications. Plugins implement them with ``@hookimpl`` (entry-point group ``coffer_memory``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import attrs
import pluggy

from .._config import EmbeddingSettings, LLMSettings
from .._llm import ChatMessage, Completion

hookspec = pluggy.HookspecMarker("coffer_memory")
hookimpl = pluggy.HookimplMarker("coffer_memory")


@attrs.frozen
class GrepMatch:
    """One matching line: the file, its 1-based line number, the line, which patterns it holds."""

    path: Path
    line_number: int
    line: str
    patterns: frozenset[int]


@runtime_checkable
class GrepBackend(Protocol):
    """Searches Markdown files under folders for fixed strings, ignoring case."""

    @property
    def name(self) -> str:
        """The name ``grep_backend`` selects it by."""
        ...

    @property
    def priority(self) -> int:
        """Higher wins when several are available."""
        ...

    def available(self) -> bool:
        """True when the backend can run on this machine."""
        ...

    def search(self, folders: Sequence[Path], patterns: Sequence[str], *, max_lines: int) -> list[GrepMatch]:
        """Lines of ``*.md`` files under ``folders`` holding any of ``patterns`` (fixed strings)."""
        ...


Vector = Sequence[float]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into float32 vectors of a fixed width.

    ``model_id`` and ``dimensions`` are recorded in the index: when either changes, every
    store is re-embedded on its next reconcile. ``embed_batch`` returns one row per text
    (a sequence of floats, e.g. a numpy float32 row); it raises
    ``coffer_memory._errors.EmbeddingUnavailable`` when the model cannot run. An embedder may
    also have ``embed_query(text) -> Vector``: recall then embeds its query with it (models
    trained with separate query and document prompts).
    """

    name: str
    model_id: str
    dimensions: int

    def available(self) -> bool:
        """True when the embedder can run here (its packages import, its config is complete)."""
        ...

    def embed_batch(self, texts: Sequence[str]) -> Sequence[Vector]:
        """One vector per text, in order."""
        ...


EmbedderFactory = Callable[[EmbeddingSettings], Embedder]


@runtime_checkable
class LLM(Protocol):
    """A chat model: messages in, a ``coffer_memory._llm.Completion`` out.

    ``complete`` raises ``coffer_memory._llm.LLMUnavailable`` when the model cannot answer
    (server down after retries, a refusal, a rejected model). ``json_schema`` asks for
    structured output where the backend supports it; the caller still parses
    ``Completion.text`` with ``coffer_memory._llm.extract_json`` and describes the expected
    JSON in the prompt, because not every server enforces a schema.
    """

    name: str
    model_id: str

    def available(self) -> bool:
        """True when the LLM can run here (its config is complete, its packages import)."""
        ...

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> Completion:
        """The model's answer to ``messages``; ``max_tokens`` None means the configured limit."""
        ...


LLMFactory = Callable[[LLMSettings], LLM]


class CofferHookSpecs:
    """The hooks a coffer-memory plugin may implement."""

    @hookspec
    def register_grep_backends(self, register: Callable[[GrepBackend], None]) -> None:
        """Register grep backends by calling ``register(backend)`` once per backend."""

    @hookspec
    def register_embedders(self, register: Callable[[str, EmbedderFactory], None]) -> None:
        """Register embedders: ``register(name, factory)``; ``factory(settings)`` builds an Embedder.

        ``name`` is what ``Settings.embedding.provider`` selects; ``settings`` is the
        ``coffer_memory._config.EmbeddingSettings`` of the home (model, base URL, ...).
        """

    @hookspec
    def register_llms(self, register: Callable[[str, LLMFactory], None]) -> None:
        """Register LLM backends: ``register(name, factory)``; ``factory(settings)`` builds an LLM.

        ``name`` is what ``Settings.llm.provider`` selects; ``settings`` is the
        ``coffer_memory._config.LLMSettings`` of the home (model, base URL, ...).
        """
