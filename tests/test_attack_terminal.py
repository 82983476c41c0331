"""Terminal escapes in what ``coffer`` prints: a fact's title and text reached the terminal raw.

An agent may remember text holding ``ESC ] 0 ; … BEL`` (retitles the window), ``ESC [ 2 J``
(clears it) or ``ESC ] 52`` (writes the clipboard), copied from a page it read; a hand-written or
synced fact file may too. ``coffer facts list`` and ``coffer recall`` printed them as they were,
so listing facts ran them. On a terminal they now show as ``\\x1b``; a pipe gets the bytes.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from coffer_memory import MemoryService

COFFER = str(Path(sys.executable).parent / "coffer")
EVIL = "deploy notes \x1b]0;PWNED\x07 \x1b[2J \x9b31m done"


def _on_a_terminal(home: Path, *args: str) -> bytes:
    """What ``coffer args`` writes to a pseudo-terminal (stdout and stderr), as the user sees it."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [COFFER, *args],
        stdout=slave,
        stderr=slave,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COFFER_HOME": str(home)},
    )
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=120) == 0, out
    return out


def test_listing_and_recalling_facts_on_a_terminal_runs_no_escape(svc: MemoryService, tmp_home: Path) -> None:
    svc.remember(EVIL, scope="global")
    for args in (("facts", "list", "--global"), ("recall", "deploy notes", "--store", "global")):
        out = _on_a_terminal(tmp_home, *args)
        assert b"\x1b" not in out and "\x9b".encode() not in out, out
        assert b"\\x1b]0;PWNED\\x07" in out and b"\\x9b31m" in out, out


def test_a_pipe_still_gets_the_text_byte_for_byte(svc: MemoryService, tmp_home: Path) -> None:
    fact = svc.remember(EVIL, scope="global")
    env = {**os.environ, "COFFER_HOME": str(tmp_home)}
    shown = subprocess.run(
        [COFFER, "facts", "show", fact.fact.id, "--store", "global"], env=env, capture_output=True, check=True
    )
    assert b"\x1b]0;PWNED\x07" in shown.stdout


# "Trojan Source": RIGHT-TO-LEFT OVERRIDE makes a terminal that implements bidi show
# "deploy: approved‮ devorppa ton" where the text says "... not approved" read backwards.
BIDI = "deploy: approved\u202e devorppa ton\u202c and \u2066isolated\u2069 \u200fmark"


def test_bidi_controls_show_escaped_on_a_terminal_and_stay_in_the_file(
    svc: MemoryService, tmp_home: Path
) -> None:
    fact = svc.remember(BIDI, title="Release \u202eetats\u202c", scope="global")
    for args in (("facts", "list", "--global"), ("recall", "approved", "--store", "global")):
        out = _on_a_terminal(tmp_home, *args).decode()
        assert not any(c in out for c in "\u202e\u202c\u2066\u2069\u200f"), out
        assert "\\u202e" in out, out
    shown = _on_a_terminal(tmp_home, "facts", "show", fact.fact.id, "--store", "global").decode()
    assert "Release \\u202eetats\\u202c" in shown and "\\u2066isolated\\u2069 \\u200fmark" in shown, shown
    # The stored text is exact, and a pipe still gets it byte for byte.
    assert BIDI in fact.path.read_text(encoding="utf-8")
    env = {**os.environ, "COFFER_HOME": str(tmp_home)}
    piped = subprocess.run(
        [COFFER, "facts", "show", fact.fact.id, "--store", "global"], env=env, capture_output=True, check=True
    )
    assert BIDI.encode() in piped.stdout
