"""Scrubber leftovers helper secrets29 found (secrets29b, session 29): a secret given to a
secrets command through a here-string, a pipe or its own ``key=value`` pairs; SOPS ciphertext
refused as a secret; a ``.env`` prefix that took the command after it for its value.

Each case goes through the write path (``MemoryService.remember`` on a real temp home, whose
check is the scrubber's ``redact_secrets``) and through ``scrub_text``. Fake secrets are
generated at run time: no literal here has the shape of a live credential.
"""

from __future__ import annotations

import base64
import random
import string
from pathlib import Path

import pytest

from coffer_memory import MemoryRejected, MemoryService
from coffer_memory._transcripts.scrub import redact_secrets, scrub_text

_RNG = random.Random(29290)
ALNUM = string.ascii_letters + string.digits


def _r(n: int) -> str:
    while True:
        s = "".join(_RNG.choice(ALNUM) for _ in range(n))
        if any(c.isdigit() for c in s) and any(c.isupper() for c in s) and any(c.islower() for c in s):
            return s


def _b64(n: int) -> str:
    return base64.b64encode(_RNG.randbytes(n)).decode()


X = _r(22)

# A secret handed to a command that stores it; the command's shape must stay.
SECRET_COMMANDS: dict[str, tuple[str, str]] = {
    "gcloud_here_string": (
        f"gcloud secrets versions add NAME --data-file=- <<< '{X}'",
        "gcloud secrets versions add NAME --data-file=- <<< '",
    ),
    "gcloud_pipe": (
        f"echo -n '{X}' | gcloud secrets versions add NAME --data-file=-",
        " | gcloud secrets versions add NAME --data-file=-",
    ),
    "gcloud_create_pipe": (
        f"printf '{X}' | gcloud secrets create NAME --data-file=-",
        "gcloud secrets create",
    ),
    "aws_secret_string": (
        f"aws secretsmanager put-secret-value --secret-id app --secret-string {X}",
        "aws secretsmanager put-secret-value --secret-id app --secret-string ",
    ),
    "kubectl_from_literal": (
        f"kubectl create secret generic app --from-literal=api-key={X} --from-literal=user=admin",
        "kubectl create secret generic app --from-literal=api-key=",
    ),
    "kubectl_from_literal_second": (
        f"kubectl create secret generic app --from-literal=user=admin --from-literal k={X}",
        "kubectl create secret generic app --from-literal=user=",
    ),
    "docker_secret_printf": (
        f"printf {X} | docker secret create app_key -",
        " | docker secret create app_key -",
    ),
    "vault_kv_put": (f"vault kv put secret/app key={X} user=admin", "vault kv put secret/app key="),
    "vault_kv_put_second": (
        f"vault kv put -mount=secret app user=admin value={X}",
        "vault kv put -mount=secret app user=",
    ),
    "gh_body": (f"gh secret set NAME --body {X}", "gh secret set NAME --body "),
    "gh_here_string": (f"gh secret set NAME <<< {X}", "gh secret set NAME <<< "),
    "gh_here_string_quoted": (f'gh secret set NAME <<< "{X}"', 'gh secret set NAME <<< "'),
}


@pytest.mark.parametrize("case", SECRET_COMMANDS)
def test_a_secret_given_to_a_secrets_command_is_redacted(tmp_home: Path, case: str) -> None:
    text, shape = SECRET_COMMANDS[case]
    with MemoryService(tmp_home) as svc:
        body = svc.remember(text, scope="global").fact.body
    assert X not in body and shape in body and "[REDACTED:" in body, body
    out, counts = scrub_text(text)
    assert X not in out and shape in out and counts, out


@pytest.mark.parametrize("case", ["gcloud_here_string", "vault_kv_put", "kubectl_from_literal"])
def test_a_secret_given_to_a_secrets_command_is_refused_in_reject_mode(tmp_home: Path, case: str) -> None:
    tmp_home.mkdir(parents=True)
    (tmp_home / "config.toml").write_text('[security]\nsecrets = "reject"\n')
    with MemoryService(tmp_home) as svc, pytest.raises(MemoryRejected) as caught:
        svc.remember(SECRET_COMMANDS[case][0], scope="global")
    assert caught.value.reason == "secret"


# Said about a secrets command, with no secret in it: kept.
COMMANDS_KEPT = [
    "vault kv put secret/app key=@data.json",
    "vault kv put secret/app key=-",
    "kubectl create configmap app --from-literal=mode=production",
    "kubectl create secret generic app --from-file=key=./key.pem",
    "gcloud secrets versions add NAME --data-file=./secret.txt",
]


@pytest.mark.parametrize("text", COMMANDS_KEPT)
def test_a_secrets_command_without_a_secret_is_kept(text: str) -> None:
    assert redact_secrets(text) == text


def _sops() -> str:
    return f"ENC[AES256_GCM,data:{_b64(120)},iv:{_b64(32)},tag:{_b64(16)},type:str]"


SOPS_LINES = {
    "yaml_password": f"db_password: {_sops()}",
    "env_line": f"API_TOKEN={_sops()}",
    "json": f'{{"api_key": "{_sops()}"}}',
    "bare": f"the file now holds {_sops()} for the key",
}


@pytest.mark.parametrize("case", SOPS_LINES)
def test_sops_ciphertext_is_kept_in_reject_mode(tmp_home: Path, case: str) -> None:
    text = SOPS_LINES[case]
    tmp_home.mkdir(parents=True)
    (tmp_home / "config.toml").write_text('[security]\nsecrets = "reject"\n')
    with MemoryService(tmp_home) as svc:
        r = svc.remember(text, scope="global")
        assert r.fact.body.strip() == text
    assert redact_secrets(text) == text
    assert scrub_text(text) == (text, {})


def test_a_plain_long_base64_secret_is_still_an_encoded_blob(tmp_home: Path) -> None:
    blob = _b64(120)
    for text in (f"the key is {blob} ok", f"ENC[{blob}]", f"data:{blob},iv:x"):
        out, counts = scrub_text(text)
        assert blob not in out and counts.get("encoded_blob") == 1, out
    tmp_home.mkdir(parents=True)
    (tmp_home / "config.toml").write_text('[security]\nsecrets = "reject"\n')
    with MemoryService(tmp_home) as svc, pytest.raises(MemoryRejected):
        svc.remember(f"ENC[{blob}]", scope="global")


@pytest.mark.parametrize(
    "command",
    [
        "flask run",
        "uvicorn app:app --reload",
        "gunicorn app:app",
        "celery -A app worker",
        "pytest -q",
        "streamlit run app.py",
        "jest --watch",
        "rspec spec",
        "hugo server",
    ],
)
def test_an_env_prefix_keeps_the_program_it_is_set_for(tmp_home: Path, command: str) -> None:
    text = f"SECRET_KEY={X} {command}"
    with MemoryService(tmp_home) as svc:
        body = svc.remember(text, scope="global").fact.body
    assert body.strip() == f"SECRET_KEY=[REDACTED:secret] {command}"
    assert scrub_text(text)[0] == f"SECRET_KEY=[REDACTED:secret] {command}"


@pytest.mark.parametrize(
    "text",
    [
        "DB_PASSWORD=correct horse battery staple",
        "export API_TOKEN=stone tablet orbit 42",
        "PASSPHRASE=my bright orbit go # rotated",
    ],
)
def test_an_env_value_with_blanks_still_loses_the_whole_line(text: str) -> None:
    out = redact_secrets(text)
    tail = text.split("=", 1)[1].split(" #")[0]
    assert all(word not in out for word in tail.split()), out


def test_a_secret_dressed_as_the_head_of_a_sops_value_is_still_redacted() -> None:
    text = f"db_password: ENC[AES256_GCM,data:{X}]"
    assert X not in redact_secrets(text) and X not in scrub_text(text)[0]
