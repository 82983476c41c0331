"""The bench's corpus as ``bench/limit.py`` writes it: the facts of ``core.py`` rendered as coffer
renders them, alternating between a project store and the global store.

Imported after the importing script has put ``--coffer-src`` first on ``sys.path``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from core import SEED, fact_text, fact_title

from coffer_memory import MemoryService
from coffer_memory._models import MemoryFact
from coffer_memory._store.files import render_fact
from coffer_memory._store.paths import GLOBAL_STORE, slugify

LIMIT = 10
FETCH = LIMIT * 4  # coffer reads 4x the limit in chunks to keep one hit per document


def fact_files(n: int) -> Iterator[tuple[str, bytes]]:
    """``n`` (file name, content) pairs: the bench's facts rendered as coffer writes them."""
    r = random.Random(SEED)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(n):
        text = fact_text(r)
        title = fact_title(text)
        when = start + timedelta(seconds=i)
        fact = MemoryFact(
            id="",
            title=title,
            description=" ".join(text.split())[:120],
            body=text,
            actor="agent",
            origin_session_id=None,
            created_at=when,
            updated_at=when,
        )
        yield f"{slugify(title)}-{i}.md", render_fact(fact)


def write_corpus(svc: MemoryService, repo: Path, n: int) -> list[Path]:
    """``n`` fact files, alternating project and global stores."""
    project = svc.target(cwd=repo).store_dir
    stores = [project, svc.target(store=GLOBAL_STORE).store_dir]
    written = []
    for i, (name, content) in enumerate(fact_files(n)):
        inbox = stores[i % 2] / "knowledge" / "inbox"
        inbox.mkdir(parents=True, exist_ok=True)
        path = inbox / name
        path.write_bytes(content)
        written.append(path)
    return written
