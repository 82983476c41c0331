"""The scrubber: what a past session's prose must go through before any of it reaches an LLM.

Readers (``coffer_memory.transcripts``) already drop tool calls, tool results, reasoning and
attachments. What is left is what people typed and what the agent answered, and that prose still
carries pasted credentials, pasted logs and pasted files. This module removes them. It is pure: no
I/O, no logging, and nothing it returns (``ScrubReport`` in particular) ever holds a removed value.

Pipeline for one message (``scrub_text``), in this order:

1. **Normalise**: ``\\r\\n`` and ``\\r`` become ``\\n``; ANSI escape sequences and other control
   characters (except tab and newline) are removed; trailing blanks are stripped from each line;
   three or more newlines collapse to one blank line; the text is stripped.
2. **Redact secrets** over the whole text, kept code blocks included, each replaced by
   ``[REDACTED:<kind>]`` (only the value; keys, schemes and hosts stay readable):

   - ``private_key``: PEM private key blocks (``-----BEGIN [RSA|EC|DSA|OPENSSH|ENCRYPTED|PGP|...]
     PRIVATE KEY[ BLOCK]-----``), the whole block through its END line; an unterminated BEGIN
     runs to the end of the text. Also works on JSON-escaped blocks (``\\n`` inside a string).
   - ``url_credentials``: the userinfo of ``scheme://user:pass@host`` (scheme and host are kept).
   - ``jwt``: three base64url segments, the first starting ``eyJ``.
   - ``anthropic_api_key`` (``sk-ant-…``), ``openai_api_key`` (``sk-…``, ``sk-proj-…``,
     ``sk-svcacct-…``, ``sk-admin-…``), ``github_token`` (``ghp_ gho_ ghu_ ghs_ ghr_`` + 36 or
     more, ``github_pat_…``), ``gitlab_token`` (``glpat-…``), ``slack_token`` (``xox[abposr]-…``,
     ``xapp-…``), ``slack_webhook`` (``hooks.slack.com/services/…``), ``google_api_key``
     (``AIza`` + 35), ``stripe_key`` (``sk_live_ sk_test_ rk_live_ rk_test_``), ``npm_token``
     (``npm_`` + 36), ``pypi_token`` (``pypi-AgEIcHlwaS5vcmc…``), ``huggingface_token``
     (``hf_`` + 34 or more), ``sendgrid_key`` (``SG.….…``), ``age_secret_key``
     (``AGE-SECRET-KEY-1…``), ``aws_access_key_id`` (``AKIA``/``ASIA`` + 16).
   - ``bearer_token`` / ``basic_auth`` / ``authorization``: the credential of an
     ``Authorization:`` (or ``Proxy-Authorization:``) header, by scheme; also a bare
     ``Bearer <16+ chars>``.
   - ``password``: ``machine … login … password X`` (.netrc) and ``curl -u user:X``.
   - Key/value assignments whose key names a secret, in env, shell, YAML (including ``|``/``>``
     block scalars), JSON, TOML/INI, Python (also annotated ``key: str = "…"``), PHP ``=>``
     and ``--flag value`` / ``--flag=value`` forms (an unquoted value ends at a blank, a quote,
     ``,``, ``;``, ``&`` or a parenthesis; after a line-start YAML key, at the end of the line or
     a `` #`` comment). The key is split into words (snake, kebab, dotted and camelCase) and
     judged by them: a last word ending in ``password``/``passwd``/``passphrase`` (or
     ``pass``/``pwd`` after another word) gives ``password``; ending in
     ``token`` gives ``token``; ending in ``secret`` gives ``secret``; ``apikey``/``api key``
     gives ``api_key``; ``secret access key`` gives ``aws_secret_access_key``; ``private key``
     gives ``private_key``; ``<access|secret|signing|client|…> key`` gives ``secret``;
     ``credential(s)`` gives ``credential``; any other key containing the word ``secret``,
     ``password`` or ``token`` gives that kind when its last word says it holds the value
     (``…_value``, ``…_base``, ``…_data``, ``…_b64``, a number, …), not for metadata
     (``…_id``, ``…_name``, ``…_path``, ``…_url``, ``…_count``, ``…_prefixes``, …). So
     ``GITHUB_TOKEN``, ``accessToken``, ``x-api-key``, ``POSTGRES_PASSWORD`` and
     ``SECRET_KEY_BASE`` are redacted, and ``max_tokens``, ``token_count``, ``AWS_ACCESS_KEY_ID``
     (caught by its value instead), ``PWD`` and ``key`` are not. Only the value is replaced.
     Values that are not secrets are left alone: shorter than 3 characters, a number of up to 3
     digits (``{"token": 3}``), booleans/null, placeholders (``$VAR``, ``${VAR}``,
     ``${{ secrets.X }}``, ``{{ x }}``, ``%VAR%``, ``!vault``, ``<your-token>``, ``[PAD]``,
     ``***``, ``xxx``, ``…``), type names (``password: str``), code references that read as names
     (``os.environ["X"]``, ``get_token()``, ``process.env.TOKEN``, ``settings.DB_PASSWORD``,
     ``password=db_password``; but ``aB3xY9…(`` or ``$aB3dE5fG7hJ9k`` look generated and are
     redacted), words such as ``redacted``/``changeme``/``pass``, and (after ``:`` only) a few
     English words, so ``Token: see above`` survives.
   - ``aws_secret_access_key`` also for a standalone 40-character base64 string with upper and
     lower case letters and digits and high character entropy (a hex git SHA never matches).
   - ``encoded_blob``: a run of 120 or more base64/base64url characters with mixed case and
     digits (data URIs, dumped keys, tokens of unknown vendors) becomes ``[encoded data removed]``
     (this one runs before the key/value rules).

3. **Drop pasted material** (each replaced by one marker line, e.g.
   ``[command output removed: 12 lines]``, and counted):

   - ``pasted_file``: ``<file>``/``<file_contents>``/``<document>``/``<attachment>`` wrappers
     (an unclosed ``<file>`` runs to the end); fenced blocks larger than ``KEEP_CODE_MAX_LINES``
     lines or ``KEEP_CODE_MAX_CHARS`` characters (unless they are output, see below); fenced
     blocks or unfenced runs (3+ lines) of numbered lines (``00001| …``, ``   12→…``,
     ``   12\\t…``); unfenced runs that look like code or config (at least
     ``CODE_RUN_MIN_LINES`` code-like lines, at most one other line between two of them).
   - ``fenced_output``: fenced blocks tagged ``console``, ``log``, ``text``, ``output``,
     ``stdout``, ``terminal``, ``plaintext``, …; shell-tagged or untagged blocks holding a
     prompt line (``$ cmd``, ``user@host:~$ cmd``, ``PS C:\\> cmd``) followed by output; blocks
     in which most lines look like log lines; large untagged blocks that do not look like code;
     ``<stdout>``/``<stderr>``/``<output>``/``<bash-stdout>``/``<local-command-stdout>``…
     wrappers.
   - ``diff``: fenced blocks tagged ``diff``/``patch`` or whose content is a unified diff, and
     unfenced diffs of 3+ lines that start at a header (``diff --git``, ``--- a`` + ``+++ b``,
     ``@@ -1,2 +1,3 @@``, ``Index:``, ``*** Begin Patch``).
   - ``log_run``: unfenced runs with at least ``LOG_RUN_MIN_LINES`` log-like lines, at most one
     other line between two of them: timestamps, levels (``ERROR:``, ``[INFO]``), ``[tag] …``
     prefixes, logfmt, JSON lines, stack frames and tracebacks, ``path:12:`` grep and compiler
     output, pytest output, rustc snippets, ``npm ERR!``, ``ls -l`` rows, ``git log --oneline`` rows,
     ``$ cmd`` prompts.
   - ``encoded_blob``: 3+ consecutive lines of 40+ base64 characters (a key body without
     its PEM header).

   Secret redaction then runs a second time, since a removal can give a line a new start and so
   a new context for the key/value rules (``<file>…</file>token: x``).

   Short fenced snippets are kept (after redaction): up to ``KEEP_CODE_MAX_LINES`` lines and
   ``KEEP_CODE_MAX_CHARS`` characters of code, config or commands are what the people in a
   session are discussing, and a decision often quotes one (``use ${2:?…} instead``).
4. **Truncate**: text longer than ``max_segment_chars`` keeps its beginning (60%) and its end
   (40%) and loses the middle, cut at a line break when one is near, else at a blank, never
   inside a kept code block or a marker, with a ``[… N characters truncated …]`` line
   (``truncated``; N counts the original characters between the two kept parts). A line cut in
   its middle gets `` …`` or ``… `` at the cut. Redaction runs first, so a cut can never expose
   part of a secret.

``scrub_transcript`` scrubs every message and the session title (secrets only), drops messages
that end up empty (``empty_message``), then caps the whole transcript at ``max_total_chars`` by
keeping messages from both ends, alternately, and dropping the middle ones
(``messages_dropped``): a session's request is at its beginning and its outcome at its end.
``ScrubbedTranscript.gap_after`` says where the gap is. The report merges the reader's
``Transcript.dropped`` counts with the scrubber's kinds.

Scrubbing is idempotent: scrubbing scrubbed text returns it unchanged and counts nothing.
``redact_secrets`` applies step 2 alone (no structure removed, nothing truncated).

What it misses (known limits):

- Secrets with no recognisable shape and no telling key: a password in plain prose (``the db
  password is hunter2``), a hex or short random API key of an unlisted vendor, a key name that
  does not say ``secret``/``token``/``password``/``api key`` (``DB_PW=…``, ``sig=…``), and
  space-separated config syntaxes other than .netrc and ``--flag value`` (``requirepass x``).
- Secrets glued to a word (``tokenghp_…``), split across lines, encoded (base64 of a key under
  120 characters, URL-encoded) or obfuscated, and unquoted values with blanks outside
  line-start YAML (``PASSWORD=correct horse`` keeps ``horse``).
- An unquoted value is cut at a parenthesis or ``,;&``, so ``password=ab(cd)`` keeps ``(cd)``;
  a value that starts like a placeholder (``$``, ``{``, ``<``, ``%…%``, ``…``) is kept, and so is
  a word-like name followed by ``(`` or ``[`` (``token=get_token()``).
- Pasted material without fences that looks like prose: a short log (fewer than
  ``LOG_RUN_MIN_LINES`` lines), a file dump of prose or Markdown, a config excerpt shorter than
  ``CODE_RUN_MIN_LINES`` lines. Truncation bounds what gets through.
- False positives are possible and accepted as cheaper than a leak: a 40-character mixed-case
  alphanumeric string, a 120-character identifier, an ``Authorization:`` value, a prose word
  after ``secret:``, and everything after an unclosed ``<file>`` or PEM BEGIN line.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Final

import attrs

from coffer_memory.transcripts.models import Message, SessionSummary, Transcript

__all__ = [
    "CODE_RUN_MIN_LINES",
    "KEEP_CODE_MAX_CHARS",
    "KEEP_CODE_MAX_LINES",
    "LOG_RUN_MIN_LINES",
    "MIN_SEGMENT_CHARS",
    "ScrubReport",
    "ScrubbedTranscript",
    "redact_secrets",
    "scrub_text",
    "scrub_transcript",
]

KEEP_CODE_MAX_LINES: Final = 15
"""A fenced code block with more lines than this is a pasted file, not a snippet."""
KEEP_CODE_MAX_CHARS: Final = 800
"""A fenced code block with more characters than this is a pasted file, not a snippet."""
LOG_RUN_MIN_LINES: Final = 4
"""Log-like unfenced lines needed before a run is dropped (fewer are usually quoted on purpose)."""
CODE_RUN_MIN_LINES: Final = 12
"""Code-like unfenced lines needed before a run counts as a pasted file."""
MIN_SEGMENT_CHARS: Final = 200
"""The smallest ``max_segment_chars`` accepted: below it the truncation marker crowds out the text."""

_HEAD_SHARE: Final = 0.6  # of a truncated message's budget; the rest goes to its end


# --------------------------------------------------------------------------------------------
# Public types
# --------------------------------------------------------------------------------------------


def _clean_counts(counts: Mapping[str, int]) -> dict[str, int]:
    return {k: int(v) for k, v in sorted(counts.items()) if v}


@attrs.frozen
class ScrubReport:
    """What scrubbing removed, counted by kind. Holds counts only, never a removed value."""

    counts: Mapping[str, int] = attrs.field(factory=dict, converter=_clean_counts)
    """Kind (``github_token``, ``log_run``, ``tool_result``, ...) to how many, sorted by kind."""

    @property
    def total(self) -> int:
        """How many things were removed or redacted in all."""
        return sum(self.counts.values())


@attrs.frozen
class ScrubbedTranscript:
    """A transcript that is safe to show an LLM: redacted, stripped of pastes, capped in size."""

    summary: SessionSummary
    """The session's summary, its title redacted."""
    messages: tuple[Message, ...]
    report: ScrubReport
    gap_after: int | None = None
    """When middle messages were dropped to fit ``max_total_chars``: ``messages[:gap_after]`` is
    the beginning of the session and ``messages[gap_after:]`` its end. ``None`` when nothing was."""


# --------------------------------------------------------------------------------------------
# Markers
# --------------------------------------------------------------------------------------------

_MARKER_TEXT: Final = {
    "fenced_output": "command output",
    "log_run": "log output",
    "pasted_file": "file content",
    "diff": "diff",
}
_ENCODED_MARKER: Final = "[encoded data removed]"

# A line made only of one of our markers. Runs never cross one, so that two fragments brought
# together by a removal or a truncation are not re-joined into a new run on a second pass.
_MARKER_LINE = re.compile(
    r"^\[(?:(?:command output|log output|file content|diff) removed: \d+ lines?"
    r"|encoded data removed|… \d+ characters truncated …)\]$"
)
# Spans a truncation must not cut through (they contain blanks, unlike ``[REDACTED:kind]``).
_MARKER_SPAN = re.compile(
    r"\[(?:(?:command output|log output|file content|diff) removed: \d+ lines?"
    r"|encoded data removed|… \d+ characters truncated …)\]|\[REDACTED:[a-z0-9_]+\]"
)


# The start of any marker: a value that starts like one was put there by an earlier pass.
_MARKER_START = re.compile(r"\[(?:REDACTED:|encoded\b|command\b|log\b|file\b|diff\b|… )")


def _redacted(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def _removed_line(kind: str, n_lines: int) -> str:
    return f"[{_MARKER_TEXT[kind]} removed: {n_lines} line{'' if n_lines == 1 else 's'}]"


# --------------------------------------------------------------------------------------------
# 1. Normalisation
# --------------------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_BLANK_RUN = re.compile(r"\n{3,}")


def _normalise(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", _ANSI.sub("", text))
    # Per line rstrip, not ``[ \t]+$`` with MULTILINE: the regex is quadratic on a long blank run.
    text = "\n".join(line.rstrip(" \t") for line in text.split("\n"))
    return _BLANK_RUN.sub("\n\n", text).strip()


# --------------------------------------------------------------------------------------------
# 2. Secrets
# --------------------------------------------------------------------------------------------

_PEM = re.compile(
    r"-{5}BEGIN[A-Z0-9 ]{0,30} PRIVATE KEY(?: BLOCK)?-{5}"
    r".*?(?:-{5}END[A-Z0-9 ]{0,30} PRIVATE KEY(?: BLOCK)?-{5}|\Z)",
    re.DOTALL,
)

_URL_CREDENTIALS = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,20}://)"
    r"(?P<user>[^\s/@:\[\]\"'<>`()]*):(?P<pw>[^\s/\[\]\"'<>`()]{1,256})@(?=[^\s/@]*[A-Za-z0-9])"
)

_JWT = re.compile(
    r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*(?![A-Za-z0-9_-])"
)

# Vendor tokens with a recognisable shape, most specific first (``sk-ant-`` before ``sk-``).
_VENDOR_TOKENS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    ("anthropic_api_key", re.compile(r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{20,}")),
    (
        "openai_api_key",
        re.compile(r"(?<![A-Za-z0-9_-])sk-(?!ant-)(?:proj-|svcacct-|admin-)?(?P<body>[A-Za-z0-9_-]{20,})"),
    ),
    ("github_token", re.compile(r"(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{36,251}(?![A-Za-z0-9])")),
    ("github_token", re.compile(r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{22,}")),
    ("gitlab_token", re.compile(r"(?<![A-Za-z0-9_-])glpat-[A-Za-z0-9_-]{20,}")),
    ("slack_token", re.compile(r"(?<![A-Za-z0-9_-])xox[abposr]-[A-Za-z0-9-]{10,}")),
    ("slack_token", re.compile(r"(?<![A-Za-z0-9_-])xapp-\d-[A-Za-z0-9-]{10,}")),
    ("slack_webhook", re.compile(r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]+")),
    ("google_api_key", re.compile(r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])")),
    ("stripe_key", re.compile(r"(?<![A-Za-z0-9_])[sr]k_(?:live|test)_[0-9A-Za-z]{16,}")),
    ("npm_token", re.compile(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])")),
    ("pypi_token", re.compile(r"(?<![A-Za-z0-9_-])pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{20,}")),
    ("huggingface_token", re.compile(r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{34,}(?![A-Za-z0-9])")),
    ("sendgrid_key", re.compile(r"(?<![A-Za-z0-9_-])SG\.[A-Za-z0-9_-]{20,24}\.[A-Za-z0-9_-]{40,50}")),
    ("age_secret_key", re.compile(r"AGE-SECRET-KEY-1[0-9A-Z]{50,}")),
    ("aws_access_key_id", re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])")),
)
# ``sk-`` followed by plain kebab-case words is an identifier (``sk-learn-style-wrapper``).
_KEBAB_WORDS = re.compile(r"[a-z]{1,12}(?:-[a-z]{1,12})+")

_AUTH_HEADER = re.compile(
    r"(?<![\w-])(?P<pre>(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?:(?P<scheme>bearer|basic|token|digest|bot|apikey|sso-key)[ \t]+)?)"
    r"(?P<val>[A-Za-z0-9._~+/=-]+)",  # token68 (RFC 7235) and base64: a ``)`` or a quote ends it
    re.IGNORECASE,
)
_BARE_BEARER = re.compile(r"(?<![\w-])(?P<pre>Bearer[ \t]+)(?P<val>[A-Za-z0-9._~+/-]{16,}=*)")
_NETRC = re.compile(
    r"(?P<pre>\bmachine[ \t]+\S+[ \t]+login[ \t]+\S+[ \t]+password[ \t]+)(?P<val>[^\s\"'`()<>,;]+)"
)
_CURL_USER = re.compile(r"(?P<pre>(?<!\S)(?:-u|--user)[ \t]+[\"']?[^\s:\"'@]+:)(?P<val>[^\s\"'`()<>,;]+)")

# Assignment values: a quoted string, or an unquoted run up to a blank, a quote, `,` `;` `&` or a
# parenthesis (``f(password=x)(token=y)``); an unquoted run may open an unclosed quote.
# Matched in a lookahead, so that a key that holds no secret does not swallow its value, which
# may hold one (``https://host/?token=...`` is a ``https:`` "assignment" first); see _sub_keyed.
# Bounded (a value longer than 1024 characters keeps its tail, unless it is an encoded blob),
# since a lookahead is re-run from every key in a long run of ``a=b=c=...``.
_VALUE = r"""(?=(?P<val>"(?:[^"\\\n]|\\.){0,1024}"|'(?:[^'\\\n]|\\.){0,1024}'|`[^`\n]{0,1024}`|["'`]?[^\s"'`,;&()]{1,1024}))"""
# A key naming a secret has one of these in it (see _secret_kind_for_key): checking it first
# keeps the value lookahead from running after every ``word:`` of the text.
_KEY = r"(?P<key>(?=[A-Za-z0-9_.-]{0,80}?(?i:pass|pwd|token|secret|key|cred))[A-Za-z_][A-Za-z0-9_.-]{0,80})"
_KEY_START = r"(?<![A-Za-z0-9_$./])"  # not inside a word, a dotted name or a path

# A key naming a secret and its separator, glued inside another value (see _value_of).
_EMBEDDED_KEY = re.compile(_KEY_START + _KEY + r"[\"'`]?[ \t]*(?::=|=>|=|:)")

# YAML block scalar: ``password: |`` followed by the more-indented lines that hold the value.
_YAML_BLOCK = re.compile(
    r"^(?P<pre>(?P<indent>[ \t]*)(?:-[ \t]+)?" + _KEY + r"[\"']?[ \t]*:[ \t]*[|>][+-]?\d?[ \t]*\n)"
    r"(?P<val>(?:(?P=indent)[ \t]+\S[^\n]*(?:\n|$)|[ \t]*\n(?=(?P=indent)[ \t]+\S))+)",
    re.MULTILINE,
)
# Python/TypeScript annotated assignment: ``api_key: str = "..."``.
_ANNOTATED = re.compile(
    _KEY_START + r"(?P<pre>" + _KEY + r"[ \t]*:[ \t]*[A-Za-z_][\w\[\]., |]{0,60}?[ \t]*=(?!=)[ \t]*)" + _VALUE
)
# YAML ``key: value`` at the start of a line: an unquoted value runs to the end of the line
# (or a `` #`` comment), since YAML scalars may hold blanks.
_YAML_LINE = re.compile(
    r"^(?P<pre>[ \t]*(?:-[ \t]+)?" + _KEY + r"[\"']?[ \t]*:[ \t]+)"
    r"(?=(?P<val>[^\s\"'`#|>{\[&*!](?:[^\n#]|(?<![ \t])#){0,1024}))",
    re.MULTILINE,
)
# The key may close a quote, a backtick or Markdown emphasis (``**Password:** hunter2``).
_ASSIGNMENT = re.compile(
    _KEY_START
    + r"(?P<pre>"
    + _KEY
    + r"(?P<kq>[\"'`]|\*\*|__)?(?P<sep>[ \t]*(?::=|=>|=|:(?:\*\*|__)?)[ \t]*))"
    + _VALUE
)
_CLI_FLAG = re.compile(r"(?<![\w-])(?P<pre>--(?P<key>[A-Za-z][A-Za-z0-9_-]{0,60})[ \t]+)" + _VALUE)

_AWS_SECRET_BARE = re.compile(r"(?<![A-Za-z0-9+/_.-])[A-Za-z0-9+/]{40}(?![A-Za-z0-9+/=_.-])")
_ENCODED_BLOB = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{120,}={0,2}(?![A-Za-z0-9+/_-])")


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_KEY_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_SECRET_KEY_PREFIXES: Final = frozenset(
    {
        "access",
        "account",
        "admin",
        "app",
        "auth",
        "client",
        "encryption",
        "license",
        "master",
        "service",
        "session",
        "shared",
        "signing",
        "subscription",
        "webhook",
        "sas",
        "secret",
    }
)
# Last words saying that a key naming a secret holds its value (``SECRET_KEY_BASE``,
# ``password_b64``, ``token2``); any other last word (``secret_name``, ``token_count``,
# ``SECRET_KEY_PREFIXES``) describes the secret instead.
_HOLDER_WORDS: Final = _word_set(
    "value val values base data str string b64 base64 hex raw plain plaintext bytes bin enc "
    "encrypted literal content contents"
)
_TYPE_WORDS: Final = _word_set(
    "str string bytes int integer bool boolean any none null optional secretstr secretbytes "
    "number object unknown true false nil undefined char text list dict array map"
)
_PLACEHOLDER_WORDS: Final = _word_set(
    "redacted removed hidden masked secret secrets password passwords token tokens apikey "
    "api_key changeme placeholder example todo tbd n/a na pass passwd pwd pw user username "
    "foo bar baz"
)
_PROSE_WORDS: Final = _word_set(
    "the a an is are was were be see use set not no yes it its this that these those your my our "
    "their from in on at to for of with and or missing here below above same unchanged empty "
    "only also still now always never should must will can could would may might needs goes lives "
    "stays comes stored kept"
)
# Templates and placeholders: ``${…}``, ``$(…)``, ``{…}``, ``<…>``, ``[…]``, ``…``.
_TEMPLATE = re.compile(r"\$\{.*|\$\(.*|\{.*|<.*|\[.*\]|….*|\.\.\..*")
# A variable reference: ``$NAME``, ``%NAME%``, a YAML tag ``!name``.
_VARIABLE = re.compile(r"\$(?P<name>[A-Za-z_]\w*)|%(?P<win>[A-Za-z_]\w*)%|!(?P<tag>[a-z_]+)")
_FIRST_WORD_END = re.compile(r"[\[\]|, ]")
_CODE_REFERENCE = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*(?P<call>[ \t]*[(\[].*)?")
_CODE_ROOTS: Final = _word_set(
    "os process env environ self this config cfg conf settings args opts options secrets vars "
    "ctx context params props request req app st input inputs credentials creds"
)


def _key_words(key: str) -> list[str]:
    return [w.lower() for w in _KEY_WORDS.findall(key)]


def _secret_kind_for_key(key: str) -> str | None:
    """The kind of secret a key holds (``password``, ``token``, ...), or None if it holds none."""
    words = _key_words(key)
    if not words:
        return None
    last = words[-1]
    prev = words[-2] if len(words) > 1 else ""
    if last == "key" and prev == "access" and "secret" in words[:-2]:
        return "aws_secret_access_key"
    if last.endswith(("password", "passwd", "passphrase")) or (last in ("pass", "pwd") and prev):
        return "password"
    if last.endswith("token"):
        return "token"
    if last.endswith("secret"):
        return "secret"
    if last == "apikey" or (last == "key" and prev == "api"):
        return "api_key"
    if last == "privatekey" or (last == "key" and prev == "private"):
        return "private_key"
    if last in ("accesskey", "secretkey", "authkey", "signingkey") or (
        last == "key" and prev in _SECRET_KEY_PREFIXES
    ):
        return "secret"
    if last in ("credential", "credentials", "creds"):
        return "credential"
    if last in _HOLDER_WORDS or last.isdigit():
        for word, kind in (("secret", "secret"), ("password", "password"), ("token", "token")):
            if word in words:
                return kind
    return None


def _has_letter_and_digit(s: str) -> bool:
    return any(c.isdigit() for c in s) and any(c.isalpha() for c in s)


def _mixed_case_and_digits(s: str) -> bool:
    return any(c.isupper() for c in s) and any(c.islower() for c in s) and any(c.isdigit() for c in s)


_WORDISH = re.compile(r"[A-Z]?[a-z]{4,}")
_PATH_WORD = re.compile(r"^/|/$|(?:^|/)[a-z]{4,}(?:/|$)")  # a rooted path or a lowercase folder


def _looks_random(s: str) -> bool:
    """A generated token rather than a name from code, even where code would be (``aB3…(``):
    mixed case and digits over 12+ characters, letters and digits over 20+, or mixed case over
    16+ that is not made of words (``getUserAccessToken`` is)."""
    if (len(s) >= 12 and _mixed_case_and_digits(s)) or (len(s) >= 20 and _has_letter_and_digit(s)):
        return True
    mixed = any(c.isupper() for c in s) and any(c.islower() for c in s)
    return len(s) >= 16 and mixed and sum(len(w) for w in _WORDISH.findall(s)) < len(s) / 2


_DIGIT_RUN = re.compile(r"\d+")


def _looks_like_name(s: str) -> bool:
    """A name from code (``get_password``, ``vault``, ``os``, ``accessToken``), not a value that
    merely has an identifier's characters (``J422AUUL6M07``, ``uCukUpycMbCB``)."""
    if _looks_random(s) or len(_DIGIT_RUN.findall(s)) >= 2:
        return False  # names seldom mix digits in (``q4f4xnwrbf59``); ``sha256``, ``token2`` do not
    if "_" in s or (s.isalpha() and s.islower() and len(s) <= 4):
        return True
    return sum(len(w) for w in _WORDISH.findall(s)) >= len(s) / 2


def _entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def _is_not_a_secret(value: str, *, quoted: bool, after_colon: bool, call: bool = False) -> bool:
    """True for assignment values that are references, placeholders or prose, not credentials.

    ``call``: the value is directly followed by ``(`` or ``[`` in the text (``f(x)``, ``a[0]``).
    """
    v = value.strip()
    if len(v) < 3 or not any(c.isalnum() for c in v) or (v.isdigit() and len(v) <= 3):
        return True  # too short to be a credential, or a count (``{"token": 3}``)
    if _MARKER_START.match(v) or _TEMPLATE.fullmatch(v):
        return True  # ours, or ``${VAR}``, ``${{ secrets.X }}``, ``{{ x }}``, ``<token>``, ``[PAD]``
    variable = _VARIABLE.fullmatch(v)
    if variable is not None and not _looks_random(variable["name"] or variable["win"] or variable["tag"]):
        return True  # ``$DB_PASSWORD``, ``%API_KEY%``, ``!vault`` (but ``$aB3dE5fG7hJ9k`` is a value)
    low = v.lower()
    if low in _TYPE_WORDS or low in _PLACEHOLDER_WORDS or set(low) <= set("x*.-_ "):
        return True
    first = _FIRST_WORD_END.split(low, maxsplit=1)[0]
    if first in _TYPE_WORDS and not quoted:
        return True  # ``password: Optional[str]``, ``token: str | None``
    if quoted:
        return False
    ref = _CODE_REFERENCE.fullmatch(v)
    name = v.split("(", 1)[0].split("[", 1)[0]
    if ref is not None and all(_looks_like_name(part) for part in name.split(".")):
        if ref["call"] or call:
            return True  # ``os.environ["X"]``, ``getenv("X")``, ``read_secret()``
        if "." in v and (v.split(".", 1)[0].lower() in _CODE_ROOTS or v.count(".") > 1):
            return True  # ``settings.DB_PASSWORD``, ``process.env.TOKEN``
        # ``password=db_password``, ``token=GITHUB_TOKEN``: a variable named after a secret. A
        # digit or a lone capitalised word (``MyPassword1``, ``SuperSecret``) reads as a value.
        if "_" in v and not any(ch.isdigit() for ch in v) and _secret_kind_for_key(v) is not None:
            return True
    if not after_colon:
        return False
    # ``Token: see above``: after a colon, prose is likelier than a password.
    return low in _PROSE_WORDS or (" " in low and low.split(" ", 1)[0] in _PROSE_WORDS)


_TRAILING_PUNCT_CHARS = ")]}>.,:;" + " \t\n\r\f\v"


def _redact_value(
    prefix: str, value: str, kind: str, counts: Counter[str], *, after_colon: bool, call: bool = False
) -> str | None:
    """``prefix`` + the redacted ``value`` (its quotes and trailing punctuation kept), or None."""
    quoted = len(value) >= 2 and value[0] in "\"'`" and value[-1] == value[0]
    if quoted:
        inner, lead, trail = value[1:-1], value[0], value[-1]
    else:
        lead = value[0] if value[0] in "\"'`" else ""
        body = value[len(lead) :]
        # str.rstrip, not a ``[...]+$`` search: that regex is quadratic on long runs of those chars.
        inner = body.rstrip(_TRAILING_PUNCT_CHARS)
        trail = body[len(inner) :]
    if _is_not_a_secret(inner, quoted=quoted, after_colon=after_colon, call=call and not trail):
        return None
    counts[kind] += 1
    return prefix + lead + _redacted(kind) + trail


def _value_of(m: re.Match[str]) -> str:
    """The value of a keyed match, up to any secret key glued inside it (``pw~*token: x``), so
    that the redaction of one value never swallows the key of the next one."""
    value = m["val"]
    if value[:1] in "\"'`" and len(value) >= 2 and value[-1] == value[0]:
        return value  # a quoted string is one value
    for e in _EMBEDDED_KEY.finditer(m.string, m.start("val") + 1, m.end("val")):
        if _secret_kind_for_key(e["key"]) is not None:
            return m.string[m.start("val") : e.start()]
    return value


def _sub_keyed(pattern: re.Pattern[str], text: str, repl: Callable[[re.Match[str], str], str | None]) -> str:
    """``pattern.sub`` for patterns that consume a key and look ahead at its value (group ``val``).

    ``repl(match, value)`` returns what replaces the key and the value, or None to leave them.
    A match left alone consumes only its key, so the scan goes on inside its value; a replaced
    match consumes the value too, and matches starting inside it are skipped.
    """
    out: list[str] = []
    pos = 0
    for m in pattern.finditer(text):
        if m.start() < pos:
            continue
        value = _value_of(m)
        replacement = repl(m, value)
        if replacement is None:
            continue
        out += (text[pos : m.start()], replacement)
        pos = m.start("val") + len(value)
    out.append(text[pos:])
    return "".join(out)


def redact_secrets(text: str, counts: Counter[str] | None = None) -> str:
    """Replace every secret in ``text`` with ``[REDACTED:<kind>]`` (see the module docstring).

    Counts each redaction by kind into ``counts`` when given. Only secrets are touched: no
    structure is removed and nothing is truncated, so this also suits short single-line strings
    such as titles.
    """
    c: Counter[str] = Counter() if counts is None else counts

    def whole(kind: str) -> Callable[[re.Match[str]], str]:
        def repl(m: re.Match[str]) -> str:
            c[kind] += 1
            return _redacted(kind)

        return repl

    text = _PEM.sub(whole("private_key"), text)

    def url(m: re.Match[str]) -> str:
        if _is_not_a_secret(m["pw"], quoted=True, after_colon=False):
            return m.group()
        c["url_credentials"] += 1
        return m["scheme"] + _redacted("url_credentials") + "@"

    text = _URL_CREDENTIALS.sub(url, text)
    text = _JWT.sub(whole("jwt"), text)

    def openai(m: re.Match[str]) -> str:
        if _KEBAB_WORDS.fullmatch(m["body"]):
            return m.group()
        c["openai_api_key"] += 1
        return _redacted("openai_api_key")

    for kind, pattern in _VENDOR_TOKENS:
        text = pattern.sub(openai if kind == "openai_api_key" else whole(kind), text)

    def blob(m: re.Match[str]) -> str:
        s = m.group()
        if not _mixed_case_and_digits(s):
            return s
        c["encoded_blob"] += 1
        return _ENCODED_MARKER

    # Before the key/value rules, so that they judge a long value the same way on every pass.
    text = _ENCODED_BLOB.sub(blob, text)

    def auth(m: re.Match[str]) -> str:
        scheme = (m["scheme"] or "").lower()
        if not scheme and m["val"].lower() in ("bearer", "basic", "token", "digest"):
            return m.group()
        kind = {"bearer": "bearer_token", "basic": "basic_auth"}.get(scheme, "authorization")
        out = _redact_value(m["pre"], m["val"], kind, c, after_colon=False)
        return m.group() if out is None else out

    text = _AUTH_HEADER.sub(auth, text)

    def bearer(m: re.Match[str]) -> str:
        if not _has_letter_and_digit(m["val"]):
            return m.group()
        c["bearer_token"] += 1
        return m["pre"] + _redacted("bearer_token")

    text = _BARE_BEARER.sub(bearer, text)

    def fixed(kind: str) -> Callable[[re.Match[str]], str]:
        def repl(m: re.Match[str]) -> str:
            out = _redact_value(m["pre"], m["val"], kind, c, after_colon=False)
            return m.group() if out is None else out

        return repl

    text = _NETRC.sub(fixed("password"), text)
    text = _CURL_USER.sub(fixed("password"), text)

    def block(m: re.Match[str]) -> str:
        kind = _secret_kind_for_key(m["key"])
        if kind is None or _is_not_a_secret(m["val"].strip(), quoted=True, after_colon=False):
            return m.group()
        c[kind] += 1
        tail = "\n" if m["val"].endswith("\n") else ""
        return m["pre"] + m["indent"] + "  " + _redacted(kind) + tail

    text = _YAML_BLOCK.sub(block, text)

    def keyed(*, after_colon: bool | None) -> Callable[[re.Match[str], str], str | None]:
        def repl(m: re.Match[str], value: str) -> str | None:
            kind = _secret_kind_for_key(m["key"])
            if kind is None or not value:
                return None
            colon = after_colon if after_colon is not None else (":" in m["sep"] and "=" not in m["sep"])
            end = m.start("val") + len(value)
            call = m.string[end : end + 1] in ("(", "[")
            return _redact_value(m["pre"], value, kind, c, after_colon=colon, call=call)

        return repl

    text = _sub_keyed(_ANNOTATED, text, keyed(after_colon=False))
    text = _sub_keyed(_YAML_LINE, text, keyed(after_colon=True))
    text = _sub_keyed(_ASSIGNMENT, text, keyed(after_colon=None))
    text = _sub_keyed(_CLI_FLAG, text, keyed(after_colon=False))

    def aws_secret(m: re.Match[str]) -> str:
        s = m.group()
        if not _mixed_case_and_digits(s) or _entropy(s) < 4.1:
            return s
        if sum(len(w) for w in _WORDISH.findall(s)) >= len(s) / 2 or _PATH_WORD.search(s):
            return s  # ``src/components/Header/NavBar2Item``, ``/global/facts/01ARZ…``: a path
        c["aws_secret_access_key"] += 1
        return _redacted("aws_secret_access_key")

    text = _AWS_SECRET_BARE.sub(aws_secret, text)

    return text


# --------------------------------------------------------------------------------------------
# 3. Pasted material
# --------------------------------------------------------------------------------------------

_FILE_TAGS: Final = frozenset({"file", "file_contents", "file-contents", "document", "attachment"})
_WRAPPER_TAG = re.compile(
    r"<(?P<close>/)?(?P<tag>file|file_contents|file-contents|document|attachment|stdout|stderr|output|"
    r"command-output|command_output|bash-stdout|bash-stderr|local-command-stdout|local-command-stderr|"
    r"tool_result|function_results)(?:[ \t][^>\n]*)?>",
    re.IGNORECASE,
)

_FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n]*)$")
_FENCE_CLOSE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*$")

_OUTPUT_LANGS: Final = _word_set(
    "console shell-session sh-session shellsession terminal term tty output out stdout stderr log logs "
    "text txt plain plaintext ansi result results"
)
_DIFF_LANGS: Final = frozenset({"diff", "patch", "udiff", "git-diff", "gitdiff"})
_SHELL_LANGS: Final = _word_set("sh bash shell zsh fish ksh powershell pwsh ps ps1 cmd bat batch console")

_PROMPT_LINE = re.compile(
    r"^[ \t]*(?:\$|%|❯|➜|PS [^>\n]*>|[\w.-]+@[\w.-]+(?::[^$#\n]*)?[$#]|\([\w.-]+\)[ \t]*\$)[ \t]+\S"
)
_NUMBERED_LINE = re.compile(r"^[ \t]*\d{1,6}(?:\||→|\t| \| |: )")
_BASE64_LINE = re.compile(r"^[ \t]*[A-Za-z0-9+/]{40,}={0,2}$")
_DIFF_HEADER = re.compile(
    r"^(?:diff --git |@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@|Index: \S|\*\*\* Begin Patch"
    r"|\*\*\* (?:Update|Add|Delete) File: )"
)
_DIFF_FILE_PAIR = re.compile(r"^--- \S")
_DIFF_BODY = re.compile(
    r"^(?:[ +\-\\]|@@|diff --git |index [0-9a-f]|Index: |={5,}|--- |\+\+\+ |\*\*\* |new file mode|"
    r"deleted file mode|similarity index|rename (?:from|to) |old mode|new mode|Binary files )"
)

_LOG_LINE = re.compile(
    r"""^[ \t]*(?:
      \[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}                                  # ISO timestamp
    | \[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?[ \t]                               # time of day
    | \[?(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[ \t]+\d{1,2}[ \t]+\d{2}:\d{2}  # syslog
    | \[?(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|FATAL|CRITICAL|SEVERE|PANIC)\]?
        (?::|[ \t]+(?![=(:]))                                                # level
    | [IWEF]\d{4}[ \t]+\d{2}:\d{2}                                           # glog
    | \[(?=[^\]\n]*[A-Za-z])[\w./:@-]{1,40}\][ \t]+\S                        # [tag] message
    | level=\w | time="?\d{4}                                                # logfmt
    | \{"[\w@.-]+":                                                          # JSON lines
    | Traceback[ ]\(most[ ]recent[ ]call[ ]last\):
    | File[ ]"[^"\n]+",[ ]line[ ]\d+
    | at[ ]+[\w.$<>\[\]/-]+[ \t]*\(.*[:)]                                   # JS / Java frame
    | at[ ]+\S+:\d+:\d+                                                      # bare node frame
    | (?:[\w.]+\.)?(?:[A-Z]\w*)?(?:Error|Exception)(?::|$)                   # exception line
    | goroutine[ ]\d+[ ]\[
    | -->[ ]\S+:\d+:\d+ | \d*[ ]+\|$ | \d*[ ]+\|[ ](?!.*\|$)                # rustc (not a table row)
    | (?=[^\s:]{0,300}[./])[\w./~-]{1,300}:\d+(?::\d+)?[:-]                  # path:line: (grep, cc)
    | [\w./-]+\.py::\S+                                                      # pytest node id
    | [\w./-]+\.py[ ]+[.FEsxX]+(?:[ ]+\[[ \d]+%\])?$                        # pytest progress
    | (?:platform[ ]\w+[ ]--[ ]|rootdir:|cachedir:|configfile:|plugins:|collected[ ]\d+[ ]item)
    | >[ ]{3,}\S                                                              # pytest failing line
    | (?:PASSED|FAILED|SKIPPED|XFAIL|XPASS)\b
    | ={3,}[ ][^=\n]*[ ]={3,}$ | _{3,}[ ][^_\n]*[ ]_{3,}$                   # pytest separators
    | E[ ]{3}
    | npm[ ](?:ERR!|WARN|notice)
    | (?:error|warning|note|hint|fatal)(?:\[\w+\])?:[ ]
    | [dlcbps-][rwxsStT-]{9}[.@+]?[ \t]+\d+                                  # ls -l
    | [0-9a-f]{7,40}[ ]\S                                                    # git log --oneline
    | \$[ ]\S                                                                # shell prompt
    | [\^~]{3,}[ \t]*$                                                       # caret underline
    | >>>[ ]
    )""",
    re.VERBOSE,
)
_CODE_LINE = re.compile(
    r"""^(?:
      [ \t]{2,}(?![-*+][ ]|\d+[.)][ ])\S                       # indented, not a nested list item
    | (?:def[ ]\w+[ ]?\(|class[ ]\w+[(:]|import[ ][\w.]+|from[ ][\w.]+[ ]import[ ]|return\b
      |(?:const|let|var)[ ]+[\w$]+[ ]*[=:]|function[ ]*\w*[ ]*\(|func[ ]|fn[ ]\w|pub[ ]|package[ ]
      |(?:public|private|protected|static)[ ]|struct[ ]|enum[ ]|impl\b|interface[ ]\w|namespace[ ]
      |\#include|\#define|\#!/|@\w+(?:\(|$))
    | [}\])][;,)]*[ \t]*$                                      # closing brackets
    | .*[;{(\[,][ \t]*$                                        # line ending with ; { ( [ ,
    | [\w.-]+[ \t]*[:=][ \t]*(?!…)\S+[ \t]*$                    # key: value (not a cut "key: …")
    | <[\w/!?][^>]*>[ \t]*$                                    # XML / HTML tag
    )""",
    re.VERBOSE,
)


def _wrapper_spans(text: str) -> list[tuple[int, int, str, bool]]:
    """``<tag>…</tag>`` wrappers as (start, end, tag, closed), outermost first-come, in order.

    An opening tag pairs with the next closing tag of its name; an unclosed file wrapper runs to
    the end of the text, any other unclosed tag is left alone. Found in one pass over the tags
    (a lazy ``<tag>.*?</tag>`` regex rescans the rest of the text from every unclosed tag).
    """
    tags = list(_WRAPPER_TAG.finditer(text))
    next_close: list[int | None] = [None] * len(tags)
    seen: dict[str, int] = {}
    for k in range(len(tags) - 1, -1, -1):
        name = tags[k]["tag"].lower()
        if tags[k]["close"]:
            seen[name] = k
        else:
            next_close[k] = seen.get(name)
    spans: list[tuple[int, int, str, bool]] = []
    pos = 0
    for k, m in enumerate(tags):
        if m["close"] or m.start() < pos:
            continue
        name = m["tag"].lower()
        close = next_close[k]
        if close is not None:
            spans.append((m.start(), tags[close].end(), name, True))
            pos = tags[close].end()
        elif name in _FILE_TAGS:
            spans.append((m.start(), len(text), name, False))
            break
    return spans


def _wrapper_pass(text: str, counts: Counter[str]) -> str:
    out: list[str] = []
    pos = 0
    for start, end, tag, closed in _wrapper_spans(text):
        kind = "pasted_file" if tag in _FILE_TAGS else "fenced_output"
        counts[kind] += 1
        opening = _WRAPPER_TAG.match(text, start)
        body_start = opening.end() if opening else start
        body_end = text.rfind("<", body_start, end) if closed else end
        body = text[body_start:body_end].strip("\n")
        # Keep the marker on a line of its own, so that later passes treat it as a break.
        before = "" if start == 0 or text[start - 1] == "\n" else "\n"
        after = "" if end == len(text) or text[end] == "\n" else "\n"
        out += (text[pos:start], before, _removed_line(kind, body.count("\n") + 1 if body else 0), after)
        pos = end
    out.append(text[pos:])
    return "".join(out)


_INFO_WORD_END = re.compile(r"[:,{}=]")  # ``python:src/app.py``, ``{.python}``, ``ts,title=x``


def _first_info_word(info: str) -> str:
    word = info.strip().lstrip("{.").split(None, 1)[0] if info.strip() else ""
    return _INFO_WORD_END.split(word, maxsplit=1)[0].lower()


def _looks_like_diff(lines: list[str]) -> bool:
    nonblank = [ln for ln in lines if ln.strip()]
    if not nonblank:
        return False
    headers = sum(1 for ln in nonblank if _DIFF_HEADER.match(ln) or _DIFF_FILE_PAIR.match(ln))
    body = sum(1 for ln in nonblank if _DIFF_BODY.match(ln))
    return headers > 0 and body >= 0.8 * len(nonblank)


def _share(lines: list[str], pattern: re.Pattern[str]) -> float:
    nonblank = [ln for ln in lines if ln.strip()]
    return sum(1 for ln in nonblank if pattern.match(ln)) / len(nonblank) if nonblank else 0.0


def _has_prompt_and_output(lines: list[str]) -> bool:
    prompts = {i for i, ln in enumerate(lines) if _PROMPT_LINE.match(ln)}
    if not prompts:
        return False
    first = min(prompts)
    return any(ln.strip() and i not in prompts for i, ln in enumerate(lines) if i > first)


def _classify_fence(info: str, body: list[str]) -> str | None:
    """The kind to drop a fenced block as, or None to keep it (a small snippet)."""
    lang = _first_info_word(info)
    nonblank = [ln for ln in body if ln.strip()]
    if not nonblank:
        return None
    if lang in _OUTPUT_LANGS:
        return "fenced_output"
    if lang in _DIFF_LANGS or _looks_like_diff(body):
        return "diff"
    if (lang in _SHELL_LANGS or not lang) and _has_prompt_and_output(body):
        return "fenced_output"
    if len(nonblank) >= 3 and _share(body, _NUMBERED_LINE) >= 0.6:
        return "pasted_file"
    if len(nonblank) >= 3 and _share(body, _LOG_LINE) >= 0.6:
        return "fenced_output"
    if len(body) > KEEP_CODE_MAX_LINES or sum(len(ln) + 1 for ln in body) > KEEP_CODE_MAX_CHARS:
        if not lang and _share(body, _CODE_LINE) < 0.5:
            return "fenced_output"
        return "pasted_file"
    return None


def _find_runs(
    lines: list[str],
    claimed: list[bool],
    hit: Callable[[str], bool],
    *,
    max_gap: int,
    min_hits: int,
) -> list[tuple[int, int]]:
    """Maximal runs of ``hit`` lines (as [start, end) line ranges) with at most ``max_gap`` other
    lines between two hits and at least ``min_hits`` hits. Claimed lines and marker lines always
    break a run.

    A part of a run never has more hits than the run, so text that kept a run (too few hits)
    keeps it on a second pass too, even after a truncation: scrubbing stays idempotent.
    """
    runs: list[tuple[int, int]] = []
    start = last = -1
    hits = 0

    def close() -> None:
        if start >= 0 and hits >= min_hits:
            runs.append((start, last + 1))

    for i, line in enumerate(lines):
        breaker = claimed[i] or bool(_MARKER_LINE.match(line))
        if not breaker and hit(line):
            if start >= 0 and i - last - 1 > max_gap:
                close()
                start, hits = -1, 0
            if start < 0:
                start = i
            last = i
            hits += 1
        elif breaker or (start >= 0 and i - last > max_gap):
            close()
            start, hits = -1, 0
    close()
    return runs


def _find_diffs(lines: list[str], claimed: list[bool]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    i, n = 0, len(lines)
    while i < n:
        is_header = bool(_DIFF_HEADER.match(lines[i])) or (
            bool(_DIFF_FILE_PAIR.match(lines[i])) and i + 1 < n and lines[i + 1].startswith("+++ ")
        )
        if claimed[i] or not is_header:
            i += 1
            continue
        j = i + 1
        while j < n and not claimed[j] and not _MARKER_LINE.match(lines[j]):
            if _DIFF_BODY.match(lines[j]) or lines[j].startswith("*** End Patch"):
                j += 1
            elif not lines[j].strip() and j + 1 < n and _DIFF_HEADER.match(lines[j + 1]):
                j += 1  # a blank line between two hunks
            else:
                break
        if j - i >= 3:
            runs.append((i, j))
            i = j
        else:
            i += 1
    return runs


def _drop_runs(lines: list[str], counts: Counter[str]) -> list[str]:
    """Replace unfenced runs of pasted material in ``lines`` (prose, no fences) with markers."""
    claimed = [False] * len(lines)
    found: list[tuple[int, int, str]] = []

    def claim(runs: list[tuple[int, int]], kind: str) -> None:
        for a, b in runs:
            found.append((a, b, kind))
            for k in range(a, b):
                claimed[k] = True

    claim(_find_diffs(lines, claimed), "diff")
    claim(
        _find_runs(lines, claimed, lambda ln: bool(_NUMBERED_LINE.match(ln)), max_gap=0, min_hits=3),
        "pasted_file",
    )
    claim(
        _find_runs(lines, claimed, lambda ln: bool(_BASE64_LINE.match(ln)), max_gap=0, min_hits=3),
        "encoded_blob",
    )
    claim(
        _find_runs(
            lines, claimed, lambda ln: bool(_LOG_LINE.match(ln)), max_gap=1, min_hits=LOG_RUN_MIN_LINES
        ),
        "log_run",
    )
    claim(
        _find_runs(
            lines,
            claimed,
            lambda ln: bool(_CODE_LINE.match(ln)),
            max_gap=1,
            min_hits=CODE_RUN_MIN_LINES,
        ),
        "pasted_file",
    )
    if not found:
        return lines
    out: list[str] = []
    pos = 0
    for a, b, kind in sorted(found):
        out.extend(lines[pos:a])
        counts[kind] += 1
        out.append(_ENCODED_MARKER if kind == "encoded_blob" else _removed_line(kind, b - a))
        pos = b
    out.extend(lines[pos:])
    return out


def _fence_spans(lines: list[str]) -> list[tuple[int, int, str]]:
    """Fenced blocks as (first line, end line exclusive, info string); unclosed ones run to the end."""
    spans: list[tuple[int, int, str]] = []
    i, n = 0, len(lines)
    while i < n:
        m = _FENCE_OPEN.match(lines[i])
        if m is None or (m["fence"][0] == "`" and "`" in m["info"]):
            i += 1
            continue
        char, width = m["fence"][0], len(m["fence"])
        j = i + 1
        while j < n:
            c = _FENCE_CLOSE.match(lines[j])
            if c is not None and c["fence"][0] == char and len(c["fence"]) >= width:
                break
            j += 1
        end = min(j + 1, n)
        spans.append((i, end, m["info"]))
        i = end
    return spans


def _drop_pasted(text: str, counts: Counter[str]) -> str:
    text = _wrapper_pass(text, counts)
    lines = text.split("\n")
    out: list[str] = []
    pos = 0
    for start, end, info in _fence_spans(lines):
        out.extend(_drop_runs(lines[pos:start], counts))
        closed = end - start >= 2 and _FENCE_CLOSE.match(lines[end - 1]) is not None
        body = lines[start + 1 : end - 1 if closed else end]
        kind = _classify_fence(info, body)
        if kind is None:
            out.extend(lines[start:end])
        else:
            counts[kind] += 1
            out.append(_removed_line(kind, len(body)))
        pos = end
    out.extend(_drop_runs(lines[pos:], counts))
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# 4. Truncation
# --------------------------------------------------------------------------------------------


def _cut_forbidden(text: str) -> bytearray:
    """``forbidden[i]`` is 1 when a cut at index ``i`` would fall inside a kept code block or a
    marker (a half marker or half a snippet would mislead the reader and break idempotence)."""
    forbidden = bytearray(len(text) + 1)
    lines = text.split("\n")
    offsets = [0]
    for ln in lines:
        offsets.append(offsets[-1] + len(ln) + 1)
    spans = [(m.start(), m.end()) for m in _MARKER_SPAN.finditer(text)]
    spans += [(offsets[start], offsets[end] - 1) for start, end, _info in _fence_spans(lines)]
    for a, b in spans:
        forbidden[a + 1 : b] = b"\x01" * max(0, b - a - 1)
    return forbidden


def _cut_head(text: str, budget: int, forbidden: bytearray) -> int:
    """The end of the kept beginning: a line break near ``budget``, else a blank, else nothing
    is kept (never a piece of a word: a piece of a long token could read as a secret or a blob
    on a second pass, and a message that is one long token is not worth showing anyway)."""
    floor = int(budget * 0.7)
    for chars, lowest in (("\n", floor), (" \t", 0)):
        for pos in range(budget, lowest - 1, -1):
            if text[pos] in chars and not forbidden[pos]:
                return pos
    return 0


def _cut_tail(text: str, budget: int, forbidden: bytearray) -> int:
    """The start of the kept end: just after a line break near ``len - budget``, else after a
    blank, else nothing is kept (as for ``_cut_head``)."""
    n = len(text)
    first = n - budget
    for chars, highest in (("\n", first + int(budget * 0.3)), (" \t", n - 1)):
        for pos in range(first, highest + 1):
            if text[pos - 1] in chars and not forbidden[pos]:
                return pos
    return n


def _truncate(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: its beginning and its end around a marker line.

    A line cut in the middle gets `` …`` (at the end of the beginning) or ``… `` (at the start
    of the end): besides telling the reader, this keeps the fragment from reading as something
    else on a second pass, such as a fence (```` ```x```` cut from ```` ```x``` ````), a
    ``key: value`` line or a diff header.
    """
    if len(text) <= limit:
        return text
    marker_room = len(f"\n[… {len(text)} characters truncated …]\n") + 4  # 4: the two ellipses
    room = limit - marker_room
    head_budget = int(room * _HEAD_SHARE)
    tail_budget = room - head_budget
    forbidden = _cut_forbidden(text)

    # The beginning: whole lines, then the start of the cut line unless it would read as a fence.
    head_end = _cut_head(text, head_budget, forbidden)
    fragment = ""
    if text[head_end] == "\n":
        head_stop = len(text[:head_end].rstrip())
    else:
        line_start = text.rfind("\n", 0, head_end) + 1
        fragment = text[line_start:head_end].rstrip()
        if _FENCE_OPEN.match(fragment + " …") or _FENCE_CLOSE.match(fragment):
            fragment = ""
        head_stop = line_start + len(fragment) if fragment else len(text[:line_start].rstrip())
    head = text[:head_stop] + (" …" if fragment else "")

    # The end: from the cut (a line keeps its indentation); marked when it starts mid-line.
    tail_from = _cut_tail(text, tail_budget, forbidden)
    while tail_from < len(text) and text[tail_from] in " \t\n" and text[tail_from - 1] != "\n":
        tail_from += 1
    mid_line = tail_from < len(text) and text[tail_from - 1] != "\n"
    tail = ("… " if mid_line else "") + text[tail_from:]

    marker = f"[… {tail_from - head_stop} characters truncated …]"
    return "\n".join(part for part in (head, marker, tail) if part)


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------


def _check_segment(max_segment_chars: int) -> None:
    if max_segment_chars < MIN_SEGMENT_CHARS:
        raise ValueError(f"max_segment_chars must be at least {MIN_SEGMENT_CHARS}, got {max_segment_chars}")


def scrub_text(text: str, *, max_segment_chars: int = 2000) -> tuple[str, Counter[str]]:
    """Scrub one message's text: normalise, redact secrets, drop pasted material, truncate.

    Returns the scrubbed text (possibly empty) and what was removed, counted by kind. See the
    module docstring for every rule. Raises ``ValueError`` if ``max_segment_chars`` is below
    ``MIN_SEGMENT_CHARS``.
    """
    _check_segment(max_segment_chars)
    counts: Counter[str] = Counter()
    text = _normalise(text)
    if not text:
        return "", counts
    text = redact_secrets(text, counts)
    text = _normalise(_drop_pasted(text, counts))
    # Again: a removal can give a line a new start (``<file>…</file>token: x``), hence a new
    # context for the key/value rules. Nothing already redacted is counted twice.
    text = redact_secrets(text, counts)
    truncated = _truncate(text, max_segment_chars)
    if truncated != text:
        counts["truncated"] += 1
    return truncated, counts


def _cap_total(messages: list[Message], limit: int, counts: Counter[str]) -> tuple[list[Message], int | None]:
    """Keep messages from both ends, alternately, while they fit in ``limit`` characters."""
    if sum(len(m.text) for m in messages) <= limit:
        return messages, None
    if len(messages) == 1:
        counts["truncated"] += 1
        return [attrs.evolve(messages[0], text=_truncate(messages[0].text, limit))], None
    first, last = messages[0], messages[-1]
    if len(first.text) + len(last.text) > limit:
        # Only possible when max_total_chars < 2 * max_segment_chars: share the room.
        half = limit // 2
        for m in (first, last):
            if len(m.text) > half:
                counts["truncated"] += 1
        first = attrs.evolve(first, text=_truncate(first.text, half))
        last = attrs.evolve(last, text=_truncate(last.text, half))
    head, tail = [first], [last]
    used = len(first.text) + len(last.text)
    i, j = 1, len(messages) - 2
    from_head = True
    while i <= j:
        for side in (from_head, not from_head):
            candidate = messages[i] if side else messages[j]
            if used + len(candidate.text) <= limit:
                used += len(candidate.text)
                if side:
                    head.append(candidate)
                    i += 1
                else:
                    tail.append(candidate)
                    j -= 1
                from_head = not side
                break
        else:
            break
    dropped = j - i + 1
    if dropped <= 0:
        return head + tail[::-1], None
    counts["messages_dropped"] += dropped
    return head + tail[::-1], len(head)


def scrub_transcript(
    t: Transcript, *, max_segment_chars: int = 2000, max_total_chars: int = 60_000
) -> ScrubbedTranscript:
    """Scrub a whole transcript for an LLM: every message (``scrub_text``), the title (secrets
    only), empty messages dropped, and the total capped at ``max_total_chars`` by dropping middle
    messages. The report merges ``t.dropped`` with the scrubber's own counts.

    Raises ``ValueError`` if ``max_segment_chars`` is below ``MIN_SEGMENT_CHARS`` or
    ``max_total_chars`` is below twice that.
    """
    _check_segment(max_segment_chars)
    if max_total_chars < 2 * MIN_SEGMENT_CHARS:
        raise ValueError(f"max_total_chars must be at least {2 * MIN_SEGMENT_CHARS}, got {max_total_chars}")
    counts: Counter[str] = Counter()
    for kind, n in t.dropped.items():
        counts[kind] += n
    summary = t.summary
    if summary.title:
        title = _normalise(redact_secrets(summary.title, counts))
        summary = attrs.evolve(summary, title=title or None)
    kept: list[Message] = []
    for message in t.messages:
        text, c = scrub_text(message.text, max_segment_chars=max_segment_chars)
        counts.update(c)
        if text:
            kept.append(attrs.evolve(message, text=text))
        else:
            counts["empty_message"] += 1
    capped, gap_after = _cap_total(kept, max_total_chars, counts)
    return ScrubbedTranscript(
        summary=summary, messages=tuple(capped), report=ScrubReport(counts=counts), gap_after=gap_after
    )
