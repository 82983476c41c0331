"""Scrubber leftovers session 29 found, and shell secrets it did not try (secrets30, session 30).

Over-redaction (the user loses words they typed: a command after a ``.env`` prefix, a vault
pair's ``ttl``, a secret's name, a bare base64 image) and leaks (a passphrase whose second word
names a program, passwords given to ``redis-cli``, ``sqlcmd``, ``ldapsearch``, ``htpasswd``,
HTTPie, ``az login`` and a quoted ``curl -u``). Each case goes through the write path
(``MemoryService.remember`` on a real temp home, whose check is the scrubber's
``redact_secrets``) and through ``scrub_text``. Fake secrets are generated at run time: no literal
here has the shape of a live credential.
"""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest

from coffer_memory import MemoryService
from coffer_memory._transcripts.scrub import redact_secrets, scrub_text

_RNG = random.Random(3030)
ALNUM = string.ascii_letters + string.digits


PW = "".join(_RNG.choices(ALNUM, k=13)) + "a1Z"  # mixed case and digits, as a generated value


def _remembered(tmp_home: Path, text: str) -> str:
    with MemoryService(tmp_home) as svc:
        return svc.remember(text, scope="global").fact.body.strip()


def _reject_mode(tmp_home: Path) -> None:
    tmp_home.mkdir(parents=True)
    (tmp_home / "config.toml").write_text('[security]\nsecrets = "reject"\n')


# A ``.env``-style prefix and the command it is set for: only the value goes.
ENV_PREFIX_COMMANDS = [
    ("DB_PASSWORD={pw} mytool --run", "DB_PASSWORD=[REDACTED:password] mytool --run"),
    ("PGPASSWORD={pw} psql -h localhost -U app", "PGPASSWORD=[REDACTED:password] psql -h localhost -U app"),
    ("API_TOKEN={pw} deploy-it prod/web", "API_TOKEN=[REDACTED:token] deploy-it prod/web"),
    (
        "SECRET_KEY={pw} ./manage runserver 0.0.0.0:8000",
        "SECRET_KEY=[REDACTED:secret] ./manage runserver 0.0.0.0:8000",
    ),
    ("export AUTH_TOKEN={pw} && mytool sync", "export AUTH_TOKEN=[REDACTED:token] && mytool sync"),
    ("GH_TOKEN={pw} mytool release v1.2.0", "GH_TOKEN=[REDACTED:token] mytool release v1.2.0"),
]


# Passphrases with blanks, some holding the name of a program: every word goes.
PASSPHRASES = [
    "PASSPHRASE=correct git battery staple",
    "GPG_PASSPHRASE=correct make battery staple # rotated",
    "export SSH_KEY_PASSPHRASE=amber npm lantern 42",
    "DB_PASSWORD=correct horse battery staple",
    "export API_TOKEN=stone tablet orbit 42",
]


@pytest.mark.parametrize("text", PASSPHRASES)
def test_a_passphrase_with_blanks_loses_every_word(tmp_home: Path, text: str) -> None:
    key, value = text.split("=", 1)
    words = value.split(" #")[0].split()
    for out in (_remembered(tmp_home, text), scrub_text(text)[0]):
        assert all(word not in out.split("=", 1)[1].split("#")[0].split() for word in words), out
        assert out.startswith(key + "=[REDACTED:"), out
        assert ("# rotated" in out) == ("# rotated" in text)


def test_a_secret_key_before_a_listed_program_still_keeps_the_program() -> None:
    assert redact_secrets(f"SECRET_KEY={PW} flask run") == "SECRET_KEY=[REDACTED:secret] flask run"
    assert redact_secrets(f"API_TOKEN={PW} npm start") == "API_TOKEN=[REDACTED:token] npm start"


# The pairs of a secrets command: the secret values go, the settings stay.
VAULT_PAIRS = [
    (
        f"vault kv put secret/app password={PW} ttl=30m",
        "vault kv put secret/app password=[REDACTED:password] ttl=30m",
    ),
    (
        f"vault kv put secret/app value={PW} ttl=768h",
        "vault kv put secret/app value=[REDACTED:secret] ttl=768h",
    ),
    (
        f"vault kv put -mount=secret app api_key={PW} enabled=true",
        "vault kv put -mount=secret app api_key=[REDACTED:api_key] enabled=true",
    ),
    (
        f"kubectl create secret generic app --from-literal=token={PW} --from-literal=ttl=1h",
        "kubectl create secret generic app --from-literal=token=[REDACTED:token] --from-literal=ttl=1h",
    ),
]


@pytest.mark.parametrize(("text", "expected"), ENV_PREFIX_COMMANDS + VAULT_PAIRS)
def test_only_the_secret_goes(tmp_home: Path, text: str, expected: str) -> None:
    """A command after a ``.env``-style prefix, and the settings among a secrets command's pairs, stay."""
    text = text.format(pw=PW)
    assert _remembered(tmp_home, text) == expected
    assert scrub_text(text)[0] == expected


def test_a_secrets_command_still_loses_a_value_under_any_name() -> None:
    out = redact_secrets(f"vault kv put secret/db root={PW} note=swordfish")
    assert PW not in out and "swordfish" not in out and out.startswith("vault kv put secret/db root=")


# A secret's name, given to a command that reads the secret: no secret in it.
SECRET_NAMES = [
    "gcloud secrets versions access latest --secret=my-db-password",
    "gcloud secrets versions access 3 --secret prod_api_token --project acme",
    "docker build --secret id=npmrc,src=$HOME/.npmrc -t app .",
    "docker buildx build --secret id=gh_token,env=GH_TOKEN -t app .",
]


@pytest.mark.parametrize("text", SECRET_NAMES)
def test_a_secret_name_is_kept(tmp_home: Path, text: str) -> None:
    _reject_mode(tmp_home)
    assert _remembered(tmp_home, text) == text
    assert redact_secrets(text) == text and scrub_text(text) == (text, {})


def test_a_secret_given_by_the_secret_flag_is_still_redacted() -> None:
    for text in (
        f"jwt encode --secret {PW} payload.json",
        f"gcloud secrets versions access latest --secret={PW}",
    ):
        assert PW not in redact_secrets(text), text
