"""Secrets named by their surroundings rather than by ``key=value``: XML elements and key/value
attributes, Markdown table rows, ``config set KEY VALUE``, the values secrets commands take by a
flag, a pipe, a here-string or their own pairs, passwords commands take bare, and prose.

The patterns live in ``secret_shapes`` (and ``secret_prose`` for prose); this module applies them
with the judgements of ``secret_values``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from .secret_commands import (
    BARE_PASSWORDS,
    COMMAND_HINTS,
    COMMAND_LINE,
    COMMAND_PASSWORDS,
    CONFIG_SET,
    HERE_STRING_SECRETS,
    LOGIN_PASSWORDS,
    PASSWORD_FLAGS,
    PIPED_SECRETS,
    SECRET_FLAG_VALUES,
    SECRET_PAIR,
    SECRET_PAIRS_COMMAND,
)
from .secret_prose import redact_prose
from .secret_shapes import (
    AZURE_LISTED_KEY,
    ODBC_BRACED,
    PGPASS_LINE,
    TABLE_ROW,
    XML_ELEMENT,
    XML_KEY_VALUE,
)
from .secret_values import key_kind, redact_value, secret_kind_for_key


def redact_named(text: str, c: Counter[str]) -> str:
    """Values named by their surroundings rather than by ``key=value``: XML elements and
    key/value attributes, Markdown table rows, ``config set KEY VALUE`` commands, passwords
    commands take bare (``mysql -pX``, ``redis-cli -a X``), and prose (``the password is X``, see _prose_secret)."""

    def named(*, fixed: str | None = None, bare_pw: bool = False) -> Callable[[re.Match[str]], str]:
        # ``bare_pw``: a bare ``pwd``/``pw`` names a password here (ODBC), not in a table's
        # first cell (``| Pass | 1234 |`` is a test count).
        def repl(m: re.Match[str]) -> str:
            kind = fixed
            if kind is None:
                key = m["key"].replace(" ", "_")
                kind = key_kind(key, m["val"]) if bare_pw else secret_kind_for_key(key)
            if kind is None:
                return m.group()
            prefix = m.string[m.start() : m.start("val")]
            out = redact_value(prefix, m["val"], kind, c, after_colon=True)
            return m.group() if out is None else out + m.string[m.end("val") : m.end()]

        return repl

    text = XML_ELEMENT.sub(named(), text)
    text = XML_KEY_VALUE.sub(named(), text)
    text = TABLE_ROW.sub(named(), text)
    if "{" in text:
        text = ODBC_BRACED.sub(named(bare_pw=True), text)
    text = PGPASS_LINE.sub(named(fixed="password"), text)
    if any(name in text for name in ("key1", "key2", "kerb1", "kerb2")):
        text = AZURE_LISTED_KEY.sub(named(fixed="azure_storage_key"), text)
    if "secret" in text or "put-parameter" in text:
        text = SECRET_FLAG_VALUES.sub(named(fixed="secret"), text)
    if "secret" in text or "vercel" in text:
        text = PIPED_SECRETS.sub(named(fixed="secret"), text)
        if "<<<" in text:
            text = HERE_STRING_SECRETS.sub(named(fixed="secret"), text)
    if "vault" in text or "secret" in text:
        text = SECRET_PAIRS_COMMAND.sub(lambda m: SECRET_PAIR.sub(named(fixed="secret"), m.group()), text)
    text = CONFIG_SET.sub(named(), text)
    text = BARE_PASSWORDS.sub(named(fixed="password"), text)
    if "sshpass" in text or "login" in text:
        text = LOGIN_PASSWORDS.sub(named(fixed="password"), text)
    if any(hint in text for hint in COMMAND_HINTS):
        password = named(fixed="password")
        text = COMMAND_LINE.sub(lambda m: PASSWORD_FLAGS[m["cmd"]].sub(password, m.group()), text)
    if any(name in text for name in ("htpasswd", "rabbitmqctl", "-U", "--user")):
        text = COMMAND_PASSWORDS.sub(named(fixed="password"), text)
    return redact_prose(text, c)
