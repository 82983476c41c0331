"""Secrets given to shell commands: ``config set KEY X``, the values secrets commands store (by a
flag, a pipe, a here-string or their own ``key=value`` pairs) and the passwords commands take
by a flag (``mysql -pX``, ``sshpass -p X``, ``redis-cli -a X``, ``htpasswd -b …``).

Patterns only; ``secret_named`` applies them with the judgements of ``secret_values``.
"""

from __future__ import annotations

import re
from typing import Final

# ``aws configure set aws_secret_access_key X``, ``npm config set _authToken X``, csh's ``setenv
# KEY X``. A flag after the key is no value (``gh secret set NAME --body X``: see
# SECRET_FLAG_VALUES).
CONFIG_SET: Final = re.compile(
    r"\b(?=[sce])(?:(?:set|setx|setenv|config|configure|config:set|env:set)[ \t]+)+(?:--?[\w-]+[ \t]+)*[\"']?(?P<key>[\w./:@-]{1,80})[\"']?[ \t]+"
    r"(?P<val>[\"']?(?!-)[^\s\"'`|;&]+[\"']?)"
)
# A value a command that stores a secret takes by a flag: ``gh secret set NAME --body X`` (``-b
# X``, ``--body=X``, ``-b"X"``), ``az keyvault secret set … --value X``, ``aws ssm put-parameter
# … --value X`` (a SecureString or not: what goes into a parameter store is meant to be kept
# out of the code). The command may go on over ``\``-continued lines; a quoted value may hold
# blanks. Run only on a text that says ``secret`` or ``put-parameter``, as PIPED_SECRETS.
SECRET_FLAG_VALUES: Final = re.compile(
    r"\b(?:(?:gh|keyvault)[ \t]+secret[ \t]+set|ssm[ \t]+put-parameter)\b(?:[^\n|;&]|\\\n){0,300}?[ \t]"
    r"(?:--body|-b|--value)(?:[ \t]*=[ \t]*|[ \t]+|(?=[\"']))"
    r"(?!file://|fileb://)(?P<val>\"[^\"\n]{1,1024}\"|'[^'\n]{1,1024}'|[\"']?[^\s\"'`|;&]+[\"']?)"
)
# What a secrets command does to store one: ``gh secret set``, ``gcloud secrets versions add``.
_STORE = r"(?:versions[ \t]+)?(?:set|put|add|create|import)\b"
# … or Vercel's ``vercel env add NAME ENV``, which reads the value the same ways.
_STORES = r"(?:\bsecrets?[ \t]+" + _STORE + r"|\bvercel[ \t]+env[ \t]+add\b)"
# A value piped into such a command: ``echo X | gh secret set NAME``, ``printf %s X | wrangler
# secret put NAME``, ``… | fly secrets import``, ``echo X | vercel env add NAME production``.
PIPED_SECRETS: Final = re.compile(
    r"\b(?:echo(?:[ \t]+-n)?|printf(?:[ \t]+(?:%s|'%s'|\"%s\"))?)[ \t]+(?P<val>[\"']?[^\s\"'`|;&]+[\"']?)"
    r"[ \t]*\|(?=[^\n|;&]{0,100}" + _STORES + r")"
)
# A value a secrets command reads from a here-string: ``gh secret set NAME <<< X``,
# ``gcloud secrets versions add NAME --data-file=- <<< X``.
HERE_STRING_SECRETS: Final = re.compile(
    _STORES + r"[^\n|;&<]{0,300}<<<[ \t]*"
    r"(?P<val>\"[^\"\n]{1,1024}\"|'[^'\n]{1,1024}'|[^\s\"'`|;&]+)"
)
# The ``key=value`` pairs of a command that stores them all as secrets: ``vault kv put PATH
# k=X``, ``kubectl create secret generic NAME --from-literal=k=X``. SECRET_PAIR finds the
# pairs inside a command's line; ``k=@file`` and ``k=-`` (stdin) hold no secret, and neither does
# a setting stored beside the secret: a duration (``ttl=30m``, ``ttl=3600``) or a boolean
# (``enabled=true``).
SECRET_PAIRS_COMMAND: Final = re.compile(
    r"\b(?:vault[ \t]+kv[ \t]+(?:put|patch)|kubectl[ \t]+create[ \t]+secret)\b[^\n|;&]{0,2000}"
)
_SETTING = (
    r"(?:\d{1,9}(?:\.\d{1,9})?(?:ns|us|ms|[smhdw])|(?<=ttl=)\d{1,9}|(?i:true|false|yes|no|on|off))"
    r"(?=[\s|;&]|$)"
)
SECRET_PAIR: Final = re.compile(
    r"(?<=[ \t])(?P<pre>(?:--from-literal[ \t=]+)?(?!-)[\w.-]{1,80}=)(?!" + _SETTING + r")"
    r"(?P<val>(?![@-])\"[^\"\n]{1,1024}\"|(?![@-])'[^'\n]{1,1024}'|(?![@-])[^\s\"'`|;&]+)"
)
# Commands whose ``--secret`` flag takes a secret's name, never its value: ``gcloud secrets versions
# access latest --secret=NAME``, ``docker build --secret id=NAME,src=PATH`` (a BuildKit mount),
# ``docker service create --secret NAME``. (``jwt encode --secret X`` takes the value.)
_SECRET_NAME_COMMAND: Final = re.compile(
    r"(?:^|[|;&(])[ \t]*(?:sudo[ \t]+)?(?:gcloud|docker|podman|buildah|nerdctl)[ \t][^\n|;&]*[ \t]--\Z"
)


def names_a_secret(text: str, key_start: int, key: str) -> bool:
    """The flag whose key starts at ``key_start`` is ``--secret`` of a command that takes a
    secret's name by it (see ``_SECRET_NAME_COMMAND``)."""
    if key.lower() != "secret" or not text.startswith("--", key_start - 2):
        return False
    line_start = text.rfind("\n", 0, key_start) + 1
    return _SECRET_NAME_COMMAND.search(text, max(line_start, key_start - 400), key_start) is not None


# Passwords a command takes without a key: ``mysql -pX``, ``requirepass X`` (Redis),
# ``echo X | docker login --password-stdin``, ``gh auth login --with-token <<< X``.
BARE_PASSWORDS: Final = re.compile(
    r"(?=[mrbe \t-])(?:\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n|;&]{0,200}?[ \t]-p"
    r"|^[ \t]*(?:requirepass|masterauth|rpcpassword|bindpw)[ \t]+"
    r"|\becho[ \t]+(?=[^\n]{0,300}--password-stdin)"
    r"|--with-token[ \t]*<<<[ \t]*)"
    r"(?P<val>[\"']?[^\s\"'`|;&]+[\"']?)",
    re.MULTILINE,
)
# ``sshpass -p X``, ``docker login -u me -p X`` (podman, helm registry, …): run only on a text
# that says ``sshpass`` or ``login`` (a plain substring test is far cheaper than this scan).
LOGIN_PASSWORDS: Final = re.compile(
    r"(?<![\w-])(?:sshpass[ \t]+-p[ \t]*"
    r"|(?:docker|podman|buildah|skopeo|nerdctl|oras|crane|helm[ \t]+registry|az)[ \t]+login\b[^\n|;&]{0,200}?[ \t]-p[ \t]+)"
    r"(?P<val>[\"']?[^\s\"'`|;&]+[\"']?)"
)
# Passwords commands take by a flag, each flag of a command's line: ``redis-cli -a X``, ``sqlcmd
# -P X``, ``ldapsearch -w X`` (``-W`` prompts), ``ldappasswd -s X`` (the new one), ``mongosh -p
# X``, ``twine upload -p X``, ``ssh-keygen -N X -P X``, ``7z -pX``, ``zip -P X``, ``keytool
# -storepass X -keypass X``. PASSWORD_FLAGS[command] finds them inside a COMMAND_LINE match.
_LDAP = "ldapsearch ldapadd ldapmodify ldapdelete ldapcompare ldapmodrdn ldapwhoami ldapexop"
_MONGO = "mongosh mongo mongodump mongorestore mongoexport mongoimport mongostat mongotop mongofiles"
_FLAGS_OF: Final = {
    **dict.fromkeys(("redis-cli", "keydb-cli", "valkey-cli"), r"-a[ \t]+"),
    **dict.fromkeys(("sqlcmd", "bcp", "osql"), r"-P[ \t]*"),
    **dict.fromkeys(_LDAP.split(), r"-w[ \t]+"),
    "ldappasswd": r"-[ws][ \t]+",
    **dict.fromkeys(_MONGO.split(), r"-p[ \t]+"),
    "twine": r"-p[ \t]+",
    "ssh-keygen": r"-[NP][ \t]+",
    **dict.fromkeys(("7z", "7za", "7zz", "7zr"), r"-p"),
    **dict.fromkeys(("zip", "unzip", "zipcloak"), r"-P[ \t]+"),
    "keytool": r"-(?:src|dest)?(?:store|key)pass[ \t]+|-new[ \t]+",
    "jarsigner": r"-(?:store|key)pass[ \t]+",
}
# Substrings one of which every command above holds: a test of a dozen is cheaper than of all.
COMMAND_HINTS: Final = tuple(
    ["-cli", "sqlcmd", "bcp", "osql", "ldap", "mongo", "twine", "keygen", "7z", "zip", "keytool", "jarsigner"]
)
PASSWORD_FLAG_COMMANDS: Final = tuple(_FLAGS_OF)
COMMAND_LINE: Final = re.compile(
    r"(?<![\w.-])(?P<cmd>" + "|".join(sorted(map(re.escape, _FLAGS_OF), key=len, reverse=True)) + r")"
    r"(?![\w.-])[^\n|;&]{0,2000}"
)
PASSWORD_FLAGS: Final = {
    cmd: re.compile(r"(?<=[ \t])(?:" + flag + r")(?P<val>(?!-)[\"']?[^\s\"'`|;&]+[\"']?)")
    for cmd, flag in _FLAGS_OF.items()
}
# Passwords commands take as an argument: ``htpasswd -b FILE USER X`` (``-nb USER X``: no file),
# ``rabbitmqctl add_user USER X`` (``change_password``), Samba's ``-U user%X``.
_HTPASSWD_FLAGS = r"(?:[ \t]+-(?:C[ \t]*\d+|[A-Za-z]+))"
COMMAND_PASSWORDS: Final = re.compile(
    r"(?:\bhtpasswd(?=" + _HTPASSWD_FLAGS + r"*?[ \t]+-[A-Za-z]*b)"
    r"(?:(?=" + _HTPASSWD_FLAGS + r"*?[ \t]+-[A-Za-z]*n)" + _HTPASSWD_FLAGS + r"*[ \t]+(?!-)\S+[ \t]+"
    r"|" + _HTPASSWD_FLAGS + r"*[ \t]+(?!-)\S+[ \t]+(?!-)\S+[ \t]+)"
    r"|\brabbitmqctl\b[^\n|;&]{0,100}?[ \t](?:add_user|change_password)[ \t]+(?!-)\S+[ \t]+"
    r"|(?<![\w-])(?:-U|--user(?:name)?[ \t=])[ \t]*[\"']?[^\s%\"'|;&]+%)"
    r"(?P<val>[\"']?[^\s\"'`|;&]+)"  # a closing quote stays: it may close one before the user
)
