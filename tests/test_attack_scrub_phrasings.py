"""Passwords said with the verb before the key, or with ``is:``, which the scrubber let through.

``use password hunter2x!`` and ``the password is: swordfish9`` reached the disk (and a distilling
model) as typed: the prose rule wanted the verb after the key (``the password is X``) and no colon
after ``is``. The new rule (tuned on ``bench/_scrub_labelled.py``) takes a verb before the key
(use, try, enter, type, with) for a value with a letter and a digit, or a quoted word.
"""

from __future__ import annotations

import pytest

from coffer_memory import MemoryService
from coffer_memory._transcripts.scrub import redact_secrets

CAUGHT = [
    ("use password hunter2x!", "hunter2x"),
    ("the password is: swordfish9", "swordfish9"),
    ("the password is: swordfish.", "swordfish"),
    ("just use the root password Xk29bq7 for now", "Xk29bq7"),
    ("type password 'gannet' at the prompt", "gannet"),
    ("log in with password pelican42", "pelican42"),
]
KEPT = [
    "use password authentication instead of keys",
    "the password is: required",
    "with password login disabled, use keys",
    "use password 'required' nowhere",
    "enter password twice to confirm",
]


@pytest.mark.parametrize(("text", "secret"), CAUGHT)
def test_a_password_told_before_or_after_a_colon_is_redacted(text: str, secret: str) -> None:
    out = redact_secrets(text)
    assert secret not in out and "[REDACTED:password]" in out, out


@pytest.mark.parametrize("text", KEPT)
def test_a_noun_after_password_is_kept(text: str) -> None:
    assert redact_secrets(text) == text


def test_remember_stores_neither_phrasing(svc: MemoryService) -> None:
    fact = svc.remember("deploy: use password hunter2x! and the password is: swordfish9", scope="global")
    text = fact.path.read_text(encoding="utf-8")
    assert "hunter2x" not in text and "swordfish9" not in text
