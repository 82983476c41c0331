"""A hit made by ``_recall_hits.new_hit`` is the hit ``MemoryHit(...)`` makes."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime
from pathlib import Path

import attrs
import pytest

from coffer_memory import MemoryHit
from coffer_memory._index.keys import HEADER_END
from coffer_memory._recall_hits import _FIELDS, FAST, make_hit, new_hit, rescored
from coffer_memory._recall_rows import DocRow


def test_a_hit_made_through_its_slots_equals_the_one_attrs_makes() -> None:
    assert FAST  # the fast way is the one in use with today's MemoryHit
    at = datetime(2026, 12, 3, 4, 5, 6, tzinfo=UTC)
    values = (
        "01JABCDEFGHJKMNPQRSTVWXYZ0",
        "the text",
        -1.25,
        "global:/h/f.md",
        at,
        "global",
        Path("/h/f.md"),
        "t",
    )
    made, called = new_hit(*values), MemoryHit(*values)
    assert type(made) is MemoryHit
    assert made == called and hash(made) == hash(called) and repr(made) == repr(called)
    assert attrs.asdict(made) == attrs.asdict(called)
    assert pickle.loads(pickle.dumps(made)) == called
    assert tuple(getattr(made, name) for name in _FIELDS) == values
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.score = 0.0  # type: ignore[misc]


def test_the_fast_way_is_taken_only_for_the_fields_it_sets() -> None:
    """A field added to MemoryHit (or a validator) would be left unset: the module checks them."""
    assert tuple(f.name for f in attrs.fields(MemoryHit)) == _FIELDS


def test_make_hit_makes_the_hit_the_class_makes() -> None:
    """``make_hit`` sets the slots itself (``new_hit`` written out): every field in its place."""
    at = datetime(2026, 12, 3, 4, 5, 6, tzinfo=UTC)
    doc = DocRow("01JABCDEFGHJKMNPQRSTVWXYZ1", "/h/facts/f.md", "the title", "a description", at)
    made = make_hit("global", doc, f"header{HEADER_END}the text", -0.5)
    called = MemoryHit(
        doc.id, "the text", -0.5, "global:/h/facts/f.md", at, "global", Path("/h/facts/f.md"), "the title"
    )
    assert type(made) is MemoryHit
    assert made == called and hash(made) == hash(called) and repr(made) == repr(called)
    assert type(made.path) is type(called.path)


def test_a_rescored_hit_is_a_memory_hit_that_cannot_be_changed() -> None:
    """A hit is built as a private subclass that takes plain stores and then made a ``MemoryHit``:
    nothing of the subclass is left (its type, its frozen fields, its pickle)."""
    at = datetime(2026, 12, 3, 4, 5, 6, tzinfo=UTC)
    doc = DocRow("01JABCDEFGHJKMNPQRSTVWXYZ2", "/h/facts/g.md", "a title", "", at)
    made = rescored(make_hit("global", doc, "plain text", -0.5), 2.5)
    assert type(made) is MemoryHit and made.score == 2.5 and made.text == "plain text"
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.text = "changed"  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        del made.title
    assert type(pickle.loads(pickle.dumps(made))) is MemoryHit
    assert made == attrs.evolve(made)
