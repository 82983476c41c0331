"""Passwords said with the verb before the key, or with ``is:``, which the scrubber let through.

``use password hunter2x!`` and ``the password is: swordfish9`` reached the disk (and a distilling
model) as typed: the prose rule wanted the verb after the key (``the password is X``) and no colon
after ``is``. The new rule (tuned on ``bench/_scrub_labelled.py``) takes a verb before the key
(use, try, enter, type, with) for a value with a letter and a digit, or a quoted word.

Session 16 (attack8): ``Password for the staging db: hunter2`` (a phrase naming the key, then a
colon) and ``use password tangerine`` (a bare word after a verb before the key) were still kept
whole, and so were their siblings: ``the password to the vpn is X``, ``set the root password to
X``, ``use X as the password``, ``the password is actually X``. Tuned on
``bench/_scrub_labelled.py``'s ``said_in_prose`` (these test phrases are not in it); the nouns and
states next to them stay as typed.
"""

from __future__ import annotations

import pytest

from coffer_memory import MemoryService
from coffer_memory._transcripts.scrub import redact_secrets, scrub_text

CAUGHT = [
    ("use password hunter2x!", "hunter2x"),
    ("the password is: swordfish9", "swordfish9"),
    ("the password is: swordfish.", "swordfish"),
    ("just use the root password Xk29bq7 for now", "Xk29bq7"),
    ("type password 'gannet' at the prompt", "gannet"),
    ("log in with password pelican42", "pelican42"),
    ("Password for the staging db: hunter2", "hunter2"),
    ("use password tangerine", "tangerine"),
    ("password for the jenkins user on ci2: blackbird", "blackbird"),
    ("the password to the wiki admin is Sparrow88", "Sparrow88"),
    ("you can use password mongoose for now", "mongoose"),
    ("We reset the deploy password to flamingo.", "flamingo"),
    ("just use hornbill as the password", "hornbill"),
    ("the vpn password is actually capybara", "capybara"),
    ("the password we picked is 'moonrise'", "moonrise"),
]
KEPT = [
    "use password authentication instead of keys",
    "the password is: required",
    "with password login disabled, use keys",
    "use password 'required' nowhere",
    "enter password twice to confirm",
    "Password for the staging db: see the vault",
    "use password authentication",
    "use password login for the dashboard",
    "we use password managers for the team",
    "set the password to never expire",
    "use sha256 as the password hash",
    "the password to the vpn is on the wiki",
    "the password is plain in the logs",
    "password for the admin: rotated weekly",
]


@pytest.mark.parametrize(("text", "secret"), CAUGHT)
def test_a_password_told_before_or_after_a_colon_is_redacted(text: str, secret: str) -> None:
    out = redact_secrets(text)
    assert secret not in out and "[REDACTED:password]" in out, out
    assert scrub_text(text)[0] == out


@pytest.mark.parametrize("text", KEPT)
def test_a_noun_after_password_is_kept(text: str) -> None:
    assert redact_secrets(text) == text


def test_remember_stores_neither_phrasing(svc: MemoryService) -> None:
    fact = svc.remember("deploy: use password hunter2x! and the password is: swordfish9", scope="global")
    text = fact.path.read_text(encoding="utf-8")
    assert "hunter2x" not in text and "swordfish9" not in text


def test_remember_stores_neither_known_miss(svc: MemoryService) -> None:
    fact = svc.remember("Password for the staging db: hunter2, else use password tangerine", scope="global")
    text = fact.path.read_text(encoding="utf-8")
    assert "hunter2" not in text and "tangerine" not in text
    assert "[REDACTED:password], else use password [REDACTED:password]" in text
