"""Secrets said in prose: ``the password is X``, ``Password for the staging db: X``, ``use
password X``, ``set the admin password to X``, ``use X as the password``.

No key/value syntax says where the value is, so each rule judges the value by what the sentence
gives it: a verb (or a colon after a phrase naming the key) lets a value with a letter and a digit
through as a secret, and, for a password, a word that ends its clause and reads as no state, no
judgement and no noun (``is swordfish.``; not ``is required.``, not ``use password auth.``).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Final

from .secret_shapes import PASSWORD_SET_TO, PROSE_PHRASED, PROSE_SECRET, TOLD_BEFORE, VALUE_AS_PASSWORD
from .secret_values import (
    has_letter_and_digit,
    looks_random,
    redact_value,
    secret_kind_for_key,
    word_password,
    word_set,
)

# What may follow a bare word password in the same clause: ``is ocelot for now``, ``… and``.
_CLAUSE_GOES_ON: Final = re.compile(
    r"[ \t]*(?:\n|$)|[ \t]+(?:but|and|so|please|-|until|on|in|at"
    r"|for[ \t]+(?:now|today|the|this|that|our|my|your|a))(?:[ \t]|$)"
)
# Words that make a compound noun with a password before them (``use password auth``,
# ``with password protection``): after a verb before the key, such a word is not the value.
_PASSWORD_NOUNS: Final = word_set(
    "auth authn authentication login logon signin sign-in reset recovery manager hashing hash "
    "policy rotation protection sync prompt field storage store vault file expiry expiration flow "
    "grant mode strength complexity length validation entry change input form dialog hint history "
    "generator spraying cracking guessing sharing reuse access only instead again twice once here "
    "first too based less check update hygiene security safety encryption database table column "
    "fallback option setting box screen page"
)
_NOUN_SUFFIXES: Final = ("tion", "sion", "ment", "ness", "ity", "ship", "ware", "ing")


def _a_noun_after_password(word: str) -> bool:
    low = word.lower()
    plural = low.endswith("s") and not low.endswith("ss")
    return low in _PASSWORD_NOUNS or low.endswith(_NOUN_SUFFIXES) or plural


def _ends_clause(m: re.Match[str], bare: str, value: str) -> tuple[bool, bool]:
    """Whether the value ends its clause, and whether its closing quote (if any) is there."""
    after = m.string[m.end("val") :]
    if m["q"]:
        if not after.startswith(m["q"]):
            return False, False
        return True, True
    return (bare != value or after[:1] in (",", ";", ")") or _CLAUSE_GOES_ON.match(after) is not None), True


def _prose_secret(m: re.Match[str], c: Counter[str]) -> str:
    """``the password is X``: X is redacted if it looks generated, if it has a letter and a digit
    after a verb (``is hunter2``), or, for a password, if it is a word that ends the clause after
    a verb (``is swordfish.``, ``was 'marmalade'``) and reads as no state or judgement (``is
    required.``); after a verb before the key (``use password X``), a word that ends its clause
    and reads as no noun (``use password tangerine``; not ``use password auth``)."""
    key = m["key"].lower()
    kind = "password" if key == "pw" else secret_kind_for_key(key.replace(" ", "_").replace("-", "_"))
    value = m["val"]
    bare = value.rstrip(".!?:")
    if kind is None or not bare:
        return m.group()
    ends_clause, closed = _ends_clause(m, bare, value)
    if not closed:
        return m.group()
    verb = m["verb"] is not None
    told = kind == "password" and TOLD_BEFORE.search(m.string, max(0, m.start() - 80), m.start()) is not None
    made_up = looks_random(bare) or ((verb or told) and has_letter_and_digit(bare))
    # Only a password is a word people choose; tokens and keys are generated.
    quoted = bool(m["q"])
    chosen = (
        kind == "password"
        and ends_clause
        and word_password(bare, quoted=quoted)
        and (verb or (told and (quoted or not _a_noun_after_password(bare))))
    )
    if not (made_up or chosen):
        return m.group()
    prefix = m.string[m.start() : m.start("val")]
    out = redact_value(prefix, value, kind, c, after_colon=False)
    return m.group() if out is None else out


def _value_as_password(m: re.Match[str], c: Counter[str]) -> str:
    """``use X as the password``: X is redacted when the key ends its clause (not ``as the
    password hash``) and X has a letter and a digit, looks generated or is a word password."""
    after = m.string[m.end() :]
    if not (after[:1] in (".", ",", ";", ")", "!", "?") or _CLAUSE_GOES_ON.match(after)):
        return m.group()
    bare = m["val"].rstrip(".!?:")
    if not (has_letter_and_digit(bare) or looks_random(bare) or word_password(bare, quoted=bool(m["q"]))):
        return m.group()
    quote = m["q"] or ""
    prefix = m.string[m.start() : m.start("q")]
    out = redact_value(prefix, quote + m["val"] + quote, "password", c, after_colon=False)
    return m.group() if out is None else out + m.string[m.end("val") + len(quote) : m.end()]


def redact_prose(text: str, c: Counter[str]) -> str:
    """Every prose rule over ``text``, the most specific first (a value redacted by one reads as
    a marker, which the next ones leave alone)."""
    if not any(k in text.lower() for k in ("pass", "pw", "token", "secret", "key")):
        return text
    text = VALUE_AS_PASSWORD.sub(lambda m: _value_as_password(m, c), text)
    text = PASSWORD_SET_TO.sub(lambda m: _prose_secret(m, c), text)
    text = PROSE_PHRASED.sub(lambda m: _prose_secret(m, c), text)
    return PROSE_SECRET.sub(lambda m: _prose_secret(m, c), text)
