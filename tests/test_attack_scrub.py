"""Secret shapes the scrubber missed, and code it took for secrets (attack5, session 13).

Every value is built from random characters at run time: no secret-shaped string is committed.
"""

from __future__ import annotations

import base64
import random
import string
from collections import Counter

import pytest

from coffer_memory import redact_secrets

RNG = random.Random(20261202)
ALNUM = string.ascii_letters + string.digits
CRYPT = ALNUM + "./"


def rand(n: int, alphabet: str = ALNUM) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


PASSWORD = rand(14)
B64_CREDS = base64.b64encode(f"deploy:{PASSWORD}".encode()).decode()
SESSION = rand(32)

BCRYPT = rand(53, CRYPT)
SHA512_CRYPT = rand(86, CRYPT)
APR1 = rand(22, CRYPT)
ARGON2 = rand(43)
PBKDF2 = rand(43)
PUTTY = rand(64, ALNUM + "+/")

LEAKS = [
    # (text, the secret in it, the kind it is redacted as)
    (f"sshpass -p {PASSWORD} ssh deploy@host", PASSWORD, "password"),
    (f"docker login -u me -p {PASSWORD} ghcr.io", PASSWORD, "password"),
    (f"podman login --username me -p '{PASSWORD}' quay.io", PASSWORD, "password"),
    (f"setx OPENAI_API_KEY {PASSWORD}", PASSWORD, "api_key"),
    (f"Cookie: theme=dark; sessionid={SESSION}", SESSION, "cookie"),
    (f"< Set-Cookie: session={SESSION}; Path=/; HttpOnly", SESSION, "cookie"),
    (f"$2b$12${BCRYPT}", BCRYPT, "password_hash"),
    (f"root:$6${rand(16, CRYPT)}${SHA512_CRYPT}:19000:0:99999:7:::", SHA512_CRYPT, "password_hash"),
    (f"admin:$apr1${rand(8, CRYPT)}${APR1}", APR1, "password_hash"),
    (f"$argon2id$v=19$m=65536,t=3,p=4${rand(22)}${ARGON2}", ARGON2, "password_hash"),
    (f"pbkdf2_sha256$600000${rand(22)}${PBKDF2}=", PBKDF2, "password_hash"),
    (
        f"PuTTY-User-Key-File-3: ssh-ed25519\nPrivate-Lines: 1\n{PUTTY}\nPrivate-MAC: {rand(64, '0123456789abcdef')}",
        PUTTY,
        "private_key",
    ),
    (f"//registry.npmjs.org/:_auth={B64_CREDS}", B64_CREDS, "basic_auth"),
    (f'{{"auths": {{"ghcr.io": {{"auth": "{B64_CREDS}"}}}}}}', B64_CREDS, "basic_auth"),
]


@pytest.mark.parametrize(("text", "secret", "kind"), LEAKS)
def test_the_secret_is_redacted_once_and_for_good(text: str, secret: str, kind: str) -> None:
    counts: Counter[str] = Counter()
    out = redact_secrets(text, counts)
    assert f"[REDACTED:{kind}]" in out and counts[kind] >= 1, out
    assert secret not in out
    again: Counter[str] = Counter()
    assert redact_secrets(out, again) == out and not again  # idempotent


KEPT = [
    "const token = await getToken({ audience });",
    "let key = new SigningKey(bytes);",
    'let api_key = std::env::var("API_KEY")?;',
    "password: *db_password",
    "Cookie: theme=dark; lang=en-US",
    "Set-Cookie: consent=yes; Path=/; Max-Age=31536000",
    '"auth": true',
    "auth: oauth2",
    "_auth=disabled",
    "price is $5 or $6 per seat",
    "echo $HOME and $2 args",
    "docker login -u me --password-stdin ghcr.io",
    "sshpass -f ~/.pw ssh host",
]


@pytest.mark.parametrize("text", KEPT)
def test_code_and_plain_values_are_kept(text: str) -> None:
    counts: Counter[str] = Counter()
    assert redact_secrets(text, counts) == text and not counts
