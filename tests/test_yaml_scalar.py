"""``yaml_scalar`` writes plain strings without PyYAML's emitter, and says exactly what it says."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
import yaml

from coffer_memory._models import MemoryFact
from coffer_memory._store import fastmeta
from coffer_memory._store.files import render_fact, yaml_scalar

TRICKY = [
    "",
    " ",
    "a ",
    " a",
    "-",
    "- a",
    "-a",
    "--",
    "---",
    "--- a",
    "...",
    ".. a",
    "?",
    "? a",
    "?a",
    ":",
    ": a",
    ":a",
    "a:",
    "a: b",
    "a:b",
    "a #b",
    "a#b",
    "#a",
    "yes",
    "No",
    "on",
    "OFF",
    "y",
    "null",
    "Null",
    "~",
    "true",
    "1",
    "1.5",
    "-1",
    "0x1F",
    "0o17",
    "1e3",
    ".inf",
    ".NaN",
    "1_000",
    "2026-12-02",
    "2026-12-02T10:11:12Z",
    "12:30",
    "=",
    "<<",
    "a,b",
    "[a]",
    "{a}",
    "&a",
    "*a",
    "!a",
    "|a",
    ">a",
    "'a'",
    '"a"',
    "%a",
    "@a",
    "`a`",
    "a\tb",
    "a\nb",
    "a\x85b",
    "a\u2028b",
    "\ufeffa",
    "a\u00a0b",
    "Ünïcödé",
    "日本語のメモ",
    "We deploy with `make ship`.",
    "a\x7fb",
    "café",
    "e\u0301",
    "a  b",
    "a -b",
    "a ?b",
    "a'b",
    'a"b',
    "a\\b",
    "ab " * 3,
]
ALPHABET = "aZ0 9:#-?,.[]{}'\"!|>%@`&*~\t\né\u00a0\x85\u2028=<_/+"


def reference(value: object) -> str:
    text = yaml.safe_dump(value, allow_unicode=True, default_flow_style=True, width=10**9)
    return text.removesuffix("\n").removesuffix("\n...").strip("\n ")


def samples() -> list[object]:
    rng = random.Random(14)
    found: list[object] = [None, *TRICKY]
    for _ in range(20_000):
        found.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 7))))
    for _ in range(2_000):
        found.append([rng.choice(TRICKY[1:]) for _ in range(rng.randint(0, 3))])
    return found


def test_yaml_scalar_writes_what_pyyaml_writes() -> None:
    for value in samples():
        assert yaml_scalar(value) == reference(value), repr(value)


def test_a_plain_title_and_description_need_no_emitter(monkeypatch: pytest.MonkeyPatch) -> None:
    # Rendering a fact spent most of its time in PyYAML's emitter for text it writes as it is.
    def refuse(*args: object, **kwargs: object) -> str:
        raise AssertionError("PyYAML's emitter was asked")

    monkeypatch.setattr(yaml, "safe_dump", refuse)
    now = datetime(2026, 12, 2, tzinfo=UTC)
    fact = MemoryFact(
        id="01KBD000000000000000000000",
        title="Deploy on Fridays",
        description="We deploy with `make ship`, after the tests pass.",
        body="We deploy with `make ship`.",
        actor="user",
        origin_session_id=None,
        created_at=now,
        updated_at=now,
        tags=("ops", "deploy"),
    )
    data = render_fact(fact)
    assert b"title: Deploy on Fridays\n" in data and b"tags: [ops, deploy]\n" in data
    assert fastmeta.split_rendered(data.decode()) is not None  # still the shape the fast reader reads
