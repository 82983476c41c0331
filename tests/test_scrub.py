"""The transcript scrubber: secrets, pasted output and files, truncation, the transcript cap.

Every fake secret here is assembled at run time from pieces (or from a seeded random generator),
so that no file in the repository holds a secret-shaped literal for a scanner to flag.
"""

from __future__ import annotations

import random
import re
import string
from datetime import UTC, datetime

import pytest

from coffer_memory._transcripts.models import Message, SessionSummary, Transcript
from coffer_memory._transcripts.scrub import (
    KEEP_CODE_MAX_LINES,
    MIN_SEGMENT_CHARS,
    ScrubReport,
    redact_secrets,
    scrub_text,
    scrub_transcript,
)

FENCE = "`" * 3
ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
UPPER_DIGITS = string.ascii_uppercase + string.digits

_RNG = random.Random(20261120)


def _rand(alphabet: str, n: int, rng: random.Random = _RNG) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _pem(label: str, body_lines: int = 4, *, end: bool = True) -> str:
    head = "-----BEGIN " + (label + " " if label else "") + "PRIVATE" + " KEY-----"
    tail = "-----END " + (label + " " if label else "") + "PRIVATE" + " KEY-----"
    body = [_rand(B64, 64) for _ in range(body_lines)]
    return "\n".join([head, *body, *([tail] if end else [])])


def _jwt(rng: random.Random = _RNG) -> str:
    header, payload = "ey" + "J" + _rand(B64URL, 30, rng), "ey" + "J" + _rand(B64URL, 40, rng)
    return header + "." + payload + "." + _rand(B64URL, 43, rng)


def _aws_secret() -> str:
    # Shaped like the AWS documentation's example pair, which is left alone (docs/security.md).
    return "wJalrXUtnFEMI/K7MDENG" + "/bPxRfiCY" + "q7Zt2Wd9Xm"


def _aws_key_id() -> str:
    return "AK" + "IA" + "IOSFODNN7" + "Q5ZT3WX"


def _password() -> str:
    return "hun" + "ter2-" + "Correct-Horse-9"


# (kind, secret, text with {s} where the secret goes). Built once, at import, from pieces.
KIND_CASES: list[tuple[str, str, str]] = [
    ("aws_access_key_id", _aws_key_id(), "the key id {s} is in ~/.aws/credentials"),
    ("aws_access_key_id", "AS" + "IA" + _rand(UPPER_DIGITS, 16), "session key ({s}) expired"),
    ("aws_secret_access_key", _aws_secret(), "aws_secret_access_key = {s}"),
    ("aws_secret_access_key", _aws_secret(), "AWS_SECRET_ACCESS_KEY: {s}"),
    ("aws_secret_access_key", _aws_secret(), "and the secret is `{s}` I think"),
    ("github_token", "gh" + "p_" + _rand(ALNUM, 36), "CI uses {s} for releases"),
    ("github_token", "gh" + "o_" + _rand(ALNUM, 36), "oauth {s}"),
    ("github_token", "gh" + "u_" + _rand(ALNUM, 36), "user-to-server {s}."),
    ("github_token", "gh" + "s_" + _rand(ALNUM, 36), "installation token: {s}"),
    ("github_token", "gh" + "r_" + _rand(ALNUM, 36), "refresh {s}"),
    ("github_token", "github" + "_pat_" + _rand(ALNUM, 22) + "_" + _rand(ALNUM, 59), "the bot uses {s}"),
    ("openai_api_key", "sk" + "-" + _rand(ALNUM, 48), "OPENAI key {s} works"),
    ("openai_api_key", "sk" + "-proj-" + _rand(ALNUM + "_-", 56), 'client = OpenAI(api_key="{s}")'),
    ("anthropic_api_key", "sk" + "-ant-api03-" + _rand(ALNUM + "_-", 93), "claude key {s}"),
    ("slack_token", "xo" + "xb-" + _rand(string.digits, 12) + "-" + _rand(ALNUM, 24), "slack bot {s}"),
    ("slack_token", "xo" + "xp-" + _rand(string.digits, 12) + "-" + _rand(ALNUM, 32), "user token {s}"),
    ("google_api_key", "AI" + "za" + _rand(ALNUM + "_-", 35), "maps key {s} in index.html"),
    ("jwt", _jwt(), "the session cookie was {s}"),
    ("private_key", _pem("RSA"), "old key:\n{s}\ndelete it"),
    ("private_key", _pem("EC"), "{s}"),
    ("private_key", _pem("DSA"), "legacy\n{s}"),
    ("private_key", _pem("OPENSSH"), "ssh key:\n{s}\n(dont commit it)"),
    ("private_key", _pem("ENCRYPTED"), "encrypted one {s} too"),
    ("private_key", _pem(""), "pkcs8:\n\n{s}\n\nthanks"),
    ("private_key", _pem("RSA", end=False), "it was cut off:\n{s}"),
    ("gitlab_token", "gl" + "pat-" + _rand(ALNUM, 20), "gitlab {s}"),
    ("stripe_key", "sk" + "_live_" + _rand(ALNUM, 24), "stripe {s}"),
    ("npm_token", "np" + "m_" + _rand(ALNUM, 36), "//registry.npmjs.org/:_authToken {s}"),
    ("huggingface_token", "h" + "f_" + _rand(ALNUM, 34), "hub {s}"),
    ("bearer_token", _rand(ALNUM, 40), "curl -H 'Authorization: Bearer {s}' https://api.example.com"),
    ("basic_auth", _rand(B64, 28) + "==", "Authorization: Basic {s}"),
    ("url_credentials", "admin:" + _rand(ALNUM, 16), "DATABASE_URL is postgres://{s}@db.internal:5432/app"),
    ("url_credentials", ":" + _rand(ALNUM, 16), "redis://{s}@cache:6379/0"),
]


@pytest.mark.parametrize(("kind", "secret", "template"), KIND_CASES)
def test_every_kind_is_redacted_and_counted(kind: str, secret: str, template: str) -> None:
    out, counts = scrub_text(template.format(s=secret))
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out
    assert counts[kind] == 1
    assert sum(counts.values()) == 1, counts  # one secret, one redaction, nothing else removed


def test_pem_block_is_removed_whole_with_its_body() -> None:
    pem = _pem("RSA", body_lines=6)
    out, counts = scrub_text("before\n" + pem + "\nafter")
    assert out == "before\n[REDACTED:private_key]\nafter"
    assert counts == {"private_key": 1}


def test_unterminated_pem_runs_to_the_end_of_the_text() -> None:
    pem = _pem("OPENSSH", end=False)
    out, _ = scrub_text("here:\n" + pem + "\nand some words that follow the body")
    assert out == "here:\n[REDACTED:private_key]"


def test_json_escaped_pem_is_redacted() -> None:
    pem = _pem("", body_lines=3).replace("\n", "\\n")
    out, counts = scrub_text('{"type": "service_account", "private_key": "' + pem + '\\n"}')
    assert "PRIVATE" not in out and counts == {"private_key": 1}
    assert '"private_key": "[REDACTED:private_key]\\n"' in out


def test_url_credentials_keep_scheme_and_host() -> None:
    userinfo = "deploy:" + _rand(ALNUM, 12)
    out, _ = scrub_text(f"clone https://{userinfo}@git.example.com/team/repo.git please")
    assert out == "clone https://[REDACTED:url_credentials]@git.example.com/team/repo.git please"


# --- key/value assignments: only the value goes --------------------------------------------------

ASSIGNMENT_FORMS: list[tuple[str, str]] = [
    ("DB_PASSWORD={v}", "password"),
    ("export DB_PASSWORD='{v}'", "password"),
    ('POSTGRES_PASSWORD: "{v}"', "password"),
    ("  POSTGRES_PASSWORD: {v}", "password"),
    ("- passwd: {v}", "password"),
    ('{{"password": "{v}", "user": "bob"}}', "password"),
    ('password = "{v}"  # toml', "password"),
    ("psql(password='{v}')", "password"),
    ("$pdo = ['password' => '{v}'];", "password"),
    ("mysqladmin --password {v} status", "password"),
    ("run --password={v}", "password"),
    ("**Password:** {v}", "password"),
    ("token={v}", "token"),
    ("GITHUB_TOKEN: {v}", "token"),
    ('"access_token": "{v}"', "token"),
    ("accessToken: '{v}'", "token"),
    ("https://api.example.com/v1?access_token={v}&page=2", "token"),
    ("secret={v}", "secret"),
    ("client_secret: {v}", "secret"),
    ("SECRET_KEY_BASE={v}", "secret"),
    ("api_key: {v}", "api_key"),
    ("apikey={v}", "api_key"),
    ("x-api-key: {v}", "api_key"),
    ('OPENAI_API_KEY = "{v}"', "api_key"),
    ("api_key: str = '{v}'", "api_key"),
]


@pytest.mark.parametrize(("form", "kind"), ASSIGNMENT_FORMS)
def test_assignment_forms_redact_the_value_only(form: str, kind: str) -> None:
    value = _rand(string.ascii_lowercase, 6) + _rand(string.digits, 3) + _rand(string.ascii_uppercase, 4)
    out, counts = scrub_text(form.format(v=value))
    assert value not in out
    assert out == form.format(v=f"[REDACTED:{kind}]").strip()
    assert counts == {kind: 1}


def test_yaml_block_scalar_value_is_redacted() -> None:
    a, b = _rand(ALNUM, 20), _rand(ALNUM, 20)
    out, counts = scrub_text(f"db:\n  password: |\n    {a}\n    {b}\n  host: db.internal")
    assert a not in out and b not in out
    assert out == "db:\n  password: |\n    [REDACTED:password]\n  host: db.internal"
    assert counts == {"password": 1}


def test_yaml_unquoted_value_with_blanks_is_redacted_whole() -> None:
    words = " ".join(_rand(string.ascii_lowercase, 7) for _ in range(4))
    out, _ = scrub_text(f"- password: {words} # from the vault")
    assert out == "- password: [REDACTED:password] # from the vault"


def test_a_value_does_not_swallow_the_next_assignment() -> None:
    pw, secret = _rand(ALNUM, 12), _rand(ALNUM, 30)
    out, counts = scrub_text(f"ERROR (DB_PASSWORD={pw})(client_secret: {secret}) step failed")
    assert pw not in out and secret not in out
    assert out == "ERROR (DB_PASSWORD=[REDACTED:password])(client_secret: [REDACTED:secret]) step failed"
    assert counts == {"password": 1, "secret": 1}
    # Glued without a parenthesis: the first value stops where the next secret key starts.
    out, counts = scrub_text(f"DB_PASSWORD={pw}~*client_secret: {secret}")
    assert out == "DB_PASSWORD=[REDACTED:password]client_secret: [REDACTED:secret]"
    assert counts == {"password": 1, "secret": 1}


def test_a_key_without_a_secret_does_not_hide_one_in_its_value() -> None:
    token = _rand(ALNUM, 24)
    out, _ = scrub_text(f"url: https://api.example.com/cb?state=1&access_token={token}")
    assert out == "url: https://api.example.com/cb?state=1&access_token=[REDACTED:token]"


def test_netrc_and_curl_user_passwords() -> None:
    pw1, pw2 = _rand(ALNUM, 14), _rand(ALNUM, 14)
    out, counts = scrub_text(
        f"machine api.example.com login bob password {pw1}\ncurl -u alice:{pw2} https://x"
    )
    assert pw1 not in out and pw2 not in out
    assert "login bob password [REDACTED:password]" in out and "-u alice:[REDACTED:password]" in out
    assert counts == {"password": 2}


NEGATIVES = [
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "AWS_SECRET_ACCESS_KEY: ${{ secrets.AWS_SECRET_ACCESS_KEY }}",
    "password=${DB_PASSWORD}",
    'password="${DB_PASSWORD}"',
    "PGPASSWORD=$DB_PASSWORD psql",
    "set api_key=%API_KEY% first",
    "password: <redacted>",
    "the value is <redacted> and the token is [redacted]",
    "password: '{{ db_password }}'",
    "password: ***",
    "token = xxxxxxxx",
    'OPENAI_API_KEY = os.environ["OPENAI_API_KEY"]',
    "apiKey: process.env.API_KEY,",
    "password=settings.DB_PASSWORD",
    "login(password=db_password, token=GITHUB_TOKEN)",
    "def login(password: str, token: Optional[str] = None) -> None:",
    "interface Creds { password: string; token?: string }",
    "max_tokens: 4096, token_count=31, input_tokens=14230",
    "secret_name: prod-db, token_url: https://example.com/token",
    "PWD=/home/dev/demo-repo",
    "Token: see above. Password: the one in the vault.",
    "The secret: always rotate keys after a leak.",
    '"UserId": "AIDAEXAMPLEUSERID0001"',
    "commit 9c1e4b7a2f0d5e8c3b6a9f1d4e7c0b3a6f9d2e5c fixed it",
    "see src/components/Header/NavigationBar2Item for the widget",
    "we use sk-learn-style-wrapper estimators",
    "git clone git@github.com:example/demo-repo.git",
    "postgres://localhost:5432/app has no credentials",
    "Authorization: Bearer $TOKEN",
    "Authorization: Bearer ${{ secrets.API_TOKEN }}",
    "curl -u $USER:$PASS https://x",
    "the Authorization header carries a Bearer token",
    "key: app.kubernetes.io/name",
    'tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")',
    'assert counts == {"private_key": 1, "token": 2}',
    "token = make_token(rng); secret = vault[name]",
    "_SECRET_KEY_PREFIXES = frozenset(words)",
    'client.get(f"{API}/global/facts/01ARZ3NDEKTSV4RRFFQ69G5FAV")',
    "Here is my ~/.aws/credentials: see the file",
    'url = "postgres://user:pass@localhost/app"',
]


@pytest.mark.parametrize("text", NEGATIVES)
def test_negatives_are_left_alone(text: str) -> None:
    out, counts = scrub_text(text)
    assert out == text
    assert not counts


# --- pasted output, logs and files ---------------------------------------------------------------


@pytest.mark.parametrize("lang", ["console", "log", "text", "output", "stdout", "plaintext"])
def test_output_tagged_fences_are_dropped(lang: str) -> None:
    text = f"I got this:\n{FENCE}{lang}\nline one\nline two\n{FENCE}\nwhat does it mean?"
    out, counts = scrub_text(text)
    assert out == "I got this:\n[command output removed: 2 lines]\nwhat does it mean?"
    assert counts == {"fenced_output": 1}


@pytest.mark.parametrize("lang", ["sh", "bash", ""])
def test_shell_fence_with_prompt_and_output_is_dropped(lang: str) -> None:
    text = f"{FENCE}{lang}\n$ pytest -q\n....F.\nFAILED tests/test_x.py::test_y\n1 failed, 5 passed\n{FENCE}"
    out, counts = scrub_text(text)
    assert out == "[command output removed: 4 lines]"
    assert counts == {"fenced_output": 1}


def test_untagged_fence_of_log_lines_is_dropped() -> None:
    logs = "\n".join(f"2026-11-20T10:00:0{i}Z INFO worker {i} ready" for i in range(5))
    out, counts = scrub_text(f"{FENCE}\n{logs}\n{FENCE}\nwhy so slow?")
    assert out == "[command output removed: 5 lines]\nwhy so slow?"
    assert counts == {"fenced_output": 1}


def test_diff_fences_are_dropped() -> None:
    text = f"{FENCE}diff\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-old()\n+new()\n{FENCE}\nok?"
    out, counts = scrub_text(text)
    assert out == "[diff removed: 5 lines]\nok?"
    assert counts == {"diff": 1}


def test_long_code_fence_is_a_pasted_file() -> None:
    body = "\n".join(f"def f{i}(x):\n    return x * {i}" for i in range(KEEP_CODE_MAX_LINES))
    out, counts = scrub_text(f"here is the module:\n{FENCE}python\n{body}\n{FENCE}\nrefactor it")
    assert out == f"here is the module:\n[file content removed: {2 * KEEP_CODE_MAX_LINES} lines]\nrefactor it"
    assert counts == {"pasted_file": 1}


def test_numbered_dumps_are_pasted_files_fenced_or_not() -> None:
    dump = "\n".join(f"{i:05d}| line {i}" for i in range(1, 6))
    arrows = "\n".join(f"{i:>6}\u2192code {i}" for i in range(1, 4))
    out, counts = scrub_text(f"{FENCE}\n{dump}\n{FENCE}\nand\n{arrows}\nend")
    assert out == "[file content removed: 5 lines]\nand\n[file content removed: 3 lines]\nend"
    assert counts == {"pasted_file": 2}


def test_file_wrapper_is_a_pasted_file_even_unclosed() -> None:
    body = "\n".join(f"{i:05d}| export X{i}=1" for i in range(1, 5))
    out, counts = scrub_text(f"<file>\n{body}\n</file>")
    assert out == "[file content removed: 4 lines]" and counts == {"pasted_file": 1}
    out, counts = scrub_text(f"look:\n<file>\n{body}\nand the rest")
    assert out == "look:\n[file content removed: 5 lines]" and counts == {"pasted_file": 1}


def test_output_wrappers_are_dropped() -> None:
    out, counts = scrub_text("ran it\n<bash-stdout>\nok\ndone\n</bash-stdout>\nnext")
    assert out == "ran it\n[command output removed: 2 lines]\nnext"
    assert counts == {"fenced_output": 1}


def test_unfenced_traceback_is_a_log_run() -> None:
    trace = (
        "Traceback (most recent call last):\n"
        '  File "app.py", line 3, in <module>\n'
        "    main()\n"
        '  File "app.py", line 2, in main\n'
        "    raise ValueError('boom')\n"
        "    ^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "ValueError: boom"
    )
    out, counts = scrub_text(f"It crashes:\n{trace}\nAny idea?")
    assert out == "It crashes:\n[log output removed: 7 lines]\nAny idea?"
    assert counts == {"log_run": 1}


def test_unfenced_grep_output_and_timestamps_are_log_runs() -> None:
    grep = "\n".join(f"src/mod{i}.py:{10 + i}:    import os" for i in range(6))
    logs = "\n".join(f"[deploy] sync dist/chunk-{i}.js  12KiB" for i in range(4))
    out, counts = scrub_text(f"matches:\n{grep}\n\nand the deploy said\n{logs}\nthen it stopped")
    assert out == (
        "matches:\n[log output removed: 6 lines]\n\nand the deploy said\n[log output removed: 4 lines]\nthen it stopped"
    )
    assert counts == {"log_run": 2}


def test_unfenced_diff_is_dropped() -> None:
    diff = "diff --git a/x b/x\nindex 1a2b3c4..5d6e7f8 100644\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-old\n+new\n ctx"
    out, counts = scrub_text(f"{diff}\n\nLooks right?")
    assert out == "[diff removed: 8 lines]\n\nLooks right?"
    assert counts == {"diff": 1}


def test_unfenced_code_dump_is_a_pasted_file() -> None:
    code = "\n".join(["import os", "", "def main():"] + [f"    x{i} = os.getenv('X{i}')" for i in range(12)])
    out, counts = scrub_text(f"here:\n{code}\nwhy does it fail")
    assert out == "here:\n[file content removed: 15 lines]\nwhy does it fail"
    assert counts == {"pasted_file": 1}


def test_base64_lines_without_a_pem_header_are_dropped() -> None:
    body = "\n".join(_rand(B64, 64) for _ in range(4))
    out, counts = scrub_text(f"the key body:\n{body}\nis that valid?")
    assert out == "the key body:\n[encoded data removed]\nis that valid?"
    assert counts == {"encoded_blob": 1}


def test_long_single_line_blob_is_dropped() -> None:
    blob = "iVBORw0KGgo" + _rand(B64, 300)
    out, counts = scrub_text(f"screenshot: data:image/png;base64,{blob} thanks")
    assert out == "screenshot: data:image/png;base64,[encoded data removed] thanks"
    assert counts == {"encoded_image": 1}  # bulk, not a secret (review29)
    out, counts = scrub_text(f"payload: data:application/octet-stream;base64,{blob} thanks")
    assert out == "payload: data:application/octet-stream;base64,[encoded data removed] thanks"
    assert counts == {"encoded_blob": 1}


def test_short_prose_structures_are_kept() -> None:
    text = (
        "Plan:\n- read deploy.sh\n- add --profile\n- run shellcheck\n- commit\n\n"
        "1. first\n2. second\n3. third\n4. fourth\n\n"
        "| flag | meaning |\n|---|---|\n| -p | profile |\n| -r | region |\n\n"
        "It failed with\nERROR: access denied\nthen retried once."
    )
    out, counts = scrub_text(text)
    assert out == text and not counts


def test_small_code_snippet_is_kept_and_its_secrets_redacted() -> None:
    key = "sk" + "-proj-" + _rand(ALNUM, 40)
    snippet = f'{FENCE}python\nfrom openai import OpenAI\n\nclient = OpenAI(api_key="{key}")\n{FENCE}'
    out, counts = scrub_text(f"Why does this fail?\n{snippet}\nIt says 401.")
    expected = snippet.replace(key, "[REDACTED:openai_api_key]")
    assert out == f"Why does this fail?\n{expected}\nIt says 401."
    assert counts == {"openai_api_key": 1}


def test_small_command_only_shell_snippet_is_kept() -> None:
    text = f"Run:\n{FENCE}bash\npip install -e .\npytest -q tests/test_scrub.py\n{FENCE}"
    out, counts = scrub_text(text)
    assert out == text and not counts


def test_secrets_inside_dropped_blocks_are_counted_too() -> None:
    token = "gh" + "p_" + _rand(ALNUM, 36)
    text = f"{FENCE}console\n$ env\nGITHUB_TOKEN={token}\nHOME=/root\n{FENCE}"
    out, counts = scrub_text(text)
    assert token not in out
    assert counts == {"github_token": 1, "fenced_output": 1}


def test_normalisation_strips_ansi_controls_and_blank_runs() -> None:
    out, counts = scrub_text("\x1b[31mred\x1b[0m text\r\nline two   \r\n\n\n\n\nline three\x07")
    assert out == "red text\nline two\n\nline three" and not counts


# --- truncation -----------------------------------------------------------------------------------


def _prose(rng: random.Random, n_chars: int) -> str:
    words: list[str] = []
    size = 0
    while size < n_chars:
        w = rng.choice(
            ["deploy", "the", "bucket", "policy", "fails", "because", "we", "changed", "it", "again"]
        )
        words.append(w)
        size += len(w) + 1
        if rng.random() < 0.08:
            words.append("\n")
    return " ".join(words).replace(" \n ", "\n")


def test_truncation_keeps_both_ends_within_the_cap() -> None:
    text = "START " + _prose(random.Random(1), 5000) + " END"
    out, counts = scrub_text(text, max_segment_chars=1000)
    assert len(out) <= 1000
    assert counts == {"truncated": 1}
    head, marker, tail = re.split(r"\n?(\[… \d+ characters truncated …\])\n?", out)
    head, tail = head.removesuffix(" …"), tail.removeprefix("… ")  # a line cut in its middle
    assert head.startswith("START ") and tail.endswith(" END")
    assert text.startswith(head) and text.endswith(tail)
    removed = int(re.findall(r"\d+", marker)[0])
    assert len(head) + len(tail) + removed == len(text)
    # Cut at a boundary: the kept ends are whole words of the original.
    assert text[len(head)] in " \n" and text[len(text) - len(tail) - 1] in " \n"
    assert len(head) > len(tail)  # the beginning gets the larger share


def test_a_line_cut_in_its_middle_is_marked_at_both_ends() -> None:
    text = " ".join(f"word{i}" for i in range(600))  # one long line
    out, _ = scrub_text(text, max_segment_chars=MIN_SEGMENT_CHARS)
    head, marker, tail = out.split("\n")
    assert head.startswith("word0 word1 ") and head.endswith(" …")
    assert tail.startswith("… ") and tail.endswith(" word599")
    assert re.fullmatch(r"\[… \d+ characters truncated …\]", marker)
    assert len(out) <= MIN_SEGMENT_CHARS


def test_a_cut_never_keeps_a_piece_of_a_word() -> None:
    out, counts = scrub_text("x" * 5000, max_segment_chars=300)
    assert out == "[… 5000 characters truncated …]" and counts == {"truncated": 1}
    out, _ = scrub_text("start " + "y" * 5000 + " end", max_segment_chars=300)
    assert out == "start …\n[… 5002 characters truncated …]\n… end"


def test_a_cut_line_never_turns_into_a_fence() -> None:
    # ```x``` is inline code; its prefix "```x" alone would open a fence on a second pass.
    text = "intro line\n" + FENCE + "x" + FENCE + " " + "word " * 300
    out, _ = scrub_text(text, max_segment_chars=300)
    assert not out.split("\n")[1].startswith(FENCE)
    assert scrub_text(out, max_segment_chars=300) == (out, {})


def test_text_at_the_cap_is_not_truncated() -> None:
    text = _prose(random.Random(2), 3000)[:1000].strip()
    out, counts = scrub_text(text, max_segment_chars=len(text))
    assert out == text and not counts


@pytest.mark.parametrize("where", ["head", "tail"])
def test_no_part_of_a_secret_survives_a_cut(where: str) -> None:
    rng = random.Random(3)
    limit = 600
    filler = "word " * 800
    for offset in range(-80, 80, 5):
        secret = "gh" + "p_" + _rand(ALNUM, 36, rng)
        # Around where the beginning or the end is cut, on a word boundary.
        pos = int(limit * 0.55) + offset if where == "head" else len(filler) - int(limit * 0.4) + offset
        text = filler[:pos] + secret + " " + filler[pos:]
        out, counts = scrub_text(text, max_segment_chars=limit)
        assert len(out) <= limit
        assert not any(secret[i : i + 8] in out for i in range(len(secret) - 7)), (offset, out)
        assert counts["github_token"] == 1


def test_a_cut_never_splits_a_kept_snippet_or_a_marker() -> None:
    rng = random.Random(4)
    snippet = f"{FENCE}python\nprint('hello')\nprint('world')\n{FENCE}"
    for pos in range(250, 450, 7):
        prose = _prose(rng, 1500)
        text = prose[:pos] + "\n" + snippet + "\n" + prose[pos:]
        out, _ = scrub_text(text, max_segment_chars=500)
        assert out.count(FENCE) in (0, 2)
        if FENCE in out:
            assert snippet in out


def test_segment_minimum_is_enforced() -> None:
    with pytest.raises(ValueError):
        scrub_text("x", max_segment_chars=MIN_SEGMENT_CHARS - 1)
    with pytest.raises(ValueError):
        scrub_transcript(_transcript([]), max_total_chars=2 * MIN_SEGMENT_CHARS - 1)


# --- transcripts ----------------------------------------------------------------------------------


def _summary(title: str | None = "Fix deploy") -> SessionSummary:
    ts = datetime(2026, 11, 20, 9, 58, tzinfo=UTC)
    return SessionSummary(
        agent="claude-code",
        session_id="62f746b4-84e6-4ceb-95bd-447e7184d454",
        title=title,
        project_path="/home/dev/demo-repo",
        message_count=0,
        started_at=ts,
        last_activity_at=ts,
        source_path="/home/dev/.claude/projects/-home-dev-demo-repo/62f746b4.jsonl",
    )


def _transcript(messages: list[Message], title: str | None = "Fix deploy", **dropped: int) -> Transcript:
    return Transcript(summary=_summary(title), messages=tuple(messages), dropped=dropped)


def test_total_cap_keeps_the_first_and_last_messages() -> None:
    rng = random.Random(5)
    messages = [
        Message(role="user" if i % 2 == 0 else "assistant", text=f"message #{i} " + _prose(rng, 1400))
        for i in range(40)
    ]
    out = scrub_transcript(_transcript(messages), max_total_chars=10_000)
    kept = [int(re.match(r"message #(\d+)", m.text).group(1)) for m in out.messages]  # type: ignore[union-attr]
    assert kept[0] == 0 and kept[-1] == 39
    assert sum(len(m.text) for m in out.messages) <= 10_000
    assert out.gap_after is not None
    head, tail = kept[: out.gap_after], kept[out.gap_after :]
    assert head == list(range(len(head))) and tail == list(range(40 - len(tail), 40))
    assert abs(len(head) - len(tail)) <= 1  # taken alternately from both ends
    assert out.report.counts["messages_dropped"] == 40 - len(kept)


def test_total_cap_untouched_when_the_transcript_fits() -> None:
    messages = [Message(role="user", text="short one"), Message(role="assistant", text="short two")]
    out = scrub_transcript(_transcript(messages))
    assert out.messages == tuple(messages) and out.gap_after is None and out.report.counts == {}


def test_total_cap_smaller_than_two_segments_shares_the_room() -> None:
    rng = random.Random(6)
    messages = [Message(role="user", text=_prose(rng, 1900)) for _ in range(3)]
    out = scrub_transcript(_transcript(messages), max_segment_chars=2000, max_total_chars=1000)
    assert len(out.messages) == 2 and sum(len(m.text) for m in out.messages) <= 1000
    assert out.messages[0].text.startswith(messages[0].text[:50])
    assert out.messages[1].text.endswith(messages[2].text[-50:])
    assert out.report.counts["messages_dropped"] == 1 and out.gap_after == 1


def test_empty_messages_are_dropped_and_counted() -> None:
    ts = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    messages = [
        Message(role="user", text="hello", timestamp=ts),
        Message(role="assistant", text="   \n\t"),
        Message(role="user", text="\x1b[0m\r\n"),
        Message(role="assistant", text="bye"),
    ]
    out = scrub_transcript(_transcript(messages))
    assert [m.text for m in out.messages] == ["hello", "bye"]
    assert out.messages[0].timestamp == ts and out.messages[0].role == "user"
    assert out.report.counts == {"empty_message": 2}


def test_title_is_redacted() -> None:
    token = "gh" + "p_" + _rand(ALNUM, 36)
    out = scrub_transcript(_transcript([Message(role="user", text="hi")], title=f"use {token} for CI"))
    assert out.summary.title == "use [REDACTED:github_token] for CI"
    assert out.report.counts == {"github_token": 1}
    assert out.summary.session_id == _summary().session_id


def test_report_merges_reader_counts_and_holds_no_value() -> None:
    secrets = [secret for _kind, secret, _t in KIND_CASES]
    messages = [
        Message(role="user", text=template.format(s=secret)) for _kind, secret, template in KIND_CASES
    ]
    out = scrub_transcript(_transcript(messages, tool_use=3, tool_result=3, thinking=1))
    assert out.report.counts["tool_use"] == 3 and out.report.counts["thinking"] == 1
    assert out.report.total == sum(out.report.counts.values())
    everything = repr(out)
    for secret in secrets:
        assert secret not in repr(out.report)
        for line in secret.splitlines():
            assert line not in everything
    assert set(out.report.counts) >= {kind for kind, _s, _t in KIND_CASES}


def test_report_counts_are_sorted_and_skip_zeros() -> None:
    report = ScrubReport(counts={"b": 2, "a": 1, "z": 0})
    assert list(report.counts) == ["a", "b"] and report.total == 3


def test_realistic_session() -> None:
    key_id, secret, token = _aws_key_id(), _aws_secret(), "gh" + "p_" + _rand(ALNUM, 36)
    pem = _pem("RSA", body_lines=5)
    log = "\n".join(f"[deploy] sync dist/assets/chunk-{i:03d}.js  {i * 7}KiB" for i in range(1, 60))
    ts = datetime(2026, 11, 20, 9, 58, tzinfo=UTC)
    messages = [
        Message(
            role="user",
            text=(
                "scripts/deploy.sh fails with AccessDenied on PutObject. Here is my ~/.aws/credentials:\n\n"
                f"[default]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\n\n"
                f"CI uses GITHUB_TOKEN={token} for the release step. Please find the cause."
            ),
            timestamp=ts,
        ),
        Message(role="assistant", text="I'll start by reading the deploy script."),
        Message(role="user", text=f"this is what it prints:\n{FENCE}\n{log}\n{FENCE}"),
        Message(
            role="assistant",
            text=(
                "Root cause: `infra/iam/ci-deployer.json` only allows `s3:PutObject` on the staging bucket.\n\n"
                f"Fix it like this:\n{FENCE}json\n"
                '{"Resource": ["arn:aws:s3:::demo-artifacts-prod/*"]}\n'
                f"{FENCE}\nRotate the key and the token you pasted."
            ),
        ),
        Message(role="user", text=f"also there's an old key in ops/legacy.pem:\n{pem}\ndelete that file"),
        Message(role="assistant", text=""),
        Message(role="assistant", text="Deleted `ops/legacy.pem`; it is still in git history, so revoke it."),
    ]
    out = scrub_transcript(
        _transcript(messages, title="Fix deploy.sh AccessDenied", tool_use=4, tool_result=4)
    )
    texts = [m.text for m in out.messages]
    assert len(texts) == 6 and [m.role for m in out.messages] == [m.role for m in messages if m.text]
    assert texts[0] == (
        "scripts/deploy.sh fails with AccessDenied on PutObject. Here is my ~/.aws/credentials:\n\n"
        "[default]\naws_access_key_id = [REDACTED:aws_access_key_id]\n"
        "aws_secret_access_key = [REDACTED:aws_secret_access_key]\n\n"
        "CI uses GITHUB_TOKEN=[REDACTED:github_token] for the release step. Please find the cause."
    )
    assert texts[2] == "this is what it prints:\n[command output removed: 59 lines]"
    assert texts[3] == messages[3].text  # a small JSON snippet is kept as is
    assert texts[4] == "also there's an old key in ops/legacy.pem:\n[REDACTED:private_key]\ndelete that file"
    assert out.messages[0].timestamp == ts
    assert out.report.counts == {
        "aws_access_key_id": 1,
        "aws_secret_access_key": 1,
        "empty_message": 1,
        "fenced_output": 1,
        "github_token": 1,
        "private_key": 1,
        "tool_result": 4,
        "tool_use": 4,
    }
    assert out.summary.title == "Fix deploy.sh AccessDenied" and out.gap_after is None
    # Scrubbing the scrubbed messages again changes nothing and finds nothing.
    again = scrub_transcript(_transcript(list(out.messages), title=out.summary.title))
    assert again.messages == out.messages and again.report.counts == {}


# --- idempotence and random texts --------------------------------------------------------------------


IDEMPOTENCE_TEXTS = [
    *(template.format(s=secret) for _k, secret, template in KIND_CASES),
    *NEGATIVES,
    f"I got this:\n{FENCE}console\n$ make\nok\n{FENCE}\nnow?",
    "src/a.py:1: e\nsrc/b.py:2: e\n[log output removed: 4 lines]\nsrc/c.py:3: e\nsrc/d.py:4: e",
    "2026-11-20 10:00 INFO a\n2026-11-20 10:01 INFO b\n\n\n\n2026-11-20 10:02 INFO c\n2026-11-20 10:03 INFO d",
    "START " + _prose(random.Random(7), 4000) + " END",
]


@pytest.mark.parametrize("text", IDEMPOTENCE_TEXTS)
def test_scrubbing_is_idempotent(text: str) -> None:
    once, _ = scrub_text(text, max_segment_chars=1000)
    twice, counts = scrub_text(once, max_segment_chars=1000)
    assert twice == once
    assert not counts


def _random_secret(rng: random.Random) -> tuple[str, list[str]]:
    """A fake secret in one of its usual surroundings, and the strings that must not survive."""
    pick = rng.randrange(14)
    if pick == 0:
        s = "AK" + "IA" + _rand(UPPER_DIGITS, 16, rng)
        return s, [s]
    if pick == 1:
        s = "gh" + rng.choice("pousr") + "_" + _rand(ALNUM, 36, rng)
        return s, [s]
    if pick == 2:
        s = "sk" + "-proj-" + _rand(ALNUM, 48, rng)
        return s, [s]
    if pick == 3:
        s = "sk" + "-ant-api03-" + _rand(ALNUM, 60, rng)
        return s, [s]
    if pick == 4:
        s = "xo" + "xb-" + _rand(string.digits, 11, rng) + "-" + _rand(ALNUM, 24, rng)
        return s, [s]
    if pick == 5:
        s = "AI" + "za" + _rand(ALNUM, 35, rng)
        return s, [s]
    if pick == 6:
        s = _jwt(rng)
        return s, [s]
    if pick == 7:
        pem = "-----BEGIN " + rng.choice(["RSA ", "EC ", "OPENSSH ", ""]) + "PRIVATE" + " KEY-----"
        body = [_rand(B64, 64, rng) for _ in range(rng.randint(1, 5))]
        end = pem.replace("BEGIN", "END")
        return "\n".join([pem, *body, end]), body
    if pick == 8:
        v = _rand(ALNUM, 10, rng) + _rand(string.digits, 2, rng)
        form = rng.choice(["DB_PASSWORD={v}", "password: {v}", '"api_key": "{v}"', "export API_TOKEN='{v}'"])
        return form.format(v=v), [v]
    if pick == 9:
        v = _rand(ALNUM, 12, rng) + _rand(string.digits, 2, rng)
        return f"postgres://app:{v}@db.internal/app", [v]
    if pick == 10:
        v = _rand(ALNUM, 36, rng)
        return f"Authorization: Bearer {v}", [v]
    if pick == 11:
        s = _aws_secret()
        return s, [s]
    if pick == 12:
        s = "github" + "_pat_" + _rand(ALNUM, 22, rng) + "_" + _rand(ALNUM, 59, rng)
        return s, [s]
    v = _rand(ALNUM, 30, rng)
    return f"client_secret: {v}", [v]


def _random_block(rng: random.Random) -> str:
    pick = rng.randrange(7)
    if pick == 0:
        return _prose(rng, rng.randint(20, 600))
    if pick == 1:
        lang = rng.choice(["", "python", "bash", "console", "text", "json", "diff"])
        body = "\n".join(_prose(rng, 40) for _ in range(rng.randint(1, 25)))
        return f"{FENCE}{lang}\n{body}\n{FENCE}"
    if pick == 2:
        return "\n".join(f"2026-11-20T10:00:{i:02d}Z ERROR step {i} failed" for i in range(rng.randint(1, 8)))
    if pick == 3:
        return "\n".join(f"- item {_prose(rng, 20)}" for _ in range(rng.randint(1, 6)))
    if pick == 4:
        return "\n".join(f"src/f{i}.py:{i}: {_prose(rng, 20)}" for i in range(rng.randint(1, 6)))
    if pick == 5:
        return "@@ -1,2 +1,2 @@\n" + "\n".join(
            rng.choice("+- ") + _prose(rng, 20) for _ in range(rng.randint(1, 5))
        )
    return "\n".join(f"    x{i} = call({i});" for i in range(rng.randint(1, 20)))


def _plant(rng: random.Random, text: str, secrets: list[str]) -> str:
    """``text`` with each secret inserted after a blank or a line break of the original text."""
    spots = [m.end() for m in re.finditer(r"[ \n]", text)] or [len(text)]
    chosen = sorted((rng.choice(spots), secret) for secret in secrets)
    for pos, secret in reversed(chosen):  # from the end, so earlier positions stay valid
        left, right = rng.choice([(" ", " "), ("\n", "\n"), ("(", ")"), ("`", "`"), ('"', '"'), ("", " ")])
        text = text[:pos] + left + secret + right + text[pos:]
    return text


def test_random_texts_with_planted_secrets_never_leak() -> None:
    rng = random.Random(20261120)
    for round_ in range(300):
        text = "\n\n".join(_random_block(rng) for _ in range(rng.randint(1, 8)))
        must_vanish: list[str] = []
        planted: list[str] = []
        for _ in range(rng.randint(1, 5)):
            secret, values = _random_secret(rng)
            planted.append(secret)
            must_vanish += values
        text = _plant(rng, text, planted)
        limit = rng.choice([MIN_SEGMENT_CHARS, 500, 1000, 2000, 10_000])
        out, counts = scrub_text(text, max_segment_chars=limit)
        assert len(out) <= limit, round_
        for value in must_vanish:
            assert value not in out, (round_, value, out)
            assert value not in repr(counts)
        assert sum(counts.values()) >= 1
        again, more = scrub_text(out, max_segment_chars=limit)
        assert again == out and not more, (round_, out, again)


def test_redact_secrets_alone_keeps_structure() -> None:
    token = "gh" + "p_" + _rand(ALNUM, 36)
    text = f"{FENCE}console\n$ echo {token}\n{FENCE}"
    assert redact_secrets(text) == f"{FENCE}console\n$ echo [REDACTED:github_token]\n{FENCE}"


@pytest.mark.timeout(60)  # a bound on runaway backtracking, not a timing assertion
@pytest.mark.parametrize(
    "text",
    [
        " " * 200_000 + "x",
        "x" + " " * 200_000 + "x",
        "token=a" + ")" * 100_000,
        "key:" + "\t" * 100_000 + "v",
    ],
    ids=["leading-blanks", "inner-blanks", "trailing-punct", "tabs-after-key"],
)
def test_long_runs_do_not_backtrack_quadratically(text: str) -> None:
    # Regexes like ``[ \t]+$`` under MULTILINE took minutes on a 100k blank run.
    scrubbed, _ = scrub_text(text, max_segment_chars=10**9)
    assert len(scrubbed) <= len(text)
