"""Secrets session 28 found kept, and public material it found refused (review29, session 29).

Each case goes through the write path (``MemoryService.remember`` and the ``coffer`` CLI on a
real temp home, whose check is the scrubber's ``redact_secrets``) and through ``scrub_text``,
which every message of a distilled transcript goes through. Fake secrets are generated at run
time from split prefixes: no literal here has the shape of a live credential.
"""

from __future__ import annotations

import base64
import json
import random
import string
from pathlib import Path
from typing import Any

import pytest
from agent_samples import AgentSamples, build
from conftest import make_repo
from http_scripted import answer, serve

from coffer_memory import MemoryRejected, MemoryService
from coffer_memory._transcripts.scrub import redact_secrets, scrub_text

ALNUM = string.ascii_letters + string.digits
_RNG = random.Random(2929)


def _r(n: int, alphabet: str = ALNUM) -> str:
    while True:
        s = "".join(_RNG.choice(alphabet) for _ in range(n))
        if any(c.isdigit() for c in s) and any(c.isupper() for c in s) and any(c.islower() for c in s):
            return s


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


PW = _r(14)
AZ_KEY = _b64(_RNG.randbytes(64))
HF_ORG = "_org_" + _r(34)
KERB = base64.b32encode(_RNG.randbytes(32)).decode().rstrip("=")

# (text, the part that must not survive)
GAPS: dict[str, tuple[str, str]] = {
    "url_password_slash": (f"postgres://app:ab/{PW}@db.internal:5432/app", PW),
    "url_password_slash_short": ("see https://u:p/q" + "Zr9@x.com/docs now", "p/qZr9"),
    "pgpass": (f"db.example.com:5432:appdb:appuser:{PW}", PW),
    "pgpass_echo": (f"echo 'localhost:5432:mydb:app:{PW}' >> ~/.pgpass && chmod 600 ~/.pgpass", PW),
    "pgpass_wildcards": (f"*:*:*:postgres:{PW}\\:x9", PW),
    "odbc_braces": (
        f"Driver={{ODBC Driver 18}};Server=tcp:db,1433;Uid=sa;Pwd={{a;{PW}}}}}z}};Encrypt=yes",
        PW,
    ),
    "odbc_braces_upper": (f'conn = "DRIVER={{SQL Server}};UID=sa;PWD={{{PW} ; q}}"', PW),
    "env_blanks": ("DB_PASSWORD=correct horse battery staple\nDEBUG=1", "horse battery staple"),
    "env_blanks_export": ("export API_TOKEN=stone " + "tablet" + " orbit 42\n", "tablet orbit 42"),
    "az_keys_json": (
        json.dumps(
            [
                {
                    "creationTime": "2024-05-01T10:00:00Z",
                    "keyName": "key1",
                    "permissions": "FULL",
                    "value": KERB,
                },
                {
                    "creationTime": "2024-05-01T10:00:00Z",
                    "keyName": "key2",
                    "permissions": "FULL",
                    "value": KERB,
                },
            ],
            indent=2,
        ),
        KERB,
    ),
    "az_keys_bare": (f"key1: {AZ_KEY[:70]}\nkey2: {KERB}", KERB),
    "az_keys_bare_trimmed": (f"key1: {AZ_KEY[:70]}", AZ_KEY[:70]),
    "ssm_value": (f"aws ssm put-parameter --name /prod/db/pw --value {PW} --type SecureString", PW),
    "ssm_value_eq": (f"aws ssm put-parameter --name /prod/db/pw --type String --value={PW}", PW),
    "ssm_value_quoted": (
        f"aws ssm put-parameter \\\n  --name /prod/db/pw \\\n  --value 'blue {PW} sky' --overwrite",
        f"blue {PW} sky",
    ),
    "hf_org_token": (f'HF_ORG=api{HF_ORG} and in JSON {{"hub": "api{HF_ORG}"}}', HF_ORG),
}


def _found(r: object) -> dict[str, int]:
    receipt = getattr(r, "receipt", None)
    return dict(receipt.findings) if receipt is not None else {}


def _stored(svc: MemoryService) -> str:
    return "".join(p.read_text() for p in sorted(svc.settings.memory_dir.rglob("*.md")))


@pytest.mark.parametrize("case", GAPS)
def test_a_secret_typed_into_a_memory_is_redacted(svc: MemoryService, case: str) -> None:
    text, core = GAPS[case]
    r = svc.remember(text, scope="global")
    assert _found(r), (case, r.fact.body)
    assert core not in _stored(svc), _stored(svc)


@pytest.mark.parametrize("case", GAPS)
def test_a_secret_in_a_transcript_message_is_redacted(case: str) -> None:
    text, core = GAPS[case]
    out, counts = scrub_text(text)
    assert core not in out and counts, out
    assert scrub_text(out) == (out, {})  # idempotent


def test_the_cli_redacts_a_url_password_holding_a_slash(cli: Any, tmp_home: Path) -> None:
    text, core = GAPS["url_password_slash"]
    out = cli("remember", text, "--global", "--json")
    assert out.returncode == 0, out.stderr
    stored = "".join(p.read_text() for p in (tmp_home / "memory").rglob("*.md"))
    assert core not in stored and core not in out.stdout and "[REDACTED:url_credentials]" in stored


# Things that look like a secret's surroundings but are not secrets.
_IMG = _b64(b"\x89PNG\r\n\x1a\n" + _RNG.randbytes(600))
_PUB = _b64(_RNG.randbytes(420))
_CERT_PEM = "-----BEGIN CERTIFICATE-----\n" + _PUB[:64] + "\n-----END CERTIFICATE-----\n"
_N, _D = (base64.urlsafe_b64encode(_RNG.randbytes(256)).decode().rstrip("=") for _ in range(2))
_SSH_RSA = "ssh-" + "rsa " + _b64(b"\x00\x00\x00\x07ssh-rsa" + _RNG.randbytes(270)) + " dev@laptop"
KEPT = {
    "data_uri_image": f'<img src="data:image/png;base64,{_IMG}" alt="logo">',
    "markdown_image": f"The logo: ![logo](data:image/webp;base64,{_IMG})",
    "pgp_public_block": "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n"
    + "\n".join(_PUB[i : i + 64] for i in range(0, len(_PUB), 64))
    + "\n=Xq2b\n-----END PGP PUBLIC KEY BLOCK-----",
    "pgp_public_one_line": "gpg key: -----BEGIN PGP PUBLIC KEY BLOCK----- "
    + _PUB
    + " -----END PGP PUBLIC KEY BLOCK-----",
    "ssh_rsa_public": "authorized_keys holds " + _SSH_RSA,
    "certificate_b64": "certificate-authority-data: " + _b64(_CERT_PEM.encode()),
    "jwk_public": json.dumps({"keys": [{"kty": "RSA", "kid": "k1", "use": "sig", "n": _N, "e": "AQAB"}]}),
    "url_path": "https://example.com/a/b:c/d@e and git@github.com:org/repo.git, http://host:8080/x/y@v1",
    "url_port_path_at": "https://registry.example.com:443/npm/@scope/pkg and https://h:8080/p/q@latest",
    "env_prefix_command": "DB_PASSWORD=$DB_PASSWORD npm run migrate\nAPI_TOKEN=$T coffer-api --port 8080",
    "fstring_braces": 'cases = [("export_token", f"export X_TOKEN={(s := r(30))}", s)]',
    "times": "10:20:30:40:50 and 00:11:22:33:44:55\n10:20:30:40:5060\necho '10:20:30:40:5060'",
    "key1_placeholder": "key1: value1\nkey2: value2",
    "odbc_template": 'f"Driver={{ODBC}};Uid=sa;Pwd={password};"',
    "result_table": "| Pass | Fail |\n|---|---|\n| 1234 | 7 |\n\n| pass | 1234 |\n| pw | abcdef |",
    "jsx_braces": "<Login token={user.token} />\n  password={form.password}\n",
    "ssm_file_value": "aws ssm put-parameter --name /app/cfg --value file://params.json --type String",
    "gh_secret_from_file": "gh secret set DEPLOY_KEY < key.pem",
}


@pytest.mark.parametrize("case", KEPT)
def test_public_material_is_kept_in_reject_mode(tmp_home: Path, case: str) -> None:
    tmp_home.mkdir(parents=True)
    (tmp_home / "config.toml").write_text('[security]\nsecrets = "reject"\n')
    with MemoryService(tmp_home) as svc:
        r = svc.remember(KEPT[case], scope="global")
        assert not _found(r) and r.fact.body.strip() == KEPT[case].strip()
    assert redact_secrets(KEPT[case]) == KEPT[case]


@pytest.mark.parametrize("case", ["data_uri_image", "markdown_image", "ssh_rsa_public", "certificate_b64"])
def test_public_material_in_a_transcript_is_no_secret(case: str) -> None:
    out, counts = scrub_text(KEPT[case])
    if case in ("ssh_rsa_public", "certificate_b64"):
        assert out == KEPT[case] and not counts
    else:  # an image's base64 is bulk, not a secret: dropped from a transcript under its own kind
        assert counts == {"encoded_image": 1} and _IMG[:40] not in out and "data:image/" in out, out
        assert scrub_text(out) == (out, {})


def test_pgp_private_blocks_and_encoded_private_keys_are_still_refused(tmp_home: Path) -> None:
    body = "\n".join(_PUB[i : i + 64] for i in range(0, len(_PUB), 64))
    private = "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n" + body + "\n-----END PGP PRIVATE KEY BLOCK-----"
    key_pem = "-----BEGIN " + "PRIVATE KEY-----\n" + _PUB[:64] + "\n-----END PRIVATE KEY-----\n"
    kubeconfig = "client-key-data: " + _b64(key_pem.encode())
    data_json = "data:application/json;base64," + _b64(json.dumps({"token": _r(40)}).encode() * 4)
    tmp_home.mkdir(parents=True)
    (tmp_home / "config.toml").write_text('[security]\nsecrets = "reject"\n')
    with MemoryService(tmp_home) as svc:
        jwk_private = json.dumps({"kty": "RSA", "n": _N, "e": "AQAB", "d": _D})
        for text in (private, kubeconfig, data_json, jwk_private):
            with pytest.raises(MemoryRejected) as caught:
                svc.remember(text, scope="global")
            assert caught.value.reason == "secret", text
    assert _PUB[:40] not in redact_secrets(private) and _PUB[:40] not in scrub_text(private)[0]


def _session_with(samples: AgentSamples, text: str) -> str:
    """A Claude Code session in the sample project whose user turn is ``text``."""
    session_id = "29aa0a0a-1111-4222-8333-444455556666"
    folder = Path(samples.env["CLAUDE_CONFIG_DIR"]) / "projects" / "-review29-secrets"
    folder.mkdir(parents=True)
    base = {"cwd": str(samples.project_dir), "sessionId": session_id, "timestamp": "2026-12-05T02:00:00.000Z"}
    lines = [
        {**base, "type": "user", "uuid": "u1", "message": {"role": "user", "content": text}},
        {
            **base,
            "type": "assistant",
            "uuid": "u2",
            "parentUuid": "u1",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "stored, thanks"}]},
        },
    ]
    (folder / f"{session_id}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return session_id


def test_the_distiller_never_sends_these_secrets_to_the_model(
    tmp_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole way of a distillation: the agent's session file, the reader, the scrubber, the
    request to the model (a real HTTP server on 127.0.0.1)."""
    samples = build(tmp_path / "agents", project_dir=make_repo(tmp_path / "work" / "demo-repo"))
    for key, value in samples.env.items():
        if key != "HOME":
            monkeypatch.setenv(key, value)
    text = "Notes from the ops call, in prose:\n\n" + "\n\nand also\n\n".join(t for t, _ in GAPS.values())
    session_id = _session_with(samples, text)
    insight = {"name": "ops-call", "description": "What the ops call decided.", "body": "Rotate the keys."}
    usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    for server in serve(monkeypatch, answer(json.dumps({"insights": [insight]}), usage=usage)):
        tmp_home.mkdir(parents=True, exist_ok=True)
        (tmp_home / "config.toml").write_text(
            f'[llm]\nprovider = "openai"\nmodel = "test-chat"\nbase_url = "{server.url}"\nmax_retries = 0\n'
        )
        with MemoryService(tmp_home) as svc:
            assert svc.distill_session("claude-code", session_id).status == "distilled"
        sent = "".join(json.dumps(seen.body) for seen in server.requests)
        assert "ops call" in sent
        leaked = [case for case, (_t, core) in GAPS.items() if core in sent or json.dumps(core)[1:-1] in sent]
        assert not leaked, leaked


@pytest.mark.parametrize(
    "command",
    ["npm run migrate", "./run.sh --fast", "coffer-api --port 8080", "DEBUG=1 make test", "&& make deploy"],
)
def test_an_env_prefix_keeps_the_command_it_is_set_for(command: str) -> None:
    assert redact_secrets(f"API_TOKEN={PW} {command}") == f"API_TOKEN=[REDACTED:token] {command}"
