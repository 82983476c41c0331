"""The shared MATCH of a recall over most of the index files each row into its store's list
(``filing.file_rows``): rows of a store not searched are left out, a row whose chunk row is not
kept stops the filing there and is read, and every store's list is what its own MATCH ranks,
whether the rows were kept by an earlier search or not."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from coffer_memory import MemoryService
from coffer_memory._index.fts import search_chunks, search_chunks_many
from coffer_memory._index.keys import store_scope
from coffer_memory._index.snapshot import reading

WORDS = ["deploy", "port", "postgres", "kafka", "retry", "owner", "config", "secrets", "timeout", "docker"]
MINE = "project-01KB0000000000000000000000"
OTHER = "project-01KC0000000000000000000000"  # a store the searches leave out


@pytest.fixture
def three_stores(tmp_path: Path) -> MemoryService:
    svc = MemoryService(home=tmp_path / "home")
    r = random.Random(7)
    # The two stores searched hold most of the files (so one MATCH ranks them all); the third
    # holds the same words, so its rows come among theirs.
    for i in range(150):
        store = (MINE, "global", OTHER)[i % 3] if i % 5 else MINE
        words = " ".join(r.choice(WORDS) for _ in range(r.randint(2, 8)))
        svc.remember(f"note {i}: {words}", title=f"note {i}", store=store)
    return svc


@pytest.mark.parametrize("limit", [1, 3, 10, 40])
def test_each_store_searched_gets_its_own_rows_and_no_other_stores(
    three_stores: MemoryService, limit: int
) -> None:
    db = three_stores.index.db
    stores = [MINE, "global"]
    queries = [*WORDS, "deploy postgres", "retry timeout kafka", "owner config secrets docker port"]
    with reading(db) as kept:  # the second pass finds every row kept
        for _ in range(2):
            for query in queries:
                many = search_chunks_many(db, stores, query, limit * 4, docs=limit, kept=kept)
                assert set(many) == set(stores)
                for store in stores:
                    alone = search_chunks(db, store, query, limit * 4)
                    assert many[store] == alone[: len(many[store])], (query, store)
                    assert all(c.chunk_id.startswith(store_scope(store) + ":") for c in many[store])
    three_stores.close()
