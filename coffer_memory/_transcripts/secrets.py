"""Secret redaction for the scrubber: shaped tokens, headers, key/value assignments, bare blobs.

``redact_secrets`` replaces each value with ``[REDACTED:<kind>]`` and counts it; see
``coffer_memory._transcripts.scrub`` for the full list of rules and what is left alone.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections import Counter
from collections.abc import Callable
from typing import Final

from .scrub_markers import ENCODED_MARKER, MARKER_START, redacted
from .secret_commands import names_a_secret
from .secret_named import redact_named
from .secret_shapes import (
    AWS_DOC_EXAMPLE,
    SOPS_VALUE,
    URL,
    URL_PATH_ASSIGNMENT,
    URL_PATH_START,
    URL_QUERY_VALUE,
    URL_SEGMENT,
    URL_SIGNATURE,
    URL_SLASHED_KEY,
    looks_like_url_token,
    public_encoding,
    random_key_bytes,
    vendor_kind,
    vendor_tokens,
)
from .secret_values import (
    PATH_WORD,
    WORDISH,
    entropy,
    has_letter_and_digit,
    is_not_a_secret,
    key_kind,
    looks_random,
    mixed_case_and_digits,
    secret_kind_for_key,
    word_set,
)
from .secret_values import (
    redact_value as _redact_value,
)

# --------------------------------------------------------------------------------------------
# 2. Secrets
# --------------------------------------------------------------------------------------------

# The header's words may be broken over lines (a wrapped paste: ``BEGIN RSA PRIVATE\nKEY``).
_PEM_LABEL = r"(?:[A-Z0-9]{1,12}\s{1,4}){0,3}PRIVATE\s{1,4}KEY(?:\s{1,4}BLOCK)?-{5}"
_PEM = re.compile(
    r"-{5}BEGIN\s{1,4}" + _PEM_LABEL + r".*?(?:-{5}END\s{1,4}" + _PEM_LABEL + r"|\Z)", re.DOTALL
)
# The tail of a key whose BEGIN line is in another message or segment: the base64 lines
# (maybe quoted, ``> ``, or in string quotes) just before its END line (see _redact_pem_tails).
_PEM_END = re.compile(r"^[ \t>\"'#]*-{5}END\s{1,4}" + _PEM_LABEL, re.MULTILINE)
_PEM_BODY_LINE = re.compile(r"[ \t>\"'#]*[A-Za-z0-9+/=]{16,}(?:\\n)?[\"',+]*[ \t]*\r?")

# ``scheme://user:password@`` (also JSON-escaped, ``https:\/\/``); ``scheme://token@``.
_URL_CREDENTIALS = re.compile(
    r"(?<![A-Za-z0-9+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,20}:(?://|\\/\\/))"
    r"(?P<user>[^\s/\\@:\[\]\"'<>`()]*):(?P<pw>[^\s/\\\[\]\"'<>`]{1,256}"
    # A password may hold a raw ``/`` (``user:ab/cd@host``), but then no ``@`` (it would run on
    # over the path to a later one), and ``host:8080/path@v1`` is a port and a path.
    r"|(?!\d{1,5}/)[^\s\\\[\]\"'<>`@]{1,256})@(?=[^\s/@]*[A-Za-z0-9])"
)
_URL_USER_TOKEN = re.compile(
    r"(?<![A-Za-z0-9+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,20}:(?://|\\/\\/))(?P<user>[A-Za-z0-9_~%.-]{20,256})@(?=[A-Za-z0-9\[])"
)

_JWT = re.compile(
    r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*(?![A-Za-z0-9_-])"
)

_AUTH_HEADER = re.compile(
    r"(?<![\w-])(?P<pre>(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?:(?P<scheme>bearer|basic|token|digest|bot|apikey|sso-key)[ \t]+)?)"
    r"(?P<val>[A-Za-z0-9._~+/=-]+)",  # token68 (RFC 7235) and base64: a ``)`` or a quote ends it
    re.IGNORECASE,
)
_BARE_BEARER = re.compile(r"(?<![\w-])(?P<pre>Bearer[ \t]+)(?P<val>[A-Za-z0-9._~+/-]{16,}=*)")
_NETRC = re.compile(
    r"(?P<pre>\bmachine[ \t]+\S+[ \t]+login[ \t]+\S+[ \t]+password[ \t]+)(?P<val>[^\s\"'`()<>,;]+)"
)
# ``curl -u user:X`` (``--user=``), HTTPie's ``http -a user:X`` (``--auth``); a quoted pair may
# hold blanks (``-u "me:two words"``); ``-u http://app`` (``az login``) is a user, no pair.
_CURL_USER = re.compile(
    r"(?=[-hx])(?P<pre>(?:(?<!\S)(?:-u|--user)|(?<![\w/.:-])(?:https?|xhs?)[ \t](?:[^\n|;&]{0,200}?[ \t])?(?:-a|--auth))"
    r"(?:[ \t]+|=)(?P<q>[\"'])?[^\s:\"'@]+:)(?!//)"
    r"(?P<val>(?(q)[^\"'\n]{1,256}(?=(?P=q))|[^\s\"'`()<>,;]+))"
)

# Assignment values: a quoted string, or an unquoted run up to a blank, a quote, `,` `;` `&` or a
# parenthesis (``f(password=x)(token=y)``); an unquoted run may open an unclosed quote.
# Matched in a lookahead, so that a key that holds no secret does not swallow its value, which
# may hold one (``https://host/?token=...`` is a ``https:`` "assignment" first); see _sub_keyed.
# Bounded (a value longer than 1024 characters keeps its tail, unless it is an encoded blob),
# since a lookahead is re-run from every key in a long run of ``a=b=c=...``.
_VALUE = r"""(?=(?P<val>"(?:[^"\\\n]|\\.){0,1024}"|'(?:[^'\\\n]|\\.){0,1024}'|`[^`\n]{0,1024}`|["'`]?[^\s"'`,;&()]{1,1024}))"""
# A key naming a secret has one of these in it (see secret_kind_for_key): checking it first
# keeps the value lookahead from running after every ``word:`` of the text.
# (The class test before the words rejects most characters at the cost of one test, not six.)
_KEY = r"(?P<key>(?=[A-Za-z0-9_.-]{0,80}?(?=[PpTtSsKkCc])(?i:pass|pw|token|secret|key|cred))[A-Za-z_][A-Za-z0-9_.-]{0,80})"
_KEY_START = r"(?<![A-Za-z0-9_$./])"  # not inside a word, a dotted name or a path

# A key naming a secret and its separator, glued inside another value (see _value_of).
_EMBEDDED_KEY = re.compile(_KEY_START + _KEY + r"[\"'`]?[ \t]*(?::=|=>|=|:)")

# YAML block scalar: ``password: |`` followed by the more-indented lines that hold the value.
_YAML_BLOCK = re.compile(
    r"^(?P<pre>(?P<indent>[ \t]*)(?:-[ \t]+)?" + _KEY + r"[\"']?[ \t]*:[ \t]*[|>][+-]?\d?[ \t]*\n)"
    r"(?P<val>(?:(?P=indent)[ \t]+\S[^\n]*(?:\n|$)|[ \t]*\n(?=(?P=indent)[ \t]+\S))+)",
    re.MULTILINE,
)
# Python/TypeScript annotated assignment: ``api_key: str = "..."``.
_ANNOTATED = re.compile(
    _KEY_START + r"(?P<pre>" + _KEY + r"[ \t]*:[ \t]*[A-Za-z_][\w\[\]., |]{0,60}?[ \t]*=(?!=)[ \t]*)" + _VALUE
)
# YAML ``key: value`` at the start of a line: an unquoted value runs to the end of the line
# (or a `` #`` comment), since YAML scalars may hold blanks.
_YAML_LINE = re.compile(
    r"^(?P<pre>[ \t]*(?:-[ \t]+)?" + _KEY + r"[\"']?[ \t]*:[ \t]+)"
    r"(?=(?P<val>[^\s\"'`#|>{\[&*!](?:[^\n#]|(?<![ \t])#){0,1024}))",
    re.MULTILINE,
)
# A ``.env`` line, ``KEY=value`` or ``export KEY=value``: its unquoted value is the whole word up
# to a blank, since generated values there hold the marks that end a value elsewhere (a Django
# ``SECRET_KEY`` full of ``( ) & ; ^``: all but its first piece was kept). A ``&`` or ``;``
# before ``name=`` still ends it: ``access_token=X&scope=repo`` is a query string.
# When blanks and more words follow to the end of the line (or a `` #`` comment), they are the
# value too (``DB_PASSWORD=correct horse battery staple``), unless they read as a command the
# variable is set for: a word among them holds what a phrase does not (a flag ``-x``, a path or
# ``/``, ``name=``, ``|``, ``&``, ``;``, ``<``, ``>``, ``$``, a dotted or colon-joined name such
# as ``app.py`` or ``host:8080``: ``PW=x mytool --run``, ``PW=x psql -h db``), or the word after
# the first one starts a command (``TOKEN=x npm start``, ``TOKEN=x coffer-api``), or the first
# one is a reference (``PW=$PW make``). A key naming a passphrase (``GPG_PASSPHRASE``) holds
# words by definition, so a program's name as its second word is one of them
# (``PASSPHRASE=correct git battery staple``).
_COMMAND_PUNCT = r"[A-Za-z_][\w.-]{0,60}=|[-./~$&|;<>(]"
_PROGRAMS = (
    r"(?:npm|npx|yarn|pnpm|node|python3?|uv|uvx|poetry|pip|make"
    r"|docker|go|cargo|bundle|bundler|rails|rake|ruby|java|mvn|gradle|bash|sh|zsh|pytest|deno|bun|php"
    r"|composer|dotnet|terraform|kubectl|helm|exec|env|sudo|time|nohup|git|coffer|flask|uvicorn|gunicorn"
    r"|hypercorn|daphne|celery|streamlit|jest|vitest|mocha|nodemon|tsx|vite|next|rspec|mix|iex|elixir"
    r"|swift|hugo|tox|nox|hatch|pdm)(?![\w-])"
    r"|[a-z][a-z0-9]*-[a-z0-9-]+(?:[ \t]|$)"  # a kebab-case program: ``coffer-api``, ``docker-compose``
)
# A word of a phrase: none of the marks of a command's arguments (see above).
_PHRASE_WORD = r"(?![-#])(?:[^\s/=|&;<>$`\\.:]|[.:](?![A-Za-z0-9_]))+"
_ENV_LINE = re.compile(
    r"^(?P<pre>[ \t]*(?:export[ \t]+)?(?:(?=[A-Za-z0-9_.-]{0,80}?(?i:phrase)=)(?P<phrase>))?" + _KEY + r"=)"
    r"(?=(?P<val>(?:(?P<plain>[^\s\"'`#$%{<\[])|[$%{<\[])(?:[^\s&;]|[&;](?![A-Za-z_][\w.-]{0,60}=)){0,1023}"
    r"(?(plain)(?:(?=[ \t]+(?!#|"
    + _COMMAND_PUNCT
    + r")(?(phrase)|(?!"
    + _PROGRAMS
    + r")))(?:[ \t]+"
    + _PHRASE_WORD
    + r"){1,40}(?=[ \t]+#[^\n]*$|[ \t]*$))?)))",
    re.MULTILINE,
)
# The key may close a quote, a backtick or Markdown emphasis (``**Password:** hunter2``).
_ASSIGNMENT = re.compile(
    _KEY_START
    + r"(?P<pre>"
    + _KEY
    + r"(?P<kq>[\"'`]|\*\*|__)?(?P<sep>[ \t]*(?::=|=>|=|:(?:\*\*|__)?)[ \t]*))"
    + _VALUE
)
_CLI_FLAG = re.compile(r"(?<![\w-])(?P<pre>--(?P<key>[A-Za-z][A-Za-z0-9_-]{0,60})[ \t]+)" + _VALUE)

# A full stop may end the sentence after it, not start a file extension (``….txt``).
# Password hashes (crypt(3), htpasswd, /etc/shadow, Django): crackable offline, so as good as
# the password to whoever holds a list of them. Each form by its own prefix.
_PASSWORD_HASH = re.compile(
    r"(?=[$p])(?<![\w$])(?:\$(?:2[abxy]?\$\d{2}\$[./A-Za-z0-9]{53}"
    r"|(?:1|5|6|apr1)\$(?:rounds=\d{1,9}\$)?[./A-Za-z0-9]{1,16}\$[./A-Za-z0-9]{22,86}"
    r"|y\$[./A-Za-z0-9]{1,32}\$[./A-Za-z0-9]{1,86}\$[./A-Za-z0-9]{43}"
    r"|argon2(?:id|i|d)\$v=\d+\$m=\d+,t=\d+,p=\d+\$[A-Za-z0-9+/]{11,}\$[A-Za-z0-9+/]{16,})"
    r"|pbkdf2_sha(?:1|256|512)\$\d{1,9}\$[A-Za-z0-9./+]{4,}\$[A-Za-z0-9./+]{20,}={0,2})"
    r"(?![./A-Za-z0-9$])"
)
# A PuTTY key file's private part: ``Private-Lines: N``, N lines of base64, then its MAC.
_PUTTY_PRIVATE = re.compile(
    r"^Private-Lines:[ \t]*\d+[ \t]*\n(?:[A-Za-z0-9+/=]{1,128}(?:\n|$))+(?:Private-(?:MAC|Hash):[^\n]*)?",
    re.MULTILINE,
)
# A ``Cookie:`` or ``Set-Cookie:`` header: each value is a session, as good as a password.
_COOKIE = re.compile(
    r"(?=[sScC])(?<![\w-])(?P<pre>(?:set-)?cookie[\"']?[ \t]*:[ \t]*)(?P<val>[^\n\"'`]{1,4096})",
    re.IGNORECASE,
)
# ``.npmrc``'s ``_auth=``, Docker's ``"auth": "…"``: base64 of ``user:password`` (see _basic_auth_b64).
_AUTH_B64 = re.compile(
    r"(?=[\"'_aA])(?<![\w.-])(?P<pre>[\"']?_?auth[\"']?[ \t]*[:=][ \t]*)(?P<val>[\"']?[A-Za-z0-9+/]{8,1024}={0,2}[\"']?)(?![\w+/=])",
    re.IGNORECASE,
)
_COOKIE_PAIR = re.compile(r"(?P<name>[^\s=;,]{1,128})=(?P<val>[^\s;,]{1,4096})")

_SIGNED = re.compile(r"[?&;](?i:sig|signature|x-amz-signature|x-goog-signature|x-amz-security-token)=")
_AWS_SECRET_BARE = re.compile(r"(?<![A-Za-z0-9+/_.-])[A-Za-z0-9+/]{40}(?!\.?[A-Za-z0-9+/=_-])")
_ENCODED_BLOB = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{120,}={0,2}(?![A-Za-z0-9+/_-])")


_COOKIE_ATTRIBUTES: Final = word_set(
    "path domain expires max-age samesite secure httponly priority partitioned version"
)


def _value_of(m: re.Match[str]) -> str:
    """The value of a keyed match, up to any secret key glued inside it (``pw~*token: x``), so
    that the redaction of one value never swallows the key of the next one."""
    value = m["val"]
    if value[:1] in "\"'`" and len(value) >= 2 and value[-1] == value[0]:
        return value  # a quoted string is one value
    for e in _EMBEDDED_KEY.finditer(m.string, m.start("val") + 1, m.end("val")):
        if secret_kind_for_key(e["key"]) is not None:
            return m.string[m.start("val") : e.start()]
    return value


def _sub_keyed(pattern: re.Pattern[str], text: str, repl: Callable[[re.Match[str], str], str | None]) -> str:
    """``pattern.sub`` for patterns that consume a key and look ahead at its value (group ``val``).

    ``repl(match, value)`` returns what replaces the key and the value, or None to leave them.
    A match left alone consumes only its key, so the scan goes on inside its value; a replaced
    match consumes the value too, and matches starting inside it are skipped.
    """
    out: list[str] = []
    pos = 0
    for m in pattern.finditer(text):
        if m.start() < pos:
            continue
        value = _value_of(m)
        replacement = repl(m, value)
        if replacement is None:
            continue
        out += (text[pos : m.start()], replacement)
        pos = m.start("val") + len(value)
    out.append(text[pos:])
    return "".join(out)


def _aws_secret_like(s: str) -> bool:
    """A 40-character base64 string that is random enough to be an AWS secret, not a path."""
    if not mixed_case_and_digits(s) or entropy(s) < 4.1 or AWS_DOC_EXAMPLE.fullmatch(s):
        return False
    # ``src/components/Header/NavBar2Item``, ``/global/facts/01ARZ…``: a path.
    return sum(len(w) for w in WORDISH.findall(s)) < len(s) / 2 and not PATH_WORD.search(s)


def _redact_slashed_keys(path: str, c: Counter[str]) -> str:
    """``path`` with base64 keys that hold ``/`` (so span URL segments) redacted: every window
    that reads as one is covered, overlapping windows together."""
    spans: list[tuple[int, int, str]] = []
    for m in URL_SLASHED_KEY.finditer(path):
        if m["aws"] and "/" in m["aws"] and _aws_secret_like(m["aws"]):
            spans.append((m.start(), m.start() + 40, "aws_secret_access_key"))
        if m["azure"] and "/" in m["azure"] and random_key_bytes(m["azure"]):
            spans.append((m.start(), m.start() + 88, "azure_storage_key"))
    if not spans:
        return path
    merged: list[tuple[int, int, str]] = []
    for a, b, kind in sorted(spans):
        if merged and a < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b), merged[-1][2])
        else:
            merged.append((a, b, kind))
    out: list[str] = []
    pos = 0
    for a, b, kind in merged:
        c[kind] += 1
        out += (path[pos:a], redacted(kind))
        pos = b
    return "".join(out) + path[pos:]


def _redact_signatures(text: str, c: Counter[str]) -> str:
    """``text`` with the values of signing query parameters (``sig=``, ``X-Amz-Signature=``)
    redacted: in a URL, or in a query string pasted without one (a SAS token, ``?sv=…&sig=…``)."""

    def signature(m: re.Match[str]) -> str:
        out = _redact_value(m["key"] + "=", m["val"], "url_signature", c, after_colon=False)
        return m.group() if out is None else out

    return URL_SIGNATURE.sub(signature, text)


def _redact_url(url: str, c: Counter[str]) -> str:
    """``url`` with the tokens its path or query holds redacted: signatures (``sig=``),
    ``key=value`` path segments whose key names a secret, and segments or long query values
    that look generated (``https://host/hooks/<token>``)."""
    start = URL_PATH_START.match(url)
    cut = start.end() if start is not None else 0
    head, rest = url[:cut], url[cut:]

    def assignment(m: re.Match[str]) -> str:
        kind = secret_kind_for_key(m["key"])
        out = None
        if kind is not None:
            out = _redact_value(m["key"] + "=", m["val"], kind, c, after_colon=False)
        return m.group() if out is None else out

    def token(m: re.Match[str]) -> str:
        value = m["val"] if "val" in m.re.groupindex else m.group()
        if not looks_like_url_token(value):
            return m.group()
        c["url_token"] += 1
        return m.group()[: len(m.group()) - len(value)] + redacted("url_token")

    query = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    rest = _redact_slashed_keys(rest[:query], c) + rest[query:]
    rest = _redact_signatures(rest, c)
    rest = URL_PATH_ASSIGNMENT.sub(assignment, rest)
    rest = URL_QUERY_VALUE.sub(token, rest)  # first: a whole value, before its ``%2F`` pieces
    rest = URL_SEGMENT.sub(token, rest)
    return head + rest


def _redact_cookies(m: re.Match[str], c: Counter[str]) -> str:
    """A cookie header with each value that looks made up redacted (``theme=dark`` is kept)."""

    def pair(p: re.Match[str]) -> str:
        value = p["val"]
        if p["name"].lower() in _COOKIE_ATTRIBUTES or MARKER_START.match(value) or len(value) < 12:
            return p.group()
        if not (has_letter_and_digit(value) or looks_random(value)):
            return p.group()
        c["cookie"] += 1
        return p["name"] + "=" + redacted("cookie")

    return m["pre"] + _COOKIE_PAIR.sub(pair, m["val"])


def _basic_auth_b64(value: str) -> bool:
    """``value`` is base64 of ``user:password`` (npm's ``_auth=``, Docker's ``"auth":``)."""
    try:
        plain = base64.b64decode(value.strip("\"'`"), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    user, sep, password = plain.partition(":")
    return bool(sep and user and password) and plain.isprintable()


def _redact_pem_tails(text: str, c: Counter[str]) -> str:
    """``text`` with each END line of a private key left after _PEM, and the base64 lines just
    before it, redacted: walking back line by line keeps this linear in the text."""
    out: list[str] = []
    pos = 0
    for m in _PEM_END.finditer(text):
        start = m.start()
        while start > pos:
            line_start = text.rfind("\n", pos, start - 1) + 1
            if line_start < pos or _PEM_BODY_LINE.fullmatch(text, line_start, start - 1) is None:
                break
            start = line_start
        if start == m.start():
            continue  # an END line alone holds nothing
        c["private_key"] += 1
        out += (text[pos:start], redacted("private_key"))
        pos = m.end()
    return "".join(out) + text[pos:]


def redact_secrets(text: str, counts: Counter[str] | None = None) -> str:
    """Replace every secret in ``text`` with ``[REDACTED:<kind>]`` (see the module docstring).

    Counts each redaction by kind into ``counts`` when given. Only secrets are touched: no
    structure is removed and nothing is truncated, so this also suits short single-line strings
    such as titles.
    """
    c: Counter[str] = Counter() if counts is None else counts

    def whole(kind: str) -> Callable[[re.Match[str]], str]:
        def repl(m: re.Match[str]) -> str:
            c[kind] += 1
            return redacted(kind)

        return repl

    text = _PEM.sub(whole("private_key"), text)
    if "-----END" in text:
        text = _redact_pem_tails(text, c)

    def url(m: re.Match[str]) -> str:
        if is_not_a_secret(m["pw"], quoted=True, after_colon=False):
            return m.group()
        c["url_credentials"] += 1
        return m["scheme"] + redacted("url_credentials") + "@"

    text = _URL_CREDENTIALS.sub(url, text)

    def url_user(m: re.Match[str]) -> str:
        if not looks_random(m["user"]):
            return m.group()
        c["url_credentials"] += 1
        return m["scheme"] + redacted("url_credentials") + "@"

    text = _URL_USER_TOKEN.sub(url_user, text)
    text = _JWT.sub(whole("jwt"), text)
    # Each rule below only when its words are in the text: a substring test costs far less than a scan.
    if "$" in text or "pbkdf2_" in text:
        text = _PASSWORD_HASH.sub(whole("password_hash"), text)
    if "Private-Lines:" in text:
        text = _PUTTY_PRIVATE.sub(whole("private_key"), text)
    if "ookie" in text or "OOKIE" in text:  # Cookie, Set-Cookie, COOKIE
        text = _COOKIE.sub(lambda m: _redact_cookies(m, c), text)

    def basic_b64(m: re.Match[str]) -> str:
        if not _basic_auth_b64(m["val"]):
            return m.group()
        c["basic_auth"] += 1
        quote = m["val"][0] if m["val"][0] in "\"'" else ""
        return m["pre"] + quote + redacted("basic_auth") + quote

    if "auth" in text or "Auth" in text or "AUTH" in text:  # ``_auth=``, ``"auth":``
        text = _AUTH_B64.sub(basic_b64, text)

    parts: list[str] = []
    pos = 0
    for m in vendor_tokens(text):
        kind = vendor_kind(m)
        if kind is not None:
            c[kind] += 1
            parts += (text[pos : m.start()], redacted(kind))
            pos = m.end()
    text = "".join(parts) + text[pos:]
    text = URL.sub(lambda m: _redact_url(m.group(), c), text)
    # A signed query string without its URL: the Azure portal shows a SAS token as ``?sv=…&sig=…``.
    # Before the key/value rules, which would take ``sv=<date>`` for the token of ``SAS_TOKEN=``.
    if _SIGNED.search(text):
        text = _redact_signatures(text, c)

    def blob(m: re.Match[str]) -> str:
        s = m.group()
        if not mixed_case_and_digits(s) or public_encoding(m.string, m.start(), s):
            return s
        c["encoded_blob"] += 1
        return ENCODED_MARKER

    # Before the key/value rules, so that they judge a long value the same way on every pass.
    text = _ENCODED_BLOB.sub(blob, text)

    def auth(m: re.Match[str]) -> str:
        scheme = (m["scheme"] or "").lower()
        if not scheme and m["val"].lower() in ("bearer", "basic", "token", "digest"):
            return m.group()
        if len(m["val"]) <= 15 and m["val"].isalpha() and m["val"][1:].islower():
            return m.group()  # a word: ``an Authorization: Basic header``, ``Authorization: required``
        kind = {"bearer": "bearer_token", "basic": "basic_auth"}.get(scheme, "authorization")
        out = _redact_value(m["pre"], m["val"], kind, c, after_colon=False)
        return m.group() if out is None else out

    text = _AUTH_HEADER.sub(auth, text)

    def bearer(m: re.Match[str]) -> str:
        if not has_letter_and_digit(m["val"]):
            return m.group()
        c["bearer_token"] += 1
        return m["pre"] + redacted("bearer_token")

    text = _BARE_BEARER.sub(bearer, text)

    def fixed(kind: str) -> Callable[[re.Match[str]], str]:
        def repl(m: re.Match[str]) -> str:
            out = _redact_value(m["pre"], m["val"], kind, c, after_colon=False)
            return m.group() if out is None else out

        return repl

    text = _NETRC.sub(fixed("password"), text)
    text = _CURL_USER.sub(fixed("password"), text)

    def block(m: re.Match[str]) -> str:
        kind = secret_kind_for_key(m["key"])
        if kind is None or is_not_a_secret(m["val"].strip(), quoted=True, after_colon=False):
            return m.group()
        c[kind] += 1
        tail = "\n" if m["val"].endswith("\n") else ""
        return m["pre"] + m["indent"] + "  " + redacted(kind) + tail

    text = _YAML_BLOCK.sub(block, text)

    def keyed(*, after_colon: bool | None) -> Callable[[re.Match[str], str], str | None]:
        def repl(m: re.Match[str], value: str) -> str | None:
            kind = key_kind(m["key"], value)
            if kind is None or not value or SOPS_VALUE.match(m.string, m.start("val") + (value[:1] in "\"'")):
                return None  # a SOPS value, also cut short at its ``,`` by a rule: see is_not_a_secret
            if names_a_secret(m.string, m.start("key"), m["key"]) and not looks_random(value.strip("\"'`")):
                return None  # ``gcloud … --secret=NAME``: a name, not the secret
            colon = after_colon if after_colon is not None else (":" in m["sep"] and "=" not in m["sep"])
            end = m.start("val") + len(value)
            call = m.string[end : end + 1] in ("(", "[")
            return _redact_value(m["pre"], value, kind, c, after_colon=colon, call=call)

        return repl

    text = _sub_keyed(_ANNOTATED, text, keyed(after_colon=False))
    text = _sub_keyed(_YAML_LINE, text, keyed(after_colon=True))
    text = _sub_keyed(_ENV_LINE, text, keyed(after_colon=False))
    text = _sub_keyed(_ASSIGNMENT, text, keyed(after_colon=None))
    text = _sub_keyed(_CLI_FLAG, text, keyed(after_colon=False))

    def aws_secret(m: re.Match[str]) -> str:
        if not _aws_secret_like(m.group()):
            return m.group()
        c["aws_secret_access_key"] += 1
        return redacted("aws_secret_access_key")

    text = _AWS_SECRET_BARE.sub(aws_secret, text)
    return redact_named(text, c)
