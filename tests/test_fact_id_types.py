"""A fact id that is not a string is a caller's mistake (INVALID_INPUT naming ``fact_id``), not
a fact that is missing: a notebook's ``svc.get_fact(None)`` said ``MEMORY_NOT_FOUND 'None'``."""

from __future__ import annotations

import pytest

from coffer_memory import InvalidInput, MemoryNotFound, MemoryService


@pytest.mark.parametrize("bad", [None, 12, b"01ARZ3NDEKTSV4RRFFQ69G5FAV", ["01ARZ3NDEKTSV4RRFFQ69G5FAV"]])
def test_a_fact_id_that_is_no_string_is_invalid_input(svc: MemoryService, bad: object) -> None:
    kept = svc.remember("the release checklist lives in docs/release.md")
    for call in (
        lambda: svc.get_fact(bad),  # type: ignore[arg-type]
        lambda: svc.edit_fact(bad, body="changed"),  # type: ignore[arg-type]
        lambda: svc.delete_fact(bad),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidInput) as raised:
            call()
        assert raised.value.code == "INVALID_INPUT" and raised.value.field == "fact_id"
    # Nothing was changed, and a string id that names no fact is still MEMORY_NOT_FOUND.
    assert svc.get_fact(kept.fact.id).fact.body.startswith("the release checklist")
    with pytest.raises(MemoryNotFound):
        svc.get_fact("01ARZ3NDEKTSV4RRFFQ69G5FAV")
