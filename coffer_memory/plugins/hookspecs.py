"""Hook specifications. Plugins implement them with ``@hookimpl`` (entry-point group ``coffer_memory``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import attrs
import pluggy

from .._config import EmbeddingSettings, LLMSettings, Settings
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


@attrs.frozen
class DocVectors:
    """The vectors a machine's local index computed for one document's chunks, pushed beside it.

    ``rows`` holds ``(chunk position, window, vector)``: a long chunk has a vector per window
    (``window`` 0 is the chunk itself). ``model`` and ``dimensions`` are the embedder's.
    """

    model: str
    dimensions: int
    rows: tuple[tuple[int, int, Vector], ...]


@attrs.frozen
class IndexedDoc:
    """One recall document as a shared index backend stores it.

    ``path`` is relative to the store's folder (hosts may mount a team store in different
    places); ``sha256`` is the file's content hash, what makes a sync idempotent. ``vectors``
    are the local index's vectors of exactly this content, or None (vectors off, or not computed
    yet).
    """

    id: str
    path: str
    sha256: str
    title: str
    description: str
    created_at: datetime
    updated_at: datetime
    tags: tuple[str, ...]
    chunks: tuple[str, ...]
    vectors: DocVectors | None = None


@attrs.frozen
class BackendHit:
    """One document found by a backend's keyword or vector search: its best chunk and a
    higher-is-better score (for vectors, 1 - cosine distance)."""

    id: str
    path: str
    title: str
    updated_at: datetime
    text: str
    score: float


@runtime_checkable
class IndexBackend(Protocol):
    """A shared recall index beside the machine-local SQLite one (``[index] backend``).

    The files stay the truth: the service pushes every document its local index sees change
    (``sync``) and answers keyword recall from ``search``. ``write_lock`` serialises the
    writes to one store across processes and hosts; it is re-entrant within the thread that
    holds it, and ``sync`` inside it runs under the same lock. A backend whose lock can be lost
    while held (a session that ends) may also offer ``check_lock(store)``, raising when it was:
    the Writer calls it right before each file change is made durable, and makes none then.
    """

    name: str
    # True: ``sync`` keeps the documents' vectors and ``nearest`` answers vector recall. False:
    # vector recall stays on each machine's local index (keyword where that has none, flagged).
    vectors: bool

    def sync(self, store: str, docs: Sequence[IndexedDoc], removed: Sequence[str]) -> int:
        """Upsert ``docs`` (skipping those whose sha256 is unchanged), drop the ``removed`` paths;
        returns the store's version afterwards (advanced when anything changed)."""
        ...

    def digests(self, store: str, model: str | None = None) -> dict[str, str]:
        """Every document of ``store``: path -> sha256; with ``model`` (a backend with vectors), a
        document holding no vectors of that model maps to ``""``, so a comparison sees it as due."""
        ...

    def nearest(
        self,
        stores: Sequence[str],
        vector: Vector,
        model: str,
        limit: int,
        *,
        tags: Sequence[str] = (),
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> dict[str, list[BackendHit]]:
        """Up to ``limit`` documents per store nearest ``vector`` by cosine distance, among the
        vectors of ``model`` at its width; filters as in ``search``. Only called when ``vectors``."""
        ...

    def search(
        self,
        stores: Sequence[str],
        query: str,
        limit: int,
        *,
        tags: Sequence[str] = (),
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> dict[str, list[BackendHit]]:
        """Up to ``limit`` documents per store matching ``query``, best first; the tags and time
        bounds ``[since, until)`` (on ``updated_at``) filter inside the query."""
        ...

    def write_lock(self, store: str) -> AbstractContextManager[None]:
        """Hold the store's write lock across processes and hosts."""
        ...

    def version(self, store: str) -> int:
        """How many syncs changed ``store`` (0 before the first)."""
        ...

    def drop_store(self, store: str) -> None:
        """Forget every row of ``store``."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


IndexBackendFactory = Callable[[Settings], IndexBackend]


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

    @hookspec
    def register_index_backends(self, register: Callable[[str, IndexBackendFactory], None]) -> None:
        """Register shared index backends: ``register(name, factory)``; ``factory(settings)`` builds an
        ``IndexBackend``.

        ``name`` is what ``Settings.index.backend`` selects (``"sqlite"``, the default, is the
        machine-local index alone and needs no backend); ``settings`` is the home's ``Settings``.
        """
