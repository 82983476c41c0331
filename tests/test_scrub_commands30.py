"""Passwords shell commands take that the scrubber did not know (secrets30, session 30):
``redis-cli -a``, ``sqlcmd -P``, ``ldapsearch -w``, ``htpasswd -b``, HTTPie's ``-a user:X``,
``az login -p``, Samba's ``-U user%X`` and a quoted ``curl -u "user:two words"``.

Each case goes through the write path (``MemoryService.remember`` on a real temp home, whose
check is the scrubber's ``redact_secrets``) and through ``scrub_text``; the command around the
password must stay readable. Fake secrets are generated at run time.
"""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest

from coffer_memory import MemoryRejected, MemoryService
from coffer_memory._transcripts.scrub import redact_secrets, scrub_text
from coffer_memory._transcripts.secret_commands import COMMAND_HINTS, PASSWORD_FLAG_COMMANDS

_RNG = random.Random(3032)
PW = "".join(_RNG.choices(string.ascii_letters + string.digits, k=13)) + "b2Y"


# Passwords commands take by a short flag or glued to the user.
SHELL_PASSWORDS = {
    "redis_cli": (f"redis-cli -h cache.internal -a {PW} ping", "redis-cli -h cache.internal -a "),
    "redis_cli_uri_free": (f"redis-cli -a '{PW}' --no-auth-warning", "redis-cli -a '"),
    "sqlcmd": (f"sqlcmd -S db.internal -U sa -P {PW} -Q 'select 1'", "sqlcmd -S db.internal -U sa -P "),
    "ldapsearch": (
        f"ldapsearch -x -D cn=admin,dc=acme -w {PW} -b dc=acme",
        "ldapsearch -x -D cn=admin,dc=acme -w ",
    ),
    "ldapadd": (f"ldapadd -x -D cn=admin -w {PW} -f users.ldif", "ldapadd -x -D cn=admin -w "),
    "ldappasswd_new": (
        f"ldappasswd -x -D cn=admin -W -s {PW} uid=bob,dc=acme",
        "ldappasswd -x -D cn=admin -W -s ",
    ),
    "htpasswd_no_file": (f"htpasswd -nbB admin {PW}", "htpasswd -nbB admin "),
    "httpie_auth_eq": (f"http --auth=admin:{PW} GET https://api.example.com/me", "http --auth=admin:"),
    "mongosh": (
        f"mongosh --host db -u admin -p {PW} --authenticationDatabase admin",
        "mongosh --host db -u admin -p ",
    ),
    "rabbitmqctl": (f"rabbitmqctl add_user deploy {PW}", "rabbitmqctl add_user deploy "),
    "rabbitmqctl_change": (f"rabbitmqctl change_password deploy {PW}", "rabbitmqctl change_password deploy "),
    "twine": (f"twine upload -u __token__ -p {PW} dist/*", "twine upload -u __token__ -p "),
    "ssh_keygen": (f"ssh-keygen -t ed25519 -N {PW} -f deploy_key", "ssh-keygen -t ed25519 -N "),
    "ssh_keygen_change": (f"ssh-keygen -p -P old1x -N '{PW}' -f id_ed25519", "ssh-keygen -p -P "),
    "seven_zip": (f"7z a -p{PW} -mhe=on backup.7z notes/", "7z a -p"),
    "zip": (f"zip -r -P {PW} backup.zip notes/", "zip -r -P "),
    "unzip": (f"unzip -P {PW} backup.zip", "unzip -P "),
    "keytool": (
        f"keytool -genkeypair -alias app -keystore app.jks -storepass {PW} -keypass {PW}",
        "-storepass ",
    ),
    "jarsigner": (
        f"jarsigner -keystore app.jks -storepass {PW} app.jar app",
        "jarsigner -keystore app.jks -storepass ",
    ),
    "vercel_here_string": (
        f"vercel env add API_KEY production <<< {PW}",
        "vercel env add API_KEY production <<< ",
    ),
    "vercel_pipe": (
        f"echo -n {PW} | vercel env add API_KEY production",
        " | vercel env add API_KEY production",
    ),
    "csh_setenv": (f"setenv API_TOKEN {PW}", "setenv API_TOKEN "),
    "launchctl_setenv": (f"launchctl setenv GITHUB_TOKEN {PW}", "launchctl setenv GITHUB_TOKEN "),
    "netlify_env_set": (f"netlify env:set STRIPE_SECRET {PW}", "netlify env:set STRIPE_SECRET "),
    "htpasswd": (f"htpasswd -b -c .htpasswd admin {PW}", "htpasswd -b -c .htpasswd admin "),
    "httpie": (f"http -a admin:{PW} GET https://api.example.com/me", "http -a admin:"),
    "az_login": (
        f"az login --service-principal -u http://acme-app -p {PW} --tenant acme.example",
        "az login --service-principal -u http://acme-app -p ",
    ),
    "smbclient": (f"smbclient //files/share -U alice%{PW}", "smbclient //files/share -U alice%"),
    "curl_quoted_blank": (f'curl -u "admin:{PW[:8]} {PW[8:]}" https://x.example', 'curl -u "admin:'),
}


@pytest.mark.parametrize("case", SHELL_PASSWORDS)
def test_a_password_a_command_takes_is_redacted(tmp_home: Path, case: str) -> None:
    text, shape = SHELL_PASSWORDS[case]
    core = PW[8:] if case == "curl_quoted_blank" else PW
    with MemoryService(tmp_home) as svc:
        body = svc.remember(text, scope="global").fact.body
    assert core not in body and shape in body and "[REDACTED:" in body, body
    out, counts = scrub_text(text)
    assert core not in out and shape in out and counts, out
    assert scrub_text(out) == (out, {})


def test_a_command_password_is_refused_in_reject_mode(tmp_home: Path) -> None:
    tmp_home.mkdir(parents=True)
    (tmp_home / "config.toml").write_text('[security]\nsecrets = "reject"\n')
    with MemoryService(tmp_home) as svc, pytest.raises(MemoryRejected) as caught:
        svc.remember(SHELL_PASSWORDS["redis_cli"][0], scope="global")
    assert caught.value.reason == "secret"


COMMANDS_KEPT = [
    "redis-cli -a $REDIS_PASSWORD ping",
    "sqlcmd -S db -U sa -P $SA_PASSWORD",
    "htpasswd -B .htpasswd admin",
    "http -a admin GET https://api.example.com/me",
    "ldapsearch -x -W -D cn=admin",
    "az login --service-principal -u http://acme-app --certificate cert.pem --tenant t",
    "mongosh -u admin -p --host db",
    "ssh-keygen -t ed25519 -N '' -f deploy_key",
    "keytool -list -keystore app.jks -storepass:env STOREPASS",
    "vercel env add API_KEY production",
    "zip -r backup.zip notes/ && unzip -l backup.zip",
    "setenv EDITOR vim",
    "netlify env:set NODE_VERSION 20",
]


@pytest.mark.parametrize("text", COMMANDS_KEPT)
def test_a_command_without_a_password_is_kept(text: str) -> None:
    assert redact_secrets(text) == text


def test_every_password_flag_command_has_a_hint() -> None:
    """The scrubber looks for a command's password flags only in a text holding one of the hints."""
    assert all(any(hint in command for hint in COMMAND_HINTS) for command in PASSWORD_FLAG_COMMANDS)


def test_a_quoted_user_and_password_keeps_its_closing_quote() -> None:
    text = f"smbclient //files/share -U 'alice%{PW}' -c ls"
    assert redact_secrets(text) == "smbclient //files/share -U 'alice%[REDACTED:password]' -c ls"
