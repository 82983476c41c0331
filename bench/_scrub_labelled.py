"""A labelled set for the scrubber's quality (``bench/scrub.py --quality``): texts that hold a
secret (and which characters are the secret) and texts that hold none.

Every secret is built from random characters at run time, and vendor prefixes are split in the
source: no secret-shaped string is committed. The negatives are what agents paste every day:
hashes and ids (git SHAs, UUIDs, ULIDs, digests, integrity strings), code that names secrets,
placeholders and prose.
"""

from __future__ import annotations

import base64
import random
import string
import uuid
from collections.abc import Callable

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
UPPER32 = string.ascii_uppercase + "234567"
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
CRYPT = ALNUM + "./"
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"

Case = tuple[str, str, str | None]  # (name, text, the secret in it; None: a text with none)
RandomText = Callable[..., str]  # r(n, alphabet=ALNUM): n random characters


def cases(rng: random.Random) -> list[Case]:
    """The labelled texts, the same for one ``rng`` seed."""

    def r(n: int, alphabet: str = ALNUM) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    return [*positives(r), *negatives(r, rng), *commands_and_public_data(r, rng)]


def positives(r: RandomText) -> list[Case]:
    pw = r(14)
    pem_body = "\n".join(r(64, B64) for _ in range(4))
    pem = f"-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----"
    jwt_sig = r(43, B64URL)
    creds = base64.b64encode(f"deploy:{pw}".encode()).decode()
    aws_secret = r(40, B64)
    out: list[Case] = [
        ("pem_rsa", pem, pem_body),
        ("pem_openssh", pem.replace("RSA", "OPENSSH"), pem_body),
        ("pem_json_escaped", '{"private_key": "' + pem.replace("\n", "\\n") + '"}', pem_body.split("\n")[1]),
        ("pem_pgp", pem.replace("RSA PRIVATE KEY", "PGP PRIVATE KEY BLOCK"), pem_body),
        ("jwt", f"curl -H 'x: eyJhbGciOiJIUzI1NiJ9.{r(40, B64URL)}.{jwt_sig}'", jwt_sig),
        ("aws_key_id", "key id " + "AK" + "IA" + (s := r(16, UPPER32)), s),
        ("aws_secret_env", f"AWS_SECRET_ACCESS_KEY={aws_secret}", aws_secret),
        ("aws_secret_bare", f"secret {aws_secret}", aws_secret),
        ("github_pat", "gh" + "p_" + (s := r(36)), s),
        ("github_fine", "github" + "_pat_" + (s := r(22) + "_" + r(59)), s),
        ("gitlab", "gl" + "pat-" + (s := r(20, B64URL)), s),
        ("slack_bot", "xo" + "xb-" + (s := r(11, HEX[:10]) + "-" + r(12, HEX[:10]) + "-" + r(24)), s),
        (
            "slack_webhook",
            "https://hooks.slack.com/services/T" + r(8, UPPER32) + "/B" + r(8, UPPER32) + "/" + (s := r(24)),
            s,
        ),
        ("stripe_live", "sk" + "_live_" + (s := r(24)), s),
        ("stripe_restricted", "rk" + "_live_" + (s := r(24)), s),
        ("google_api", "AI" + "za" + (s := r(35, B64URL)), s),
        ("openai", "sk" + "-proj-" + (s := r(40, B64URL) + "T3BlbkFJ" + r(40, B64URL)), s),
        ("anthropic", "sk" + "-ant-api03-" + (s := r(93, B64URL)) + "AA", s),
        ("huggingface", "hf" + "_" + (s := r(34)), s),
        ("url_password", f"postgres://admin:{pw}@db.internal:5432/app", pw),
        ("url_redis", f"redis://:{pw}@cache:6379/0", pw),
        ("url_token_user", f"git clone https://{(s := r(40))}@github.com/o/r.git", s),
        ("env_password", f"DB_PASSWORD={pw}", pw),
        ("env_password_word", "DB_PASSWORD=swordfish", "swordfish"),
        ("export_token", f"export X_TOKEN={(s := r(30))}", s),
        ("dotenv_quoted", f'API_KEY="{(s := r(24))}"', s),
        ("dockerfile_env", f"ENV DB_PASSWORD={pw}", pw),
        ("powershell", f'$env:OPENAI_API_KEY = "{(s := r(30))}"', s),
        ("fish_set", f"set -x GITHUB_TOKEN {(s := r(30))}", s),
        ("setx", f"setx API_KEY {(s := r(30))}", s),
        ("auth_bearer", f"Authorization: Bearer {(s := r(30))}", s),
        ("auth_basic", f"Authorization: Basic {creds}", creds),
        ("auth_json", f'{{"headers": {{"Authorization": "Bearer {(s := r(30))}"}}}}', s),
        ("x_api_key", f"X-API-Key: {(s := r(32))}", s),
        ("cookie", f"Cookie: theme=dark; sessionid={(s := r(32))}", s),
        ("set_cookie", f"Set-Cookie: session={(s := r(40))}; Path=/; HttpOnly", s),
        ("odbc", f"Server=db;Database=app;Uid=sa;Pwd={pw};", pw),
        ("ado_net", f"Data Source=db;Initial Catalog=app;User ID=sa;Password={pw}", pw),
        ("jdbc", f"jdbc:postgresql://db:5432/app?user=app&password={pw}", pw),
        ("libpq_kv", f"host=db port=5432 dbname=app user=app password={pw}", pw),
        ("azure_conn", f"DefaultEndpointsProtocol=https;AccountName=a;AccountKey={(s := r(86, B64))}==;", s),
        ("npmrc_token", "//registry.npmjs.org/:_authToken=" + "npm" + "_" + (s := r(36)), s),
        ("npmrc_auth", f"//registry.npmjs.org/:_auth={creds}", creds),
        ("docker_config", f'{{"auths": {{"ghcr.io": {{"auth": "{creds}"}}}}}}', creds),
        ("mysql_p", f"mysql -u root -p{pw} app", pw),
        ("sshpass", f"sshpass -p {pw} ssh deploy@host", pw),
        ("docker_login", f"docker login -u me -p {pw} ghcr.io", pw),
        ("curl_u", f"curl -u deploy:{pw} https://api", pw),
        ("netrc", f"machine api.example.com login deploy password {pw}", pw),
        ("yaml", f"database:\n  password: {pw}", pw),
        ("k8s_data", f"data:\n  password: {(s := base64.b64encode(pw.encode()).decode())}", s),
        ("python_kwarg", f'connect(host="db", password="{pw}")', pw),
        ("prose_password", f"the db password is {pw}", pw),
        ("cli_flag", f"--password={pw}", pw),
        ("bcrypt", f"$2b$12${(s := r(53, CRYPT))}", s),
        ("shadow", f"root:$6${r(16, CRYPT)}${(s := r(86, CRYPT))}:19000:0:99999:7:::", s),
        ("htpasswd", f"admin:$apr1${r(8, CRYPT)}${(s := r(22, CRYPT))}", s),
        (
            "putty",
            f"PuTTY-User-Key-File-3: ssh-ed25519\nPrivate-Lines: 1\n{(s := r(64, B64))}\nPrivate-MAC: {r(64, HEX)}",
            s,
        ),
        ("wireguard", f"PrivateKey = {(s := r(43, B64))}=", s),
        ("age", "AGE-SECRET" + "-KEY-1" + (s := r(58, UPPER32)), s),
        ("sendgrid", "SG" + "." + (s := r(22, B64URL) + "." + r(43, B64URL)), s),
        ("vault", "hv" + "s." + (s := r(90, B64URL)), s),
        ("telegram", f"{r(10, HEX[:10])}:AA{(s := r(33, B64URL))}", s),
        *told_before_or_with_a_colon(r),
        *said_in_prose(r),
        # Known limits (see coffer_memory/_transcripts/scrub.py), kept in so that recall says so.
        ("limit_prose_word", "the db password is swordfish", "swordfish"),
        ("limit_prose_no_verb", f"the API key {(s := r(32))} expired", s),
        ("limit_untelling_key", f"DB_PW={pw}", pw),
        ("limit_glued", "token" + "gh" + "p_" + (s := r(36)), s),
    ]
    return out


def told_before_or_with_a_colon(r: RandomText) -> list[Case]:
    """Session 15 (attack7): a verb before the key, and ``is:`` (added before the rule for them)."""
    said = {
        "prose_use_symbol": ("use password hunter2x! to log in", "hunter2x"),
        "prose_is_colon": ("the password is: swordfish9", "swordfish9"),
        "prose_is_colon_word": ("the vpn password is: nightjar.", "nightjar"),
        "prose_try_the": ("try the admin password {}", r(10)),
        "prose_log_in_with": ("log in with password {} and change it", r(9)),
        "prose_enter_quoted": ("enter password 'cormorant' when asked", "cormorant"),
    }
    return [(name, text.format(secret), secret) for name, (text, secret) in said.items()]


def said_in_prose(r: RandomText) -> list[Case]:
    """Session 16 (attack8): a key named by a phrase before a colon, a bare word after a verb
    before the key, a value before ``as the password``, adverbs after ``is`` (added before the
    rules for them; the held-out set was not looked at for these)."""
    said = {
        "prose_for_phrase_colon": ("Password for the prod replica: kestrel{}", r(3, "0123456789")),
        "prose_for_phrase_word": ("password for the build box: quokka", "quokka"),
        "prose_to_phrase_is": ("the password to the staging vpn is marmot", "marmot"),
        "prose_use_word": ("just use password pelican for the demo", "pelican"),
        "prose_use_word_end": ("ok, use password wombat.", "wombat"),
        "prose_with_word": ("try logging in with password heron", "heron"),
        "prose_as_the_password": ("use albatross as the password", "albatross"),
        "prose_as_password_random": ("set {} as the admin password", r(11)),
        "prose_set_to": ("I set the admin password to puffin", "puffin"),
        "prose_changed_to": ("changed the root password to {}", r(10)),
        "prose_is_still": ("the password is still gannet", "gannet"),
        "prose_for_now": ("the db password is ocelot for now", "ocelot"),
        "prose_you_need": ("the password you need is lynx-hollow", "lynx-hollow"),
        "prose_user_on_host": ("password for root on db1: {}", r(8)),
    }
    return [(name, text.format(secret), secret) for name, (text, secret) in said.items()]


def not_said_in_prose() -> list[Case]:
    """Session 16 (attack8): phrasings next to ``said_in_prose`` that hold no secret."""
    kept = {
        "for_phrase_see": "Password for the staging db: see the team vault",
        "for_phrase_rotated": "password for the admin account: rotated weekly",
        "for_phrase_same": "password for the replica: same as prod",
        "for_phrase_unknown": "Password for the wiki: unknown, ask ops",
        "use_password_auth_end": "For the dashboard, use password auth.",
        "use_password_login_end": "we now use password login",
        "use_password_rotation": "use password rotation everywhere",
        "with_password_protection": "ship it with password protection enabled",
        "as_the_password_hash": "use bcrypt as the password hash",
        "as_the_password_algo": "use argon2id as the password hashing algorithm",
        "as_password_field": "use this as the password field",
        "set_to_expire": "set the password to expire after 90 days",
        "changed_to_something": "change the password to something stronger.",
        "reset_to_default": "reset the password to default",
        "is_also_required": "the password is also required",
        "is_still_wrong": "the password is still wrong",
        "for_now_required": "the password is required for now",
        "you_need_in_vault": "the password you need is in the vault",
        "you_chose_weak": "the password you chose is weak.",
        "enter_password_below": "enter password below",
    }
    return [(f"neg_{name}", text, None) for name, text in kept.items()]


def negatives(r: RandomText, rng: random.Random) -> list[Case]:
    def neg(name: str, text: str) -> Case:
        return (name, text, None)

    return [
        neg("git_sha", f"fixed in commit {r(40, HEX)}"),
        neg("git_log", f"commit {r(40, HEX)}\nAuthor: Jane <j@x.org>\n\n    fix token refresh"),
        neg("short_sha", f"see {r(7, HEX)} and {r(12, HEX)}"),
        neg("uuid", f"id {uuid.UUID(int=rng.getrandbits(128))}"),
        neg("ulid", "01" + r(24, CROCKFORD)),
        neg("ulid_list", " ".join("01" + r(24, CROCKFORD) for _ in range(3))),
        neg("sha256", f"sha256:{r(64, HEX)}"),
        neg("sha512_hex", r(128, HEX)),
        neg("md5", f"md5sum {r(32, HEX)}"),
        neg("docker_digest", f"image@sha256:{r(64, HEX)}"),
        neg("npm_integrity", "sha512-" + base64.b64encode(rng.randbytes(64)).decode()),
        neg("sri", "integrity sha384-" + base64.b64encode(rng.randbytes(48)).decode()),
        neg("nix_hash", "sha256-" + base64.b64encode(rng.randbytes(32)).decode()),
        neg("go_sum", "golang.org/x/net v0.1.0 h1:" + base64.b64encode(rng.randbytes(32)).decode()),
        neg("pip_hash", f"--hash=sha256:{r(64, HEX)}"),
        neg("base64_text", base64.b64encode(b"hello world this is a simple message").decode()),
        neg("prose", "We should rotate the token before the release and update the password policy."),
        neg("prose_key", "The key insight is that the cache was stale."),
        neg("prose_tokenizer", "The tokenizer splits each token into subwords."),
        neg("prose_passwordless", "we moved to passwordless login"),
        neg("getenv", 'password = os.environ["DB_PASSWORD"]'),
        neg("go_getenv", 'token := os.Getenv("GITHUB_TOKEN")'),
        neg("rust_env", 'let api_key = std::env::var("API_KEY")?;'),
        neg("ts_await", "const token = await getToken({ audience });"),
        neg("java", 'String password = request.getParameter("password");'),
        neg("def_param", "def login(user, password):\n    return check(password)"),
        neg("type_annotation", "token: string | undefined"),
        neg("python_type", "password: str"),
        neg("max_tokens", "max_tokens=4096"),
        neg("token_count", "token_count: 12345"),
        neg("expiry", "TOKEN_EXPIRY=3600"),
        neg("env_ref", "export GITHUB_TOKEN=$GH_TOKEN"),
        neg("gha_secret", "token: ${{ secrets.GITHUB_TOKEN }}"),
        neg("placeholder", "API_KEY=<your-api-key>"),
        neg("changeme", "password: changeme"),
        neg("yaml_alias", "password: *db_password"),
        neg("k8s_ref", "valueFrom:\n  secretKeyRef:\n    name: db-secret\n    key: password"),
        neg("password_file", "password_file: /run/secrets/db_password"),
        neg("token_type", 'token_type: "bearer"'),
        neg("auth_true", '"auth": true'),
        neg("cookie_plain", "Cookie: theme=dark; lang=en-US"),
        neg("password_stdin", "docker login -u me --password-stdin ghcr.io"),
        neg("url_user", "https://user@example.com/path"),
        neg("url_localhost", "http://localhost:8080/api?page=2"),
        neg("path", "/usr/local/lib/python3.12/site-packages/coffer_memory/_transcripts/secrets.py"),
        neg("camel", "getUserAccessTokenFromSessionStorage()"),
        neg("css", "color: #ff00aa; background: #00ffaa;"),
        neg("semver", "version 1.2.3-rc.4+build.567"),
        neg("email", "mail me at jane.doe@example.com"),
        neg("slug", "feature/add-password-reset-flow"),
        neg("dollars", "price is $5 or $6 per seat"),
        neg("sql", "SELECT id FROM users WHERE password_hash = crypt($1, password_hash);"),
        neg("use_password_auth", "use password authentication instead of keys"),
        neg("use_password_managers", "we use password managers for everything"),
        neg("use_password_hashing", "use password hashing with argon2id"),
        neg("is_colon_required", "the password is: required"),
        neg("try_password_reset", "try password reset first, then call support"),
        neg("enter_password_twice", "enter password twice to confirm"),
        neg("with_password_login", "sign in with password login disabled"),
        neg("long_ident", "test_remember_redacts_a_token_typed_as_a_tag_before_lowercasing_it"),
        *not_said_in_prose(),
    ]


def score(redact: Callable[[str], str], labelled: list[Case]) -> dict[str, object]:
    """Recall (secrets fully gone), precision (of texts changed, those that held a secret) and
    the names of the misses and false alarms."""
    missed = [name for name, text, secret in labelled if secret is not None and secret in redact(text)]
    alarms = [name for name, text, secret in labelled if secret is None and redact(text) != text]
    positives = sum(1 for _, _, s in labelled if s is not None)
    caught = positives - len(missed)
    return {
        "positives": positives,
        "negatives": len(labelled) - positives,
        "recall": caught / positives,
        "precision": caught / (caught + len(alarms)) if caught + len(alarms) else 1.0,
        "missed": missed,
        "false_alarms": alarms,
    }


def commands_and_public_data(r: RandomText, rng: random.Random) -> list[Case]:
    """Session 30 (secrets30): passwords shell commands take, a passphrase holding a program's
    name, and, held by none, a secrets command's settings, a secret's name and bare base64 of an
    image (written with the rules for them; the held-out set was not looked at for these)."""
    pw = r(16)
    said = {
        "cmd_passphrase_program": ("PASSPHRASE=correct git battery staple", "battery staple"),
        "cmd_redis_cli": (f"redis-cli -h cache -a {pw} ping", pw),
        "cmd_sqlcmd": (f"sqlcmd -S db -U sa -P {pw} -Q 'select 1'", pw),
        "cmd_ldapsearch": (f"ldapsearch -x -D cn=admin -w {pw} -b dc=acme", pw),
        "cmd_htpasswd": (f"htpasswd -b -c .htpasswd admin {pw}", pw),
        "cmd_httpie": (f"http -a admin:{pw} GET https://api.example.com/me", pw),
        "cmd_az_login": (f"az login --service-principal -u http://app -p {pw} --tenant t", pw),
        "cmd_smbclient": (f"smbclient //files/share -U alice%{pw}", pw),
        "cmd_curl_quoted_blank": (f'curl -u "admin:tall {pw}" https://x.example', pw),
        "cmd_mongosh": (f"mongosh -u admin -p {pw} --host db", pw),
        "cmd_ssh_keygen": (f"ssh-keygen -t ed25519 -N {pw} -f deploy_key", pw),
        "cmd_keytool": (f"keytool -list -keystore app.jks -storepass {pw}", pw),
        "cmd_zip": (f"zip -r -P {pw} backup.zip notes/", pw),
        "cmd_vercel": (f"vercel env add API_KEY production <<< {pw}", pw),
        "cmd_setenv": (f"setenv API_TOKEN {pw}", pw),
    }
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + rng.randbytes(300)).decode()
    kept = {
        "vault_ttl": "vault kv put secret/app key=@data.json ttl=30m",
        "gcloud_secret_name": "gcloud secrets versions access latest --secret=my-db-password",
        "docker_build_secret": "docker build --secret id=npmrc,src=$HOME/.npmrc -t app .",
        "bare_png": f'{{"icon": "{png}"}}',
        "az_login_certificate": "az login --service-principal -u http://app --certificate cert.pem",
        "redis_cli_env": "redis-cli -a $REDIS_PASSWORD ping",
    }
    return [(name, text, secret) for name, (text, secret) in said.items()] + [
        (f"neg_{name}", text, None) for name, text in kept.items()
    ]
