"""A held-out set for the scrubber's quality (``bench/scrub.py --quality``): written in session 14
before the rules for keyless secrets were changed, and never tuned on. The rules were tuned on
``bench/_scrub_labelled.py`` and on the unit tests; this set only reports.

Same shape as the labelled set: ``(name, text, secret)``, ``secret`` None for a text with none.
Word passwords are common words an agent would type (``swordfish``), random ones are built at
run time, vendor prefixes are split in the source.
"""

from __future__ import annotations

import base64
import random
import string

from _scrub_labelled import B64, Case

ALNUM = string.ascii_letters + string.digits


def heldout(rng: random.Random) -> list[Case]:
    """The held-out texts, the same for one ``rng`` seed."""

    def r(n: int, alphabet: str = ALNUM) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    pw = r(12)
    b64 = base64.b64encode(f"ci:{pw}".encode()).decode()
    pem_body = "\n".join(r(64, B64) for _ in range(3))
    pos: list[Case] = [
        ("prose_for_prod", "password for prod is hunter2!", "hunter2"),
        ("prose_word_db", "fyi the staging db password is marmalade", "marmalade"),
        ("prose_wifi_quoted", "the wifi password is 'bluebird'", "bluebird"),
        ("prose_root_changed", f"the root password was changed to {pw}", pw),
        ("prose_use", f"use password {pw} for the admin account", pw),
        ("prose_colon_word", "admin password: lighthouse", "lighthouse"),
        ("prose_my", "my password is tangerine, don't share it", "tangerine"),
        ("pw_eq", f"pw={pw}", pw),
        ("pw_colon", f"login admin pw: {pw}", pw),
        ("PW_env", f"ADMIN_PW={pw}", pw),
        ("pgpassword", f"export PGPASSWORD={pw}", pw),
        ("pgpassword_inline", f"PGPASSWORD='{pw}' psql -h db -U app", pw),
        ("mysql_pwd", f"MYSQL_PWD={pw} mysql -u root", pw),
        ("conn_mongodb_srv", f"mongodb+srv://app:{pw}@cluster0.abcde.mongodb.net/db", pw),
        ("conn_amqp", f"AMQP_URL=amqp://guest:{pw}@rabbit:5672/", pw),
        ("conn_proxy", f"HTTPS_PROXY=http://me:{pw}@proxy.corp:3128", pw),
        ("auth_basic_lower", f"authorization: basic {b64}", b64),
        ("auth_basic_curl", f'curl -H "Authorization: Basic {b64}" https://ci/api', b64),
        ("auth_token_python", f"headers = {{'Authorization': 'Token {(s := r(40))}'}}", s),
        ("pem_ec", f"-----BEGIN EC PRIVATE KEY-----\n{pem_body}\n-----END EC PRIVATE KEY-----", pem_body),
        (
            "pem_python_concat",
            '"-----BEGIN PRIVATE KEY-----\\n"\n' + "\n".join(f'"{line}\\n"' for line in pem_body.split("\n")),
            pem_body.split("\n")[1],
        ),
        (
            "pem_quoted_reply",
            "> -----BEGIN OPENSSH PRIVATE KEY-----\n"
            + "\n".join("> " + line for line in pem_body.split("\n"))
            + "\n> -----END OPENSSH PRIVATE KEY-----",
            pem_body.split("\n")[2],
        ),
        (
            "pem_split_header",
            f"-----BEGIN RSA PRIVATE\nKEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----",
            pem_body,
        ),
        ("openssl_passin", f"openssl rsa -in k.pem -passin pass:{pw} -out k2.pem", pw),
        ("secret_word_prose", f"the client secret is {(s := r(32))}", s),
        ("set_windows", f"set DB_PASSWORD={pw}", pw),
        ("passphrase_colon", f"passphrase: {pw}", pw),
    ]
    neg: list[Case] = [
        (name, text, None)
        for name, text in [
            ("reset_settings", "reset your password in settings"),
            ("pw_required", "the password is required for the first login"),
            ("pw_wrong", "the password is wrong, try again"),
            ("pw_stored", "The password is stored hashed with argon2."),
            ("pw_in_vault", "the password for prod is in the vault"),
            ("pw_in_1password", "password for prod is in 1Password"),
            ("pw_rotated", "the password for prod is rotated monthly"),
            ("pw_same", "the staging password is the same as prod"),
            ("pw_min_len", "password must be at least 12 characters"),
            ("pw_case", "the password is case-sensitive"),
            ("pw_expired", "my password is expired, ask IT"),
            ("token_expired", "the token is invalid or expired"),
            ("pw_short_for", "pw is short for password"),
            ("export_before", "export PGPASSWORD before running psql"),
            ("pgpass_cmd", "PGPASSWORD=$(cat ~/.pgpass-secret) psql"),
            ("secret_prose", "the secret is to cache the embeddings"),
            ("key_bits", "the key is 2048 bits"),
            (
                "public_key",
                "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
            ),
            ("url_placeholder", "use postgres://user:password@host/db as the DSN format"),
            ("basic_prose", "the API wants an Authorization: Basic header, not a bearer token"),
            ("passin_env", "openssl rsa -in k.pem -passin env:KEY_PASS"),
            ("pw_policy", "Password policy: 12 characters, one digit"),
            ("pw_field", "the password field is hidden behind a toggle"),
            ("pw_generated", "the admin password is generated on first boot"),
            ("pw_strong", "make sure the password is strong."),
            ("forgot", "I forgot my password again"),
            ("pw_env_name", "the password is in the DB_PASSWORD environment variable"),
            ("pw_unset", "the db password is unset in CI"),
        ]
    ]
    return pos + neg
