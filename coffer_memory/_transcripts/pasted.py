"""Pasted material for the scrubber: command output, logs, files, diffs and encoded blobs in prose.

Each removal leaves one marker line and is counted by kind; see ``coffer_memory._transcripts.scrub``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Final

from .._markdown_fences import FENCE_CLOSE, fence_spans
from .scrub_markers import ENCODED_MARKER, MARKER_LINE, removed_line
from .secret_shapes import image_base64
from .secret_values import word_set

KEEP_CODE_MAX_LINES: Final = 15
"""A fenced code block with more lines than this is a pasted file, not a snippet."""
KEEP_CODE_MAX_CHARS: Final = 800
"""A fenced code block with more characters than this is a pasted file, not a snippet."""
LOG_RUN_MIN_LINES: Final = 4
"""Log-like unfenced lines needed before a run is dropped (fewer are usually quoted on purpose)."""
CODE_RUN_MIN_LINES: Final = 12
"""Code-like unfenced lines needed before a run counts as a pasted file."""


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

_OUTPUT_LANGS: Final = word_set(
    "console shell-session sh-session shellsession terminal term tty output out stdout stderr log logs "
    "text txt plain plaintext ansi result results"
)
_DIFF_LANGS: Final = frozenset({"diff", "patch", "udiff", "git-diff", "gitdiff"})
_SHELL_LANGS: Final = word_set("sh bash shell zsh fish ksh powershell pwsh ps ps1 cmd bat batch console")

_PROMPT_LINE = re.compile(
    r"^[ \t]*(?:\$|%|❯|➜|PS [^>\n]*>|[\w.-]+@[\w.-]+(?::[^$#\n]*)?[$#]|\([\w.-]+\)[ \t]*\$)[ \t]+\S"
)
_NUMBERED_LINE = re.compile(r"^[ \t]*\d{1,6}(?:\||→|\t| \| |: )")
_BASE64_LINE = re.compile(r"^[ \t]*[A-Za-z0-9+/]{40,}={0,2}$")
_DATA_URI_MEDIA = re.compile(
    r"(?P<head>\bdata:(?:image|audio|video|font)/[\w.+-]{1,40};base64,)[A-Za-z0-9+/]{120,}={0,2}(?![A-Za-z0-9+/=])"
)
# Bare base64 of an image (``iVBORw0KGgo…`` is a PNG): kept by ``redact_secrets`` when it
# decodes whole to an image (``secret_shapes.image_base64``), bulk in a transcript all the same.
_BARE_MEDIA = re.compile(
    r"(?<![A-Za-z0-9+/=_-])(?:iVBORw0KGgo|/9j/|R0lGOD|UklGR)[A-Za-z0-9+/]{116,}={0,2}(?![A-Za-z0-9+/=_-])"
)
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
        out += (text[pos:start], before, removed_line(kind, body.count("\n") + 1 if body else 0), after)
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
        breaker = claimed[i] or bool(MARKER_LINE.match(line))
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
        while j < n and not claimed[j] and not MARKER_LINE.match(lines[j]):
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
        out.append(ENCODED_MARKER if kind == "encoded_blob" else removed_line(kind, b - a))
        pos = b
    out.extend(lines[pos:])
    return out


def _drop_media(text: str, counts: Counter[str]) -> str:
    """The base64 of images (audio, video, fonts) in data URIs, and of bare images, replaced by
    the encoded-data marker: no secret (``redact_secrets`` and a memory keep it), but nothing a reader of a
    session can use, and bulky."""

    def media(m: re.Match[str]) -> str:
        counts["encoded_image"] += 1
        return m["head"] + ENCODED_MARKER

    def bare(m: re.Match[str]) -> str:
        if not image_base64(m.group()):
            return m.group()
        counts["encoded_image"] += 1
        return ENCODED_MARKER

    if "base64," in text:
        text = _DATA_URI_MEDIA.sub(media, text)
    if any(head in text for head in ("iVBORw0KGgo", "/9j/", "R0lGOD", "UklGR")):
        text = _BARE_MEDIA.sub(bare, text)
    return text


def drop_pasted(text: str, counts: Counter[str]) -> str:
    text = _drop_media(_wrapper_pass(text, counts), counts)
    lines = text.split("\n")
    out: list[str] = []
    pos = 0
    for start, end, info in fence_spans(lines):
        out.extend(_drop_runs(lines[pos:start], counts))
        closed = end - start >= 2 and FENCE_CLOSE.match(lines[end - 1]) is not None
        body = lines[start + 1 : end - 1 if closed else end]
        kind = _classify_fence(info, body)
        if kind is None:
            out.extend(lines[start:end])
        else:
            counts[kind] += 1
            out.append(removed_line(kind, len(body)))
        pos = end
    out.extend(_drop_runs(lines[pos:], counts))
    return "\n".join(out)
