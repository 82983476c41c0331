"""Secrets with no key name in front of them (attack6, session 14): a password said in prose,
``pw=``, a private key whose header is wrapped or whose BEGIN line is in another message; and
the prose about passwords that must stay as typed. AWS's documentation keys are left alone by
the scrubber and by ``remember``'s check alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from coffer_memory import MemoryService, redact_secrets
from coffer_memory._transcripts.scrub import scrub_text

PW = "k8Vq2mZx7Lw4"
BODY = "\n".join(("MIIEowIBAAKCAQEA7q" + "x" * 46, "Zm9vYmFyYmF6cXV4" * 4, "c2VjcmV0c2VjcmV0" * 4))


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("the vpn password is periwinkle", "periwinkle"),
        ("btw the jenkins password for staging is cobblestone.", "cobblestone"),
        ("the shared password was changed to 'quicksilver' yesterday", "quicksilver"),
        ("the kiosk password is nightingale, ask before using it", "nightingale"),
        (f"the backup password has been set to {PW}", PW),
        (f"the API key {PW}Qe93Hs0b expired", f"{PW}Qe93Hs0b"),
        (f"pw={PW}", PW),
        (f"ssh in with pw: {PW}", PW),
        (f"SMTP_PW={PW}", PW),
        (f'{{"pw": "{PW}"}}', PW),
        ("Authorization: Bearer qwertyuiopasdfghjklzxcvbnm", "qwertyuiopasdfghjklzxcvbnm"),
    ],
)
def test_a_secret_without_a_key_name_is_redacted(text: str, secret: str) -> None:
    out = redact_secrets(text)
    assert secret not in out and "[REDACTED:" in out


@pytest.mark.parametrize(
    "text",
    [
        "reset your password in settings",
        "the password is required.",
        "the password is incorrect, try again",
        "the vpn password is shared with the ops team",
        "the password is case-sensitive",
        "the password is encrypted at rest.",
        "my password is expired",
        "the password is the same as last year",
        "the token is stale.",
        "the API key is project-scoped",
        "the password is in the DB_PASSWORD variable",
        "the password is DB_PASSWORD.",
        "pw is short for password",
        "if (password is nullptr)",
        "the password was truthy",
        "PW_DIR=/var/lib/pw",
        "the API wants an Authorization: Basic header",
        "send Authorization: Bearer tokens only over TLS",
        "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
        "-----END PRIVATE KEY----- closes the block",
    ],
)
def test_prose_about_passwords_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == text


@pytest.mark.parametrize(
    "text",
    [
        f"-----BEGIN RSA PRIVATE\nKEY-----\n{BODY}\n-----END RSA PRIVATE KEY-----",
        f"-----BEGIN\nOPENSSH PRIVATE KEY-----\n{BODY}\n-----END OPENSSH PRIVATE KEY-----",
        # The second half of a key whose BEGIN line was in an earlier message.
        f"and the rest of it:\n{BODY}\n-----END PRIVATE KEY-----\nthanks",
        "\n".join(f'"{line}\\n"' for line in BODY.split("\n")) + '\n"-----END EC PRIVATE KEY-----\\n"',
        "\n".join(f"> {line}" for line in BODY.split("\n")) + "\n> -----END PRIVATE KEY-----",
    ],
)
def test_a_private_key_split_over_lines_or_messages_is_redacted(text: str) -> None:
    out = redact_secrets(text)
    assert all(line not in out for line in BODY.split("\n")), out
    assert "[REDACTED:private_key]" in out


AWS_DOC_ID = "AKIA" + "IOSFODNN7" + "EXAMPLE"
AWS_DOC_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCY" + "EXAMPLEKEY"
NOTE = f"from the AWS docs: aws_access_key_id = {AWS_DOC_ID}\naws_secret_access_key = {AWS_DOC_SECRET}"


def test_aws_documentation_keys_are_left_alone_by_the_scrubber() -> None:
    assert redact_secrets(NOTE) == NOTE
    assert scrub_text(NOTE)[0] == NOTE
    # A real-shaped key beside them is still redacted.
    real = "AKIA" + "Q5RS7TU9VW1XY3ZA"
    assert real not in redact_secrets(f"{NOTE}\nreal: {real}")


@pytest.mark.parametrize("policy", ["redact", "reject"])
def test_remember_keeps_a_note_quoting_aws_docs_under_either_policy(tmp_home: Path, policy: str) -> None:
    tmp_home.mkdir(parents=True)
    (tmp_home / "config.toml").write_text(f'[security]\nsecrets = "{policy}"\n')
    with MemoryService(tmp_home) as svc:
        r = svc.remember(NOTE, scope="global")
        assert AWS_DOC_ID in r.fact.body and AWS_DOC_SECRET in r.fact.body


def test_remember_redacts_a_password_said_in_prose(svc: MemoryService) -> None:
    r = svc.remember("the staging vpn password is periwinkle", scope="global")
    assert "periwinkle" not in r.fact.body and "[REDACTED:password]" in r.fact.body
