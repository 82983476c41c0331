"""An example embedder plugin for coffer-memory: feature-hashed bags of words.

It needs no model and no network, so it shows the whole plugin surface in a few lines.
Install it as a package whose ``pyproject.toml`` declares::

    [project.entry-points.coffer_memory]
    hash = "coffer_hash_embedder"

then select it in ``<home>/config.toml``::

    [embedding]
    provider = "hash"
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence

from coffer_memory._config import EmbeddingSettings
from coffer_memory.plugins import Embedder, hookimpl

WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """Each word adds +1 or -1 to one of ``dimensions`` buckets; rows are L2-normalised."""

    name = "hash"

    def __init__(self, dimensions: int = 64) -> None:
        self.dimensions = dimensions
        self.model_id = f"hash-bow-{dimensions}"

    def available(self) -> bool:
        return True

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        rows = []
        for text in texts:
            row = [0.0] * self.dimensions
            for word in WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "big") % self.dimensions
                row[bucket] += 1.0 if digest[4] & 1 else -1.0
            norm = math.sqrt(sum(x * x for x in row)) or 1.0
            rows.append([x / norm for x in row])
        return rows


def build(settings: EmbeddingSettings) -> Embedder:
    """The factory coffer-memory calls with the home's embedding settings."""
    return HashEmbedder(settings.dimensions or 64)


@hookimpl
def register_embedders(register: Callable[[str, Callable[[EmbeddingSettings], Embedder]], None]) -> None:
    register("hash", build)
