"""What a key names and whether a value is a secret: the judgements the scrubber's keyed rules share.

``secret_kind_for_key`` reads a key's words (``DB_PASSWORD`` holds a password, ``token_count``
holds none); ``is_not_a_secret`` tells a credential from a reference, a placeholder, a type or
prose (``os.environ["X"]``, ``<your-key>``, ``str``, ``see above``); the shape tests
(``looks_random``, ``looks_like_name``, ``entropy``) are what both lean on.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Final

from .scrub_markers import MARKER_START, redacted
from .secret_shapes import AWS_DOC_EXAMPLE, SOPS_VALUE


def word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_KEY_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_SECRET_KEY_PREFIXES: Final = frozenset(
    {
        "access",
        "account",
        "admin",
        "app",
        "auth",
        "client",
        "encryption",
        "license",
        "master",
        "service",
        "session",
        "shared",
        "signing",
        "subscription",
        "webhook",
        "sas",
        "secret",
    }
)
# Last words saying that a key naming a secret holds its value (``SECRET_KEY_BASE``,
# ``password_b64``, ``token2``); any other last word (``secret_name``, ``token_count``,
# ``SECRET_KEY_PREFIXES``) describes the secret instead.
_HOLDER_WORDS: Final = word_set(
    "value val values base data str string b64 base64 hex raw plain plaintext bytes bin enc "
    "encrypted literal content contents"
)
_TYPE_WORDS: Final = word_set(
    "str string bytes int integer bool boolean any none null optional secretstr secretbytes "
    "number object unknown true false nil undefined char text list dict array map"
)
_PLACEHOLDER_WORDS: Final = word_set(
    "redacted removed hidden masked secret secrets password passwords token tokens apikey "
    "api_key changeme placeholder example todo tbd n/a na pass passwd pwd pw user username "
    "foo bar baz"
)
_PROSE_WORDS: Final = word_set(
    "the a an is are was were be see use set not no yes it its this that these those your my our "
    "their from in on at to for of with and or missing here below above same unchanged empty "
    "only also still now always never should must will can could would may might needs goes lives "
    "stays comes stored kept"
)
# Templates and placeholders: ``${…}``, ``$(…)``, ``{…}``, ``<…>``, ``[…]``, ``…``.
_TEMPLATE = re.compile(r"\$\{.*|\$\(.*|\{.*|<.*|\[.*\]|….*|\.\.\..*")
# A variable reference: ``$NAME``, ``%NAME%``, a YAML tag ``!name``.
_VARIABLE = re.compile(r"\$(?P<name>[A-Za-z_]\w*)|%(?P<win>[A-Za-z_]\w*)%|!(?P<tag>[a-z_]+)")
_FIRST_WORD_END = re.compile(r"[\[\]|, ]")
_CODE_REFERENCE = re.compile(r"[A-Za-z_][\w]*(?:(?:\.|::)[A-Za-z_]\w*)*(?P<call>[ \t]*[(\[].*)?")
_NAME_SEPARATOR = re.compile(r"\.|::")  # ``settings.token``, Rust's ``std::env::var``
# Words of code that start an expression: ``const token = await getToken()``, ``let key = new Key()``.
_EXPRESSION_WORDS: Final = word_set(
    "await new yield typeof async function lambda require import return self this super not"
)
_CODE_ROOTS: Final = word_set(
    "os process env environ self this config cfg conf settings args opts options secrets vars "
    "ctx context params props request req app st input inputs credentials creds"
)


def _key_words(key: str) -> list[str]:
    return [w.lower() for w in _KEY_WORDS.findall(key)]


def secret_kind_for_key(key: str) -> str | None:
    """The kind of secret a key holds (``password``, ``token``, ...), or None if it holds none."""
    words = _key_words(key)
    if not words:
        return None
    last = words[-1]
    prev = words[-2] if len(words) > 1 else ""
    if last == "key" and prev == "access" and "secret" in words[:-2]:
        return "aws_secret_access_key"
    if last.endswith(("password", "passwd", "passphrase")) or (last in ("pass", "pwd", "pw") and prev):
        return "password"
    if last.endswith("token"):
        return "token"
    if last.endswith("secret"):
        return "secret"
    if last == "apikey" or (last == "key" and prev == "api"):
        return "api_key"
    if last == "privatekey" or (last == "key" and prev == "private"):
        return "private_key"
    if last in ("accesskey", "secretkey", "authkey", "signingkey") or (
        last == "key" and prev in _SECRET_KEY_PREFIXES
    ):
        return "secret"
    if last in ("credential", "credentials", "creds"):
        return "credential"
    if last in _HOLDER_WORDS or last.isdigit():
        for word, kind in (("secret", "secret"), ("password", "password"), ("token", "token")):
            if word in words:
                return kind
    return None


_PATH_VALUE = re.compile(r"[\"'`]?(?:[/~.$%]|[A-Za-z]:\\|[^\s]*/)")


def key_kind(key: str, value: str) -> str | None:
    """The kind of secret ``key`` holds; a bare ``pwd``/``pass``/``pw`` holds a password (ODBC's
    ``PWD=…;``, JSON's ``"pass"``, ``pw=``) unless its value is a path (``PWD=/home/x`` is the
    shell's folder)."""
    kind = secret_kind_for_key(key)
    if kind is None and key.lower() in ("pwd", "pass", "pw") and not _PATH_VALUE.match(value):
        return "password"
    return kind


def has_letter_and_digit(s: str) -> bool:
    return any(c.isdigit() for c in s) and any(c.isalpha() for c in s)


def mixed_case_and_digits(s: str) -> bool:
    return any(c.isupper() for c in s) and any(c.islower() for c in s) and any(c.isdigit() for c in s)


WORDISH = re.compile(r"[A-Z]?[a-z]{4,}")
# A lowercase folder name; a leading or trailing slash alone proves nothing (one AWS secret in
# 32 starts or ends with one).
PATH_WORD = re.compile(r"(?:^|/)[a-z]{4,}(?:/|$)")


def looks_random(s: str) -> bool:
    """A generated token rather than a name from code, even where code would be (``aB3…(``):
    mixed case and digits over 12+ characters, letters and digits over 20+, or mixed case over
    16+ that is not made of words (``getUserAccessToken`` is)."""
    if (len(s) >= 12 and mixed_case_and_digits(s)) or (len(s) >= 20 and has_letter_and_digit(s)):
        return True
    mixed = any(c.isupper() for c in s) and any(c.islower() for c in s)
    return len(s) >= 16 and mixed and sum(len(w) for w in WORDISH.findall(s)) < len(s) / 2


_DIGIT_RUN = re.compile(r"\d+")


def looks_like_name(s: str) -> bool:
    """A name from code (``get_password``, ``vault``, ``os``, ``accessToken``), not a value that
    merely has an identifier's characters (``J422AUUL6M07``, ``uCukUpycMbCB``)."""
    if looks_random(s) or len(_DIGIT_RUN.findall(s)) >= 2:
        return False  # names seldom mix digits in (``q4f4xnwrbf59``); ``sha256``, ``token2`` do not
    if "_" in s or (s.isalpha() and s.islower() and len(s) <= 4):
        return True
    return sum(len(w) for w in WORDISH.findall(s)) >= len(s) / 2


def entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def is_not_a_secret(value: str, *, quoted: bool, after_colon: bool, call: bool = False) -> bool:
    """True for assignment values that are references, placeholders or prose, not credentials.

    ``call``: the value is directly followed by ``(`` or ``[`` in the text (``f(x)``, ``a[0]``).
    """
    v = value.strip()
    if len(v) < 3 or not any(c.isalnum() for c in v) or (v.isdigit() and len(v) <= 3):
        return True  # too short to be a credential, or a count (``{"token": 3}``)
    if MARKER_START.match(v) or _TEMPLATE.fullmatch(v) or AWS_DOC_EXAMPLE.fullmatch(v):
        return True  # ours, ``${VAR}``, ``${{ secrets.X }}``, ``{{ x }}``, ``<token>``, ``[PAD]``, AWS's docs
    if v.startswith("ENC[") and SOPS_VALUE.fullmatch(v.rstrip("]") + "]"):  # its ``]`` may be cut as trailing
        return True  # SOPS ciphertext: committed on purpose, no secret without its key
    variable = _VARIABLE.fullmatch(v)
    if variable is not None and not looks_random(variable["name"] or variable["win"] or variable["tag"]):
        return True  # ``$DB_PASSWORD``, ``%API_KEY%``, ``!vault`` (but ``$aB3dE5fG7hJ9k`` is a value)
    low = v.lower()
    if low in _TYPE_WORDS or low in _PLACEHOLDER_WORDS or set(low) <= set("x*.-_ "):
        return True
    first = _FIRST_WORD_END.split(low, maxsplit=1)[0]
    if first in _TYPE_WORDS and not quoted:
        return True  # ``password: Optional[str]``, ``token: str | None``
    if quoted:
        return False
    if low in _EXPRESSION_WORDS or (v[0] == "*" and looks_like_name(v[1:])):
        return True  # ``token = await getToken()``; a YAML alias ``password: *db_password``
    ref = _CODE_REFERENCE.fullmatch(v)
    name = v.split("(", 1)[0].split("[", 1)[0]
    if ref is not None and all(looks_like_name(part) for part in _NAME_SEPARATOR.split(name)):
        if ref["call"] or call:
            return True  # ``os.environ["X"]``, ``getenv("X")``, ``read_secret()``
        if "." in v and (v.split(".", 1)[0].lower() in _CODE_ROOTS or v.count(".") > 1):
            return True  # ``settings.DB_PASSWORD``, ``process.env.TOKEN``
        # ``password=db_password``, ``token=GITHUB_TOKEN``: a variable named after a secret. A
        # digit or a lone capitalised word (``MyPassword1``, ``SuperSecret``) reads as a value.
        if "_" in v and not any(ch.isdigit() for ch in v) and secret_kind_for_key(v) is not None:
            return True
    if not after_colon:
        return False
    # ``Token: see above``: after a colon, prose is likelier than a password.
    return low in _PROSE_WORDS or (" " in low and low.split(" ", 1)[0] in _PROSE_WORDS)


# Words that end ``the password is …`` without being one: states, judgements, places.
_PREDICATE_WORDS: Final = word_set(
    "required wrong incorrect invalid correct right strong weak long short empty blank unset "
    "same different new old good bad fine okay secure insecure safe unsafe optional mandatory "
    "needed necessary known unknown public private hidden visible there gone none null nil "
    "too mine yours ours theirs what which whatever valid expired compromised leaked rotated "
    "reset changed hashed encrypted stored generated random temporary permanent default simple "
    "complex easy hard obvious trivial unique shared common weird broken fixed disabled enabled "
    "active inactive working ignored irrelevant unused useless plaintext cleartext lost "
    "elsewhere somewhere unchanged different fine great terrible awful correct nothing something "
    "ready done enough sensitive case-sensitive sent attached above below later stale fresh "
    "lowercase uppercase numeric unicode ascii truthy falsy nullptr expire rotate match plain"
)
_PREDICATE_SUFFIXES: Final = (
    "ed", "ing", "ly", "ble", "ive", "ous", "ful", "less", "ent", "ant", "ic", "al", "ary", "ory",
)  # fmt: skip
_WORD_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9!@#$%^&*_+=~-]{3,63}")


def word_password(value: str, *, quoted: bool = False) -> bool:
    """A word that ends ``the password is …`` reads as the password (``swordfish``,
    ``Marmalade``), unless it reads as a state or a judgement (``required``, ``expired``,
    ``case-sensitive``) or names a variable or a placeholder. A ``quoted`` word is set apart as a
    value, so an adjective's ending (``'cormorant'``) does not make it one; the listed words
    still do (``'required'``)."""
    low = value.lower()
    if _WORD_PASSWORD.fullmatch(value) is None or low in _PREDICATE_WORDS or low in _PROSE_WORDS:
        return False
    if low in _PLACEHOLDER_WORDS or low in _TYPE_WORDS or secret_kind_for_key(value) is not None:
        return False
    return has_letter_and_digit(value) or quoted or not low.endswith(_PREDICATE_SUFFIXES)


_TRAILING_PUNCT_CHARS = ")]}>.,:;" + " \t\n\r\f\v"


def redact_value(
    prefix: str, value: str, kind: str, counts: Counter[str], *, after_colon: bool, call: bool = False
) -> str | None:
    """``prefix`` + the redacted ``value`` (its quotes and trailing punctuation kept), or None."""
    quoted = len(value) >= 2 and value[0] in "\"'`" and value[-1] == value[0]
    if quoted:
        inner, lead, trail = value[1:-1], value[0], value[-1]
    else:
        lead = value[0] if value[0] in "\"'`" else ""
        body = value[len(lead) :]
        # str.rstrip, not a ``[...]+$`` search: that regex is quadratic on long runs of those chars.
        inner = body.rstrip(_TRAILING_PUNCT_CHARS)
        trail = body[len(inner) :]
    if is_not_a_secret(inner, quoted=quoted, after_colon=after_colon, call=call and not trail):
        return None
    counts[kind] += 1
    return prefix + lead + redacted(kind) + trail
