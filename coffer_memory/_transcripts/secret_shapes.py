"""Secrets recognised by their shape alone: vendor tokens, cloud keys and tokens glued into URLs.

One alternation (``VENDOR_TOKENS``) scans the text once for every vendor prefix; a few shapes
that plain text could take by chance get a second look (``_CHECKS``): an Azure storage key must
decode to random bytes, a Discord bot token's first part to a user id, and so on.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator
from typing import Final

# (kind, pattern) in priority order: at one position the first alternative that matches wins
# (``sk-ant-`` before ``sk-``). Each pattern brings its own boundaries.
_B: Final = r"(?<![A-Za-z0-9_-])"  # not glued to a word or a token
_E: Final = r"(?![A-Za-z0-9_-])"
# Shapes that may start with any letter or digit are kept apart (not after a dot either), so
# that the shared test of the next character still rules out most positions for the others.
_W: Final = r"(?<![A-Za-z0-9_.-])"
_SHAPES: Final[tuple[tuple[str, str], ...]] = (
    ("anthropic_api_key", _B + r"sk-ant-[A-Za-z0-9_-]{20,}"),
    ("openai_api_key", _B + r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    ("github_token", r"(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{36,251}(?![A-Za-z0-9])"),
    ("github_token", r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{22,}"),
    ("gitlab_token", _B + r"gl(?:pat|dt|rt|ptt|cbt|soat|ft|imt|agent|oas|wt)-[A-Za-z0-9_-]{20,}"),
    ("gitlab_token", _B + r"GR1348941[A-Za-z0-9_-]{20,}"),
    ("slack_token", _B + r"xox(?:[abposre]|e\.xox[bp])-[A-Za-z0-9-]{10,}"),
    ("slack_token", _B + r"xapp-\d-[A-Za-z0-9-]{10,}"),
    ("slack_webhook", r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]+"),
    (
        "discord_webhook",
        r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{20,}",
    ),
    ("google_api_key", _B + r"AIza[0-9A-Za-z_-]{35}" + _E),
    ("google_oauth_secret", _B + r"GOCSPX-[A-Za-z0-9_-]{20,}"),
    ("google_oauth_token", _B + r"ya29\.[A-Za-z0-9_-]{20,}"),
    ("google_oauth_token", r"(?<![A-Za-z0-9_/-])1//0[A-Za-z0-9_-]{40,}"),
    ("stripe_key", r"(?<![A-Za-z0-9_])[sr]k_(?:live|test)_[0-9A-Za-z]{16,}"),
    ("stripe_webhook_secret", r"(?<![A-Za-z0-9_])whsec_[A-Za-z0-9+/=]{24,}"),
    ("npm_token", r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"),
    ("pypi_token", _B + r"pypi-AgE[A-Za-z0-9_-]{50,}"),
    # A user token (``hf_``) or an organisation's API token (``api_org_``).
    ("huggingface_token", r"(?<![A-Za-z0-9_])(?:hf_|api_org_)[A-Za-z0-9]{34,}(?![A-Za-z0-9])"),
    ("sendgrid_key", _B + r"SG\.[A-Za-z0-9_-]{20,24}\.[A-Za-z0-9_-]{40,50}"),
    ("mailgun_key", _B + r"key-[0-9a-zA-Z]{32}" + _E),
    ("mailchimp_key", _W + r"[0-9a-f]{32}-us\d{1,2}" + _E),
    ("twilio_api_key", r"(?<![A-Za-z0-9_])SK[0-9a-fA-F]{32}(?![A-Za-z0-9_])"),
    ("digitalocean_token", _B + r"do[opr]_v1_[a-f0-9]{64}" + _E),
    ("shopify_token", _B + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _E),
    ("square_token", _B + r"sq0(?:atp|csp)-[0-9A-Za-z_-]{22,}"),
    ("square_token", _B + r"EAAA[A-Za-z0-9_-]{56,}"),
    ("facebook_token", _B + r"EAA[B-Z][A-Za-z0-9]{90,}"),
    ("databricks_token", _B + r"dapi[a-f0-9]{32}(?:-\d)?" + _E),
    ("heroku_api_key", _B + r"HRKU-[A-Za-z0-9_-]{40,}"),
    ("atlassian_token", _B + r"AT(?:ATT|CTT)3[A-Za-z0-9_=-]{100,}"),
    ("atlassian_token", _B + r"ATBB[A-Za-z0-9]{32,}"),
    ("vault_token", _B + r"hv[sbr]\.[A-Za-z0-9_-]{24,}"),
    ("docker_token", _B + r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{20,}"),
    ("doppler_token", _B + r"dp\.(?:pt|st|sa|ct|scim|audit)\.(?:[A-Za-z0-9_-]{1,40}\.)?[A-Za-z0-9]{40,}"),
    ("tailscale_key", _B + r"tskey-[a-z]+-[A-Za-z0-9]+-[A-Za-z0-9]{16,}"),
    ("newrelic_key", _B + r"NR(?:AK|AA|II)-[A-Za-z0-9]{27}" + _E),
    ("postman_key", _B + r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}" + _E),
    ("sentry_token", _B + r"sntry[su]_[A-Za-z0-9+/=_]{40,}"),
    ("linear_key", _B + r"lin_(?:api|oauth)_[A-Za-z0-9]{40,}"),
    ("notion_token", _B + r"(?:ntn|secret)_[A-Za-z0-9]{40,}" + _E),
    ("supabase_key", _B + r"(?:sbp_[a-f0-9]{40}|sb_secret_[A-Za-z0-9_-]{20,})" + _E),
    ("netlify_token", _B + r"nfp_[A-Za-z0-9]{36,}" + _E),
    ("fly_token", _B + r"(?:fo1_[A-Za-z0-9_-]{39,}|fm[12][ar]?_[A-Za-z0-9+/=_-]{50,})"),
    ("figma_token", _B + r"figd_[A-Za-z0-9_-]{40,}"),
    ("grafana_token", _B + r"(?:glc_[A-Za-z0-9+/=_-]{32,}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})"),
    ("airtable_token", _B + r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}" + _E),
    ("terraform_token", _W + r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}"),
    ("pulumi_token", _B + r"pul-[a-f0-9]{40}" + _E),
    ("dynatrace_token", _B + r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}" + _E),
    ("planetscale_token", _B + r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,}"),
    ("onepassword_token", _B + r"ops_eyJ[A-Za-z0-9+/=_-]{50,}"),
    ("mapbox_token", _B + r"sk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}"),
    ("firebase_server_key", _B + r"AAAA[A-Za-z0-9_-]{7}:[A-Za-z0-9_-]{100,}"),
    ("contentful_token", _B + r"CFPAT-[A-Za-z0-9_-]{43}" + _E),
    ("shippo_token", _B + r"shippo_(?:live|test)_[a-f0-9]{40}" + _E),
    (
        "llm_api_key",
        _B + r"(?:gsk_[A-Za-z0-9]{48,}|xai-[A-Za-z0-9]{70,}|pplx-[A-Za-z0-9]{40,}|r8_[A-Za-z0-9]{37,})",
    ),
    # The AI tools of agent projects: Tavily, LangSmith, Pinecone, Jina, E2B, Firecrawl,
    # Cerebras, ElevenLabs (``sk_`` + 48 hex: no Stripe key is hex only).
    (
        "llm_api_key",
        _B + r"(?:tvly-(?:dev-|prod-)?[A-Za-z0-9]{32,}|lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}"
        r"|pcsk_[A-Za-z0-9]{4,10}_[A-Za-z0-9]{40,}|jina_[A-Za-z0-9]{50,}|e2b_[a-f0-9]{40}"
        r"|fc-[a-f0-9]{32}|csk-[a-z0-9]{40,}|sk_[a-f0-9]{48})" + _E,
    ),
    # Hosting and CI: Neon, Render, Vercel, Resend, CircleCI, Buildkite.
    (
        "platform_token",
        _B + r"(?:napi_[a-z0-9]{64}|rnd_[A-Za-z0-9]{32}|vc[pikar]_[A-Za-z0-9]{40,}"
        r"|re_[A-Za-z0-9]{8}_[A-Za-z0-9]{20,}|CCIPAT_[A-Za-z0-9]{22}_[a-f0-9]{40}|bkua_[a-f0-9]{40})" + _E,
    ),
    ("alibaba_access_key_id", r"(?<![A-Za-z0-9])LTAI[A-Za-z0-9]{12,20}(?![A-Za-z0-9])"),
    ("age_secret_key", r"AGE-SECRET-KEY-1[0-9A-Z]{50,}"),
    ("aws_access_key_id", r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])"),
    # A Telegram bot token: a bot id, a colon, 35 characters (also glued after ``/bot``).
    ("telegram_bot_token", r"(?:(?<=bot)|(?<![A-Za-z0-9_]))\d{5,16}:A[A-Za-z0-9_-]{30,40}" + _E),
    # A Discord bot token: base64 of the bot's id, a timestamp, an HMAC.
    ("discord_bot_token", _W + r"[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}" + _E),
    # An Azure AD client secret: three characters, a digit, ``Q~``, 31 to 34 more.
    (
        "azure_client_secret",
        r"(?<![A-Za-z0-9_~.-])(?=[A-Za-z0-9_~.-]{3}\dQ~)[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?!\.?[A-Za-z0-9_~-])",
    ),
    # An Azure storage (or Cosmos DB) account key: 64 random bytes in base64.
    ("azure_storage_key", r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/]{86}==(?![A-Za-z0-9+/=_-])"),
)


def _alternatives(group: str) -> list[str]:
    """The top-level alternatives of a ``(?:a|b)…`` pattern's first group, each with what follows."""
    parts: list[str] = []
    depth, start, i = 0, 3, 3
    while i < len(group):
        ch = group[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            i = group.index("]", i + 2)
        elif ch == "(":
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
        elif ch == ")":
            if group[i + 1 : i + 2] in ("?", "*", "{"):
                raise ValueError(group)  # an optional group: its alternatives may not come first
            return [part + group[i + 1 :] for part in [*parts, group[start:i]]]
        elif ch == "|" and not depth:
            parts.append(group[start:i])
            start = i + 1
        i += 1
    raise ValueError(group)


def _first_chars(pattern: str) -> str | None:
    """A character-class body holding every character ``pattern`` can start with, or None
    when that is not plain to see (an assertion first)."""
    if pattern.startswith("(?:"):
        try:
            firsts = [_first_chars(alt) for alt in _alternatives(pattern)]
        except ValueError:
            return None
        return None if any(f is None for f in firsts) else "".join(f for f in firsts if f)
    if pattern.startswith("("):
        return None
    if pattern.startswith("["):
        return pattern[1 : pattern.index("]", 2)]
    if pattern.startswith("\\d"):
        return "0-9"
    if pattern.startswith("\\"):
        return pattern[:2]
    return re.escape(pattern[0])


def _one_pattern(shapes: tuple[tuple[str, str], ...]) -> str:
    """Every shape in one alternation, group ``k<i>`` for ``shapes[i]``.

    Shapes that start with the same boundary (a lookbehind) share it, in the order of their first
    use, and each such group first checks that the next character can start one of its shapes: a
    scan of plain text then costs a lookbehind and a lookahead per position, not one per shape.
    """
    groups: dict[str, list[tuple[int, str]]] = {}
    for i, (_kind, pattern) in enumerate(shapes):
        m = re.match(r"\(\?<[!=][^()]*\)", pattern)
        boundary = m.group() if m else ""
        groups.setdefault(boundary, []).append((i, pattern[len(boundary) :]))
    out = []
    for boundary, members in groups.items():
        firsts = [_first_chars(body) for _i, body in members]
        ahead = "" if any(f is None for f in firsts) else f"(?=[{''.join(f or '' for f in firsts)}])"
        alternation = "|".join(f"(?P<k{i}>{body})" for i, body in members)
        out.append(f"{boundary}{ahead}(?:{alternation})")
    return "|".join(out)


VENDOR_TOKENS: Final = re.compile(_one_pattern(_SHAPES))
"""Every shape in one pattern: group ``k<i>`` is ``_SHAPES[i]``; see ``vendor_kind``."""
_KINDS: Final = {f"k{i}": kind for i, (kind, _p) in enumerate(_SHAPES)}

# ``sk-`` followed by plain kebab-case words is an identifier (``sk-learn-style-wrapper``).
_KEBAB_WORDS = re.compile(r"sk-[a-z]{1,12}(?:-[a-z]{1,12})+")


def _mixed(s: str) -> bool:
    return any(c.isupper() for c in s) and any(c.islower() for c in s) and any(c.isdigit() for c in s)


def random_key_bytes(b64: str) -> bool:
    """``b64`` decodes to bytes that look random (a key), not to text or a file header."""
    if not _mixed(b64):
        return False
    try:
        raw = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        return False
    printable = sum(32 <= b < 127 for b in raw)
    return printable < 0.75 * len(raw)


def _discord(token: str) -> bool:
    first = token.split(".", 1)[0]
    try:
        raw = base64.urlsafe_b64decode(first + "=" * (-len(first) % 4))
    except (binascii.Error, ValueError):
        return False
    return raw.isdigit() and 15 <= len(raw) <= 20 and _mixed(token)


# Shapes that ordinary text could take: the token must also pass this.
# AWS's documentation keys (``AKIAIOSFODNN7EXAMPLE``, ``wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY``
# and their siblings): published, valid for nothing, and quoted by every note about AWS setup.
# Left alone by the scrubber and by ``remember``'s check alike (docs/security.md). A real key ends
# this way by chance once in 32**7 (ids) or 64**10 (secrets).
AWS_DOC_EXAMPLE: Final = re.compile(r"(?:AKIA|ASIA)[A-Z0-9]{9}EXAMPLE|[A-Za-z0-9+/]{30}EXAMPLEKEY")

_CHECKS: Final[dict[str, Callable[[str], bool]]] = {
    "aws_access_key_id": lambda s: not AWS_DOC_EXAMPLE.fullmatch(s),
    "openai_api_key": lambda s: not _KEBAB_WORDS.fullmatch(s),
    "twilio_api_key": lambda s: any(c.isdigit() for c in s[2:]) and any(c.isalpha() for c in s[2:]),
    "mailgun_key": lambda s: any(c.isdigit() for c in s[4:]) and any(c.isalpha() for c in s[4:]),
    "discord_bot_token": _discord,
    "platform_token": lambda s: any(c.isdigit() for c in s) and any(c.isalpha() for c in s[4:]),
    "telegram_bot_token": lambda s: _mixed(s.split(":", 1)[1]),
    "azure_client_secret": _mixed,
    "azure_storage_key": random_key_bytes,
    "square_token": lambda s: s.startswith("sq0") or _mixed(s),
    "facebook_token": _mixed,
    "alibaba_access_key_id": _mixed,
}


# Said just before a base64 string, these make it a digest (``sha512 (base64): …``), not a key.
_DIGEST_CONTEXT = re.compile(r"(?i)(?:sha-?(?:384|512)|digest|checksum|hash)[^\n]{0,30}\Z")


# Where a token can be: a run of 16 or more characters that no token holds a delimiter of.
_TOKEN_RUN: Final = re.compile(r"[^\s\"'`<>()\[\]{},;|\\]{16,}")


def vendor_tokens(text: str) -> Iterator[re.Match[str]]:
    """The ``VENDOR_TOKENS`` matches in ``text``, searched only inside runs long enough to hold
    a token (most of prose and code is words shorter than that). Lookbehinds still see the
    characters before a run, and ``m.string`` is the whole text."""
    for run in _TOKEN_RUN.finditer(text):
        yield from VENDOR_TOKENS.finditer(text, run.start(), run.end())


def vendor_kind(m: re.Match[str]) -> str | None:
    """The kind of a ``VENDOR_TOKENS`` match, or None when its second look says it is no token."""
    kind = _KINDS[m.lastgroup or ""]
    check = _CHECKS.get(kind)
    if check is not None and not check(m.group()):
        return None
    if kind == "azure_storage_key" and _DIGEST_CONTEXT.search(m.string, max(0, m.start() - 40), m.start()):
        return None
    return kind


# --------------------------------------------------------------------------------------------
# Encoded data that is public by what it is
# --------------------------------------------------------------------------------------------

# Just before a run of base64: a data URI of an image (audio, video, font), an SSH public
# key's type (``ssh-rsa AAAA…``), or a JWK's modulus (``"n": "…"``; its private ``"d"``, ``"p"``,
# ``"q"``, … are not). A ``data:application/json;base64,…`` may carry anything.
_PUBLIC_BEFORE: Final = re.compile(
    r"(?:data:(?:image|audio|video|font)/[\w.+-]{1,40};base64,|\"n\"[ \t]*:[ \t]*\""
    r"|(?:ssh-(?:rsa|dss|ed25519|ed448)|ecdsa-sha2-nistp\d{3}|sk-(?:ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com)"
    r"[ \t]+)\Z"
)
_PUBLIC_LABEL: Final = (
    r"(?:PGP PUBLIC KEY BLOCK|PGP SIGNATURE|CERTIFICATE|TRUSTED CERTIFICATE|X509 CRL"
    r"|(?:NEW )?CERTIFICATE REQUEST|PUBLIC KEY|RSA PUBLIC KEY)-{5}"
)
_PUBLIC_BEGIN: Final = re.compile(r"-{5}BEGIN " + _PUBLIC_LABEL)
_ARMOR_LOOKBACK: Final = 100_000  # how far back a blob's BEGIN line is looked for
# A SOPS-encrypted value: ciphertext meant to be committed, no secret without its key.
SOPS_VALUE: Final = re.compile(
    r"ENC\[AES256_GCM,data:[A-Za-z0-9+/]*={0,2},iv:[A-Za-z0-9+/]+={0,2},tag:[A-Za-z0-9+/]+={0,2}"
    r",type:(?:str|int|float|bool|bytes|comment)\]"
)
SOPS_HEAD: Final = "ENC[AES256_GCM,data:"


# What an image file starts with (PNG, JPEG, GIF; WebP is ``RIFF`` + size + ``WEBP``), and how
# its base64 starts: a quick test before decoding.
_IMAGE_MAGIC: Final = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")
_IMAGE_B64_HEAD: Final = ("iVBORw0KGgo", "/9j/", "R0lGOD", "UklGR")


def image_base64(blob: str) -> bool:
    """``blob`` is standard base64 of an image file as a whole: its decoded head is an image's
    magic (PNG, JPEG, GIF, WebP) and every character of it decodes (a head glued to other data
    does not: a base64url mark or a length that is no multiple of four)."""
    if not blob.startswith(_IMAGE_B64_HEAD):
        return False
    try:
        raw = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return False
    return raw.startswith(_IMAGE_MAGIC) or (raw[:4] == b"RIFF" and raw[8:12] == b"WEBP")


def public_encoding(text: str, start: int, blob: str) -> bool:
    """The base64 ``blob`` at ``start`` in ``text`` is public material, not a secret: an image in
    a data URI or bare (``image_base64``), an SSH public key, a JWK's modulus, the body of a certificate or a public key
    (its PEM or PGP armor opened before it and not yet closed), base64 of such a PEM block (a
    kubeconfig's ``certificate-authority-data``; its ``client-key-data`` decodes to a private
    key and is not), or the data of a SOPS-encrypted value (``ENC[AES256_GCM,data:…]``)."""
    if _PUBLIC_BEFORE.search(text, max(0, start - 60), start) or image_base64(blob):
        return True
    sops_at = start - len(SOPS_HEAD)
    if sops_at >= 0 and text.startswith(SOPS_HEAD, sops_at) and SOPS_VALUE.match(text, sops_at):
        return True
    begin = text.rfind("-----BEGIN ", max(0, start - _ARMOR_LOOKBACK), start)
    if begin >= 0 and _PUBLIC_BEGIN.match(text, begin) and "-----END " not in text[begin:start]:
        return True
    try:
        head = base64.b64decode(blob[:64], validate=True)
    except (binascii.Error, ValueError):
        return False
    return _PUBLIC_BEGIN.match(head.lstrip().decode("ascii", "replace")) is not None


# --------------------------------------------------------------------------------------------
# Tokens glued into a URL's path
# --------------------------------------------------------------------------------------------

# A URL (also JSON-escaped, ``https:\/\/``), up to a blank, a quote or a bracket.
URL: Final = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,20}:(?://|\\/\\/)[^\s\"'`<>\[\]{}|^]+")
# Where the path starts: after the authority.
URL_PATH_START: Final = re.compile(r"^[^:]+:(?://|\\/\\/)[^/\\?#]*")
# A path segment long enough to be a token: letters, digits and the URL-safe marks.
# (Also after ``%2F``: a URL percent-encoded into another one's query, a redirect target.)
URL_SEGMENT: Final = re.compile(r"(?:(?<=/)|(?<=%2[Ff]))[A-Za-z0-9_~%+=-]{24,}(?=[/\\?#;&,)]|\.?$)")
# ``key=value`` as a path segment or a matrix parameter (``/x/password=y``, ``/x;token=y``).
# A value may go on over ``/`` when all of it up to the next ``;``, ``?``, ``#`` or ``&`` reads as
# base64: an Azure connection string (``Endpoint=sb://host/;SharedAccessKey=<base64>``) is one
# URL here, and its key's own ``/`` ended the value, leaving the rest of the key behind.
URL_PATH_ASSIGNMENT: Final = re.compile(
    r"(?<=[/;])(?P<key>[A-Za-z_][A-Za-z0-9_.-]{0,60})="
    r"(?P<val>[^/\\?#;&]{1,256}(?:(?:/[A-Za-z0-9+]{1,256}){1,16}={0,2}(?=[;?#&]|$))?)"
)
# Query parameters that sign a URL (Azure SAS, S3/GCS presigned URLs): who holds it may use it.
URL_SIGNATURE: Final = re.compile(
    r"(?<=[?&;])(?P<key>(?i:sig|signature|x-amz-signature|x-goog-signature|x-amz-security-token))="
    r"(?P<val>[^&\s\"'`<>#;]{16,})"
)
# Where a base64 key holding ``/`` may sit in a URL path, split over segments: every window of
# 40 characters (an AWS secret) or 86 + ``==`` (an Azure key) that starts and ends at a boundary.
URL_SLASHED_KEY: Final = re.compile(
    r"(?<=/)(?=(?P<aws>[A-Za-z0-9+/]{40})(?:[/?#]|$))?(?=(?P<azure>[A-Za-z0-9+/]{86}==)(?:[/?#]|$))?"
)
# A query value long enough to be a token.
URL_QUERY_VALUE: Final = re.compile(
    r"(?<=[?&;])(?P<key>[A-Za-z0-9_.-]{1,40})=(?P<val>[A-Za-z0-9_~%+=-]{32,})(?=[&#;,)]|\.?$)"
)
_ID_PREFIX = re.compile(r"[a-z]{1,8}_")  # ``pi_3Mtw…``, ``ses_e07…``: an object id, not a token


_WORDISH = re.compile(r"[A-Z]?[a-z]{4,}")


def _decodes_to_text(s: str) -> bool:
    """``s`` is base64 (or base64url) of printable text: data such as a cursor, not a key."""
    try:
        raw = base64.urlsafe_b64decode(s.replace("+", "-").replace("/", "_") + "=" * (-len(s) % 4))
    except (binascii.Error, ValueError):
        return False
    return bool(raw) and sum(32 <= b < 127 or b in (9, 10, 13) for b in raw) >= 0.9 * len(raw)


def looks_like_url_token(value: str) -> bool:
    """A URL path segment or query value that is a generated token: mixed case and digits, not
    made of words, not an object id (``cus_…``, ``ses_…``), not base64 of text; so never a slug,
    a hex digest or a UUID."""
    bare = value.replace("%2F", "").replace("%3D", "").replace("%2B", "")
    if _ID_PREFIX.match(value) or not _mixed(bare) or _decodes_to_text(value.rstrip("=")):
        return False
    return sum(len(w) for w in _WORDISH.findall(value)) < len(value) / 2


# --------------------------------------------------------------------------------------------
# Secrets named by what surrounds them (the key/value rules of ``secrets`` cover ``key=value``)
# --------------------------------------------------------------------------------------------

# ``<password>…</password>``, ``<apiKey>…</apiKey>``: an XML element named after a secret.
XML_ELEMENT: Final = re.compile(
    r"<(?P<key>[A-Za-z_][\w.:-]{0,60})(?:[ \t][^<>\n]{0,200})?>(?P<val>[^<>\n]{1,1024})</(?P=key)>"
)
# ``<add key="ApiKey" value="…"/>`` (.NET settings), ``name="password" value="…"``.
XML_KEY_VALUE: Final = re.compile(
    r"""\b(?=[kn])(?:key|name)[ \t]*=[ \t]*["'](?P<key>[^"'<>\n]{1,80})["'][ \t]+value[ \t]*=[ \t]*(?P<q>["'])(?P<val>[^"'\n]{1,1024})(?P=q)"""
)
# A Markdown table row whose first cell names a secret: ``| db password | hunter2 |``.
TABLE_ROW: Final = re.compile(
    r"^[ \t]*\|[ \t]*`?(?P<key>[^|`\n]{1,60}?)`?[ \t]*\|[ \t]*(?P<val>[^|\s][^|\n]{0,300}?)[ \t]*(?=\|)",
    re.MULTILINE,
)
# A ``.pgpass`` line, ``host:port:database:user:password`` (``*`` for any field, ``\:`` for a
# colon in one): five fields alone on their line, the first a host (a name, an address, a socket
# folder or ``*``; ``10:20:30:40:50`` is no line of it), the second a port, the last the password;
# also quoted after ``echo`` (``echo "h:5432:db:u:pw" >> ~/.pgpass``).
_PGPASS_FIELD = r"(?:[^\s:\\\"']|\\.)+"
PGPASS_LINE: Final = re.compile(
    r"^[ \t]*(?:echo[ \t]+(?P<q>[\"'])|(?P<bare>))(?=[^\s:]*[A-Za-z.*/])(?:[^\s:\\]|\\.)+:(?:\d{1,5}|\*):"
    + _PGPASS_FIELD
    + ":"
    + _PGPASS_FIELD
    + ":"
    r"(?P<val>(?(bare)(?:[^\s:\\]|\\.)+|" + _PGPASS_FIELD + r"))(?(q)(?P=q)[ \t]*(?:>>?[^\n]*)?)[ \t]*$",
    re.MULTILINE,
)
# An ODBC connection string's braced value, ``Pwd={a;b}}c}``: it ends at the closing brace
# (``}}`` is one escaped ``}``), so it may hold ``;`` and blanks. The key rules would take
# ``{a`` for a template and keep it all. It follows a ``;`` (another pair of the string), ends
# the string or its pair, and holds a digit or a mark no name has: ``token={user.token}`` (JSX)
# and ``f"X_TOKEN={(s := r(30))}"`` (an f-string) are code.
ODBC_BRACED: Final = re.compile(
    r"(?:(?<=;)|(?<=;[ \t]))(?P<key>[A-Za-z_][\w.-]{0,60})[ \t]*=[ \t]*\{"
    r"(?=(?:[^}\n]|\}\}){0,256}?(?:[^\w.}\n]|\}\}|\d))(?P<val>(?:[^}\n]|\}\}){1,256}+)\}(?=[;\"'`]|[ \t]*$)",
    re.MULTILINE,
)
# ``az storage account keys list``: each key is named ``key1``/``key2`` (``kerb1``/``kerb2`` for
# Kerberos keys), as ``"keyName": "key1"`` before its ``"value"`` (JSON, YAML) or as a bare
# ``key1: X`` line. Only a value with a digit and a capital is taken (``key1: value1`` is kept).
AZURE_LISTED_KEY: Final = re.compile(
    r"(?:[\"']?keyName[\"']?[ \t]*:[ \t]*[\"']?(?:key|kerb)[12][\"']?[^{}]{0,120}?[\"']?value[\"']?[ \t]*:[ \t]*"
    r"|^[ \t]*(?:key|kerb)[12][ \t]*[:=][ \t]*)"
    r"(?=[\"']?[A-Za-z0-9+/=_-]*\d)(?=[\"']?[A-Za-z0-9+/=_-]*[A-Z])(?P<val>[\"']?[A-Za-z0-9+/=_-]{20,}[\"']?)",
    re.MULTILINE,
)
_ADVERB = r"(?:[ \t]+(?:now|still|also|just|actually|simply|currently))?"
# Prose: ``the password is hunter2``, ``the password is: X``, ``the db password for prod was
# changed to X``, ``API key: …``, ``the API key X expired`` (no verb). ``secrets`` judges the value by what the sentence gives:
# with a verb, a word that ends its clause may be a password (``is swordfish.``); without one,
# only a value that looks generated is (see secrets._prose_secret).
PROSE_SECRET: Final = re.compile(
    r"(?i)\b(?=[past])(?P<key>password|passphrase|passwd|pw|api[ _-]?key|access[ _]key|secret[ _]key|token|secret)"
    r"(?:[ \t]+(?:for|of|on)[ \t]+(?:the[ \t]+)?[\w.-]{1,40})?"
    r"(?P<verb>[ \t]+(?:(?:is|was|has[ \t]+been)"
    + _ADVERB
    + r"(?:[ \t]+(?:changed[ \t]+to|set[ \t]+to))?:?|=|->"
    r"|(?:changed|set|reset)[ \t]+to))?"
    r"[ \t]+(?P<q>[\"'`]?)(?P<val>[^\s\"'`,;()]{4,256})",
    re.MULTILINE,
)
# A verb before a password says the word after it is one: ``use password X``, ``try the admin
# password X``, ``log in with password X`` (searched for in the text just before the key).
TOLD_BEFORE: Final = re.compile(
    r"(?i)\b(?:use|using|try|enter|type|with)[ \t]+(?:(?:the|a|this|that|your|my|our)[ \t]+)?"
    r"(?:[\w.-]{1,40}[ \t]+)?$"
)

_PROSE_KEY = r"(?P<key>password|passphrase|passwd|pw|api[ _-]?key|access[ _]key|secret[ _]key|token|secret)"
_PASSWORD_KEY = r"(?P<key>password|passphrase|passwd|pw)"
_PROSE_VALUE = r"[ \t]+(?P<q>[\"'`]?)(?P<val>[^\s\"'`,;()]{4,256})"
# A key named by a phrase before its verb or a colon: ``Password for the staging db: X``, ``the
# password to the vpn is X``, ``password for root on db1: X``, ``the password you need is X``
# (``PROSE_SECRET`` takes one word after ``for``, and a verb, never a bare colon).
PROSE_PHRASED: Final = re.compile(
    r"(?i)\b(?=[past])" + _PROSE_KEY + r"(?:[ \t]+(?:for|of|on|to|at)(?:[ \t]+[\w.@/-]{1,40}){1,6}?"
    r"|[ \t]+(?:you|we|i|they)[ \t]+(?:need|want|use|chose|picked|set|got))"
    r"(?P<verb>:|[ \t]+(?:is|was|has[ \t]+been)"
    + _ADVERB
    + r"(?:[ \t]+(?:changed[ \t]+to|set[ \t]+to))?:?)"
    + _PROSE_VALUE,
    re.MULTILINE,
)
# ``set the admin password to X``, ``changed the root password for prod to X``.
PASSWORD_SET_TO: Final = re.compile(
    r"(?i)\b(?=[scru])(?:set|setting|change|changed|changing|reset|resetting|update|updated|updating)"
    r"[ \t]+(?:(?:the|a|this|that|your|my|our|its)[ \t]+)?(?:[\w.@-]{1,40}[ \t]+)?"
    + _PASSWORD_KEY
    + r"(?:[ \t]+(?:for|of|on)(?:[ \t]+[\w.@/-]{1,40}){1,3}?)?(?P<verb>[ \t]+to)"
    + _PROSE_VALUE
)
# A value before the key: ``use albatross as the password``, ``set X as the admin password``.
VALUE_AS_PASSWORD: Final = re.compile(
    r"(?i)\b(?=[uwstpc])(?:use|using|with|set|try|pick|picked|chose|choose)[ \t]+"
    r"(?P<q>[\"'`]?)(?P<val>[^\s\"'`,;()]{4,256}?)(?P=q)[ \t]+as[ \t]+"
    r"(?:(?:the|a|an|your|my|our|its)[ \t]+)?(?:[\w.@-]{1,40}[ \t]+)?" + _PASSWORD_KEY + r"(?![\w-])"
)
