"""The scrubber: what a past session's prose must go through before any of it reaches an LLM.

Readers (``coffer_memory._transcripts``) already drop tool calls, tool results, reasoning and
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
     runs to the end of the text. Also works on JSON-escaped blocks (``\\n`` inside a string)
     and headers wrapped over lines; the base64 lines just before an END line are taken without
     their BEGIN line (a key pasted over two messages).
     Also a PuTTY key file's ``Private-Lines: N`` lines and its ``Private-MAC:``.
   - ``password_hash``: crypt(3) hashes (``$2b$`` bcrypt, ``$1$ $5$ $6$ $apr1$ $y$``,
     ``$argon2id$…``) and Django's ``pbkdf2_sha256$…``, cracked offline (``/etc/shadow``,
     ``htpasswd``: the user and other fields are kept).
   - ``cookie``: each value of a ``Cookie:``/``Set-Cookie:`` header that is 12+ characters with
     letters and digits or looks generated (``theme=dark`` and ``Path=/`` are kept).
   - ``url_credentials``: the userinfo of ``scheme://user:pass@host`` (scheme and host are kept;
     also JSON-escaped ``https:\\/\\/``; a password may hold a raw ``/`` but then no ``@``, and
     ``host:8080/path@v1`` is a port), and a random-looking ``scheme://<token>@host``.
   - ``jwt``: three base64url segments, the first starting ``eyJ``.
   - Vendor tokens and cloud keys by their shape (``coffer_memory._transcripts.secret_shapes``, one
     pass for all): ``anthropic_api_key`` (``sk-ant-…``), ``openai_api_key`` (``sk-…``,
     ``sk-proj-…``, ``sk-svcacct-…``, ``sk-admin-…``), ``github_token`` (``ghp_ gho_ ghu_ ghs_ ghr_``
     + 36 or more, ``github_pat_…``), ``gitlab_token`` (``glpat- gldt- glrt- glptt-`` …),
     ``slack_token``, ``slack_webhook``, ``discord_webhook``, ``discord_bot_token`` (its first part
     must decode to a user id), ``telegram_bot_token``, ``google_api_key``, ``google_oauth_secret``,
     ``google_oauth_token``, ``stripe_key``, ``stripe_webhook_secret``, ``npm_token``,
     ``pypi_token``, ``huggingface_token`` (``hf_``, ``api_org_``), ``sendgrid_key``, ``mailgun_key``, ``mailchimp_key``,
     ``twilio_api_key`` (``SK`` + 32 hex), ``digitalocean_token``, ``shopify_token``,
     ``square_token``, ``facebook_token``, ``databricks_token``, ``heroku_api_key``,
     ``atlassian_token``, ``vault_token``, ``docker_token``, ``doppler_token``, ``tailscale_key``,
     ``newrelic_key``, ``postman_key``, ``sentry_token``, ``linear_key``, ``notion_token``,
     ``supabase_key``, ``netlify_token``, ``fly_token``, ``figma_token``, ``grafana_token``,
     ``airtable_token``, ``terraform_token``, ``pulumi_token``, ``dynatrace_token``,
     ``planetscale_token``, ``onepassword_token``, ``mapbox_token``, ``firebase_server_key``,
     ``contentful_token``, ``shippo_token``, ``llm_api_key`` (``gsk_ xai- pplx- r8_``, and
     ``tvly- lsv2_pt_ pcsk_ jina_ e2b_ fc- csk-``, ElevenLabs' ``sk_`` + 48 hex),
     ``platform_token`` (``napi_ rnd_ vcp_ re_ CCIPAT_ bkua_``),
     ``alibaba_access_key_id``, ``age_secret_key``, ``aws_access_key_id`` (``AKIA``/``ASIA`` + 16),
     ``azure_client_secret`` (``…8Q~…``) and ``azure_storage_key`` (88 base64 characters ending
     ``==`` that decode to random bytes, unless ``sha512``/``digest`` precedes them; also a value
     with a digit and a capital that ``az storage account keys list`` names ``key1``/``key2``/
     ``kerb1``/``kerb2``, in its JSON or as a bare ``key1: …`` line).
   - Inside URLs: ``url_signature`` (``sig=``, ``X-Amz-Signature=``, … query values; also in a
     query string pasted without its URL, a SAS token ``?sv=…&sig=…``),
     ``key=value`` path segments whose key names a secret (``/login/password=…``, kind as for
     assignments below; a base64 value goes on over its own ``/``: ``;SharedAccessKey=…`` of an
     Azure connection string that starts ``Endpoint=sb://``), and ``url_token``: a path segment
     or a 32+ character query value that looks generated (24+ characters, mixed case and digits, not made of words, not an object id
     such as ``cus_…``, not base64 of text): ``https://host/hooks/<token>``; an AWS secret or an
     Azure key whose own ``/`` splits it over path segments is found as one window.
   - ``bearer_token`` / ``basic_auth`` / ``authorization``: the credential of an
     ``Authorization:`` (or ``Proxy-Authorization:``) header, by scheme; also a bare
     ``Bearer <16+ chars>``; ``basic_auth`` also for base64 of ``user:password`` after
     ``_auth=`` (``.npmrc``) or ``"auth":`` (Docker's ``config.json``).
   - ``password``: ``machine … login … password X`` (.netrc), the last field of a ``.pgpass``
     line (``host:port:db:user:X``), ``curl -u user:X`` (a quoted ``"user:two words"`` whole)
     and HTTPie's ``http -a user:X``; also ``mysql -pX``, ``sshpass -p X``,
     ``docker|podman|az|… login … -p X``, ``requirepass X``/``masterauth X``,
     ``echo X | … --password-stdin``, ``--with-token <<< X``, and each password flag of a
     command's line (``coffer_memory._transcripts.secret_commands``): ``redis-cli -a X``,
     ``sqlcmd -P X``, ``ldapsearch -w X``, ``ldappasswd -s X``, ``mongosh -p X``, ``twine -p
     X``, ``ssh-keygen -N X -P X``, ``7z -pX``, ``zip -P X``, ``keytool -storepass X -keypass
     X``; and ``htpasswd -b FILE USER X``, ``rabbitmqctl add_user USER X``, ``-U user%X``.
   - Values named by their surroundings, kind from the name as for assignments: XML elements
     (``<password>X</password>``) and ``key="ApiKey" value="X"`` attributes, Markdown table rows
     (``| db password | X |``), ``config set KEY X``, ``setx KEY X`` and ``setenv KEY X`` commands (``aws configure set``, ``npm config
     set``), the value a secret store's command takes by a flag or a pipe (``gh secret set N --body
     X``, ``az keyvault secret set … --value X``, ``aws ssm put-parameter … --value X``, ``echo X | gh secret set N``, ``gh secret set N <<< X``,
     ``gcloud secrets versions add N --data-file=- <<< X``, ``vercel env add N ENV <<< X``, each
     ``k=X`` of ``vault kv put`` and ``kubectl create secret … --from-literal=k=X`` but a setting
     (a duration ``ttl=30m``, a boolean): kind ``secret``; the ``--secret`` flag of ``gcloud``,
     ``docker``, ``podman``, ``buildah``, ``nerdctl`` names a secret and is kept unless its value
     looks generated), and prose (``the password is X``, ``password for prod was changed to X``, ``token
     = X``) when X has letters and digits or looks generated, or, for a password, is a word that
     ends its clause or is quoted and reads as no state (``is swordfish.``; not ``is
     required.``). A bare ``pwd``/``pass``/``pw`` key counts as ``password`` unless its value is
     a path (``PWD=/home/x`` is the shell's folder). AWS's documentation keys (``…EXAMPLE``,
     ``…EXAMPLEKEY``) are left alone: published, valid for nothing.
   - Key/value assignments whose key names a secret, in env, shell, YAML (including ``|``/``>``
     block scalars), JSON, TOML/INI, Python (also annotated ``key: str = "…"``), PHP ``=>``
     and ``--flag value`` / ``--flag=value`` forms (an unquoted value ends at a blank, a quote,
     ``,``, ``;``, ``&`` or a parenthesis; after a line-start YAML key, at the end of the line or
     a `` #`` comment; on a ``.env`` line, ``[export ]KEY=value``, at a blank, or at a ``&`` or
     ``;`` that starts another ``name=``; or the rest of the line when more words follow to its
     end, unless they read as a command: one holds a flag, a path, ``name=``, ``|&;<>$`` or a
     dotted name (``PW=x mytool --run``), or the second word is a listed or kebab-case program
     (``TOKEN=x npm start``; a key naming a passphrase takes that word as one of its own)). A braced ODBC value
     (``…;Pwd={a;b}}c};``, after another pair) is taken whole, up to its closing brace. The key is split into words (snake, kebab, dotted and camelCase) and
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
     digits (dumped keys, tokens of unknown vendors) becomes ``[encoded data removed]`` (this
     one runs before the key/value rules), unless it is public (``secret_shapes.public_encoding``):
     an image/audio/video/font data URI, bare base64 of a PNG/JPEG/GIF/WebP file (its decoded
     head is the magic and the whole run decodes), an SSH public key, a JWK's ``"n"``, the body of a certificate or of a
     PGP or PEM public key, base64 of such a PEM block, or the data of a SOPS value
     (``ENC[AES256_GCM,data:…]``, also kept after a key that names a secret).

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
   - ``encoded_image``: the base64 of an image (audio, video, font) data URI, or of a bare
     image file, kept by step 2 as no secret, is bulk no reader of a session can use (so is a
     public key's or a certificate's body over 3+ lines, dropped as ``encoded_blob`` above).

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

- Secrets with no recognisable shape and no telling key: a bare word password after a verb
  before the key that reads as a noun (``use password sync``, kept as ``use password auth`` is;
  ``use password tangerine``, ``Password for the staging db: hunter2``, ``set the root password
  to X``, ``use X as the password`` and ``the password is swordfish for now`` are caught, see
  ``coffer_memory._transcripts.secret_prose``), a word password that goes on into a clause
  (``the password is swordfish because …``), a plural word after such a verb, a hex or short
  random API key of an unlisted vendor, a password a ``.env`` key that names no passphrase holds
  as words of which the second is a listed program (``DB_PASSWORD=correct git battery staple``
  keeps ``git battery staple``: ``PW=x git push`` is likelier), a key name that does not say
  ``secret``/``token``/``password``/``pw``/``api key`` (``DB_CODE=…``), and space-separated
  config syntaxes other than the ones listed above (``AUTH x``).
- Secrets glued to a word (``tokenghp_…``), split across lines other than a private key's
  (whose header may be wrapped, and whose tail is caught before its END line without its BEGIN
  line), encoded (base64 of a key under
  120 characters, URL-encoded) or obfuscated, and unquoted values with blanks outside
  line-start YAML and ``.env`` lines (``password=correct horse`` mid-line keeps ``horse``).
- An unquoted value is cut at a parenthesis or ``,;&``, so ``password=ab(cd)`` keeps ``(cd)``;
  a value that starts like a placeholder (``$``, ``{``, ``<``, ``%…%``, ``…``) is kept, and so is
  a word-like name followed by ``(`` or ``[`` (``token=get_token()``).
- Pasted material without fences that looks like prose: a short log (fewer than
  ``LOG_RUN_MIN_LINES`` lines), a file dump of prose or Markdown, a config excerpt shorter than
  ``CODE_RUN_MIN_LINES`` lines. Truncation bounds what gets through.
- False positives are possible and accepted as cheaper than a leak: an unlisted program with no
  argument after a ``.env`` prefix (``PW=x mytool`` loses ``mytool``), a listed program after a
  passphrase key (``PASSPHRASE=x npm start``), a word after a password flag in prose (``the
  mongo -p flag``), a 40-character mixed-case
  alphanumeric string, a 120-character identifier, an ``Authorization:`` value, a prose word
  after ``secret:``, a random-looking document id in a URL path (a share link is a capability
  anyway), and everything after an unclosed ``<file>`` or PEM BEGIN line.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Final

import attrs

from coffer_memory._transcripts.models import Message, SessionSummary, Transcript

from .._markdown_fences import FENCE_CLOSE, FENCE_OPEN, fence_spans
from .pasted import (
    CODE_RUN_MIN_LINES,
    KEEP_CODE_MAX_CHARS,
    KEEP_CODE_MAX_LINES,
    LOG_RUN_MIN_LINES,
    drop_pasted,
)
from .scrub_markers import MARKER_SPAN
from .secrets import redact_secrets

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
    "scrub_title",
    "scrub_transcript",
]

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
    spans = [(m.start(), m.end()) for m in MARKER_SPAN.finditer(text)]
    spans += [(offsets[start], offsets[end] - 1) for start, end, _info in fence_spans(lines)]
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
        if FENCE_OPEN.match(fragment + " …") or FENCE_CLOSE.match(fragment):
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
    kept = _normalise(drop_pasted(text, counts))
    # Again: a removal can give a line a new start (``<file>…</file>token: x``), hence a new
    # context for the key/value rules. Nothing already redacted is counted twice, and when
    # nothing was removed there is no new context (redaction is idempotent).
    text = kept if kept == text else redact_secrets(kept, counts)
    truncated = _truncate(text, max_segment_chars)
    if truncated != text:
        counts["truncated"] += 1
    return truncated, counts


def scrub_title(title: str | None, counts: Counter[str] | None = None) -> str | None:
    """A session title as every face shows it (listing and scrubbed view alike): secrets
    redacted, normalised; ``None`` when nothing is left. Counts redactions into ``counts``."""
    if not title:
        return None
    return _normalise(redact_secrets(title, counts)) or None


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
        summary = attrs.evolve(summary, title=scrub_title(summary.title, counts))
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
