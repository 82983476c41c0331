"""Secrets whose own characters ended the value the scrubber took (review28, session 28).

A ``.env`` line's unquoted value runs to the end of its word, so a Django ``SECRET_KEY`` full of
``( ) & ; ^`` kept everything after its first such mark; an Azure connection string that starts
with ``Endpoint=sb://…/`` reads as one URL, whose ``;SharedAccessKey=<base64>`` path assignment
ended at the key's first ``/``. And a signed query string pasted without its URL (a SAS token
as the Azure portal shows it, ``?sv=…&sig=…``; presigned S3 parameters) kept its signature, the
credential: ``sig=`` was looked for only inside a URL, and ``AZURE_STORAGE_SAS_TOKEN=`` got its
harmless ``sv=<date>`` redacted instead. And a value given to a command that stores a secret
by a flag or a pipe (``gh secret set NAME --body X``, ``echo X | gh secret set NAME``, ``az
keyvault secret set --value X``) was kept, ``--body`` taken for the value. Each is checked on the scrubber and through the real
faces: a ``coffer remember`` subprocess and ``coffer-api`` on 127.0.0.1.

Every value is built from random characters at run time: no secret-shaped string is committed.
"""

from __future__ import annotations

import base64
import os
import random
import string
import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx
import pytest
from served import Served

from coffer_memory import redact_secrets

RNG = random.Random(20261205)
ALNUM = string.ascii_letters + string.digits
PUNCT = "!@#%^&*(-_=+)"


def rand(n: int, alphabet: str = ALNUM) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def key_b64(n: int) -> str:
    """Base64 of ``n`` random bytes holding both ``/`` and ``+`` (as most real keys do)."""
    while True:
        s = base64.b64encode(bytes(RNG.getrandbits(8) for _ in range(n))).decode()
        if "/" in s[4:-4] and "+" in s:
            return s


DJANGO = "django-insecure-" + rand(6) + "(" + rand(8) + "&" + rand(6) + ")" + rand(10, ALNUM + PUNCT)
PW_PARENS = "p@" + rand(6) + "(" + rand(6) + ")" + rand(5)
PW_SEMI = rand(7) + ";" + rand(7) + "&" + rand(7)
SAS = key_b64(32)
SAS_TOKEN = key_b64(33)
SIG = key_b64(32).replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
SIG2 = key_b64(32).replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
AMZ = rand(64, "0123456789abcdef")
GH = rand(24)
QUERY = "sv=2022-11-02&ss=bfqt&srt=sco&sp=rwdlac&se=2026-01-01T00:00:00Z&spr=https&sig="

LEAKS = [
    # (text, the secret in it, the kind it is redacted as)
    (f"SECRET_KEY={DJANGO}", DJANGO, "secret"),
    (f"  export DB_PASSWORD={PW_SEMI}\nDEBUG=1", PW_SEMI, "password"),
    (f"DB_PASSWORD={PW_PARENS} # prod", PW_PARENS, "password"),
    (
        f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={SAS}",
        SAS,
        "secret",
    ),
    (
        f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={SAS};EntityPath=q",
        SAS,
        "secret",
    ),
    (f"https://example.com/api;token={SAS_TOKEN}", SAS_TOKEN, "token"),
    (f"gh secret set API_KEY --body {GH}", GH, "secret"),
    (f'gh secret set API_KEY -b"{GH}" --repo o/r', GH, "secret"),
    (f"gh secret set DEPLOY_TOKEN --env prod --body={GH}", GH, "secret"),
    (f"echo {GH} | gh secret set DEPLOY_TOKEN", GH, "secret"),
    (f"printf %s '{GH}' | npx wrangler secret put API_KEY", GH, "secret"),
    (f"az keyvault secret set --vault-name v --name db-password --value {GH}", GH, "secret"),
    (f"SAS token: ?{QUERY}{SIG}", SIG, "url_signature"),
    (f"AZURE_STORAGE_SAS_TOKEN={QUERY}{SIG}", SIG, "url_signature"),
    (f'export AZURE_SAS="?{QUERY}{SIG2}"', SIG2, "url_signature"),
    (
        f"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20260101T000000Z&X-Amz-Signature={AMZ}",
        AMZ,
        "url_signature",
    ),
]


def pieces(secret: str) -> list[str]:
    """The runs of 5+ letters and digits in ``secret``: none of them may be left."""
    return [p for p in "".join(ch if ch.isalnum() else " " for ch in secret).split() if len(p) >= 5]


@pytest.mark.parametrize(("text", "secret", "kind"), LEAKS)
def test_the_whole_value_is_redacted(text: str, secret: str, kind: str) -> None:
    counts: Counter[str] = Counter()
    out = redact_secrets(text, counts)
    assert counts[kind] >= 1, out
    assert not [p for p in pieces(secret) if p in out], out
    again: Counter[str] = Counter()
    assert redact_secrets(out, again) == out and not again  # idempotent


def test_what_follows_the_value_is_kept() -> None:
    out = redact_secrets(f"  export DB_PASSWORD={PW_SEMI}\nDEBUG=1")
    assert out == "  export DB_PASSWORD=[REDACTED:password]\nDEBUG=1"
    out = redact_secrets(f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKey={SAS};EntityPath=q")
    assert out.endswith(";SharedAccessKey=[REDACTED:secret];EntityPath=q"), out
    # A query string at the start of a line is no ``.env`` value: its next parameter is kept.
    assert redact_secrets(f"access_token={rand(24)}&scope=repo") == "access_token=[REDACTED:token]&scope=repo"


KEPT = [
    "TOKEN_FILE=/run/secrets/token",
    "PASSWORD_FILE=./secrets/db.txt",
    "https://example.com/login/password_reset/done",
    "https://example.com/a=b/c/d",
    "the sig= parameter is the HMAC; sig=short stays",
    "git log --show-signature=true",
    "&signature=see-the-docs",
    "gh variable set REGION --body us-east-1",
    "gh secret set API_KEY < key.txt",
    "echo done | tee log.txt",
]


@pytest.mark.parametrize("text", KEPT)
def test_plain_values_are_kept(text: str) -> None:
    counts: Counter[str] = Counter()
    assert redact_secrets(text, counts) == text and not counts


def stored(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((home / "memory").rglob("*.md")) if p.is_file())


TEXT = (
    "prod settings:\n"
    f"SECRET_KEY={DJANGO}\n"
    f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={SAS}\n"
    f"backups: ?{QUERY}{SIG}\n"
)
SECRETS = pieces(DJANGO) + pieces(SAS) + pieces(SIG)


def test_cli_remember_stores_neither_value(tmp_home: Path) -> None:
    exe = Path(sys.executable).parent / "coffer"
    env = {**os.environ, "COFFER_HOME": str(tmp_home)}
    r = subprocess.run(
        [str(exe), "remember", "--global", "-"],
        input=TEXT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    data = stored(tmp_home)
    assert b"prod settings" in data
    assert not [p for p in SECRETS if p.encode() in data]


def test_rest_remember_stores_neither_value(tmp_home: Path) -> None:
    exe = Path(sys.executable).parent / "coffer-api"
    server = Served([str(exe)], {**os.environ, "COFFER_HOME": str(tmp_home)})
    with server, httpx.Client(base_url=server.base, timeout=60) as client:
        r = client.post("/api/v1/memory_stores/global/facts", json={"text": TEXT})
        assert r.status_code == 201, r.text
        assert r.json()["redacted"] == {"secret": 2, "url_signature": 1}
    data = stored(tmp_home)
    assert b"prod settings" in data
    assert not [p for p in SECRETS if p.encode() in data]
