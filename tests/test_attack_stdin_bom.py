"""Text with a byte-order mark, as Windows tools write it (review28, session 28).

``Get-Content notes.txt | coffer remember -`` in PowerShell, or a Notepad file given to ``facts
edit --body-file``, starts with ``U+FEFF``: it was kept as the first character of the fact's text
and of its title, invisible, so the title no longer matched what was typed. The mark is not
text: it is dropped where the bytes are decoded; anything after it is kept as sent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BOM = "\ufeff".encode()


def coffer(home: Path, *args: str, stdin: bytes = b"") -> dict[str, object]:
    exe = Path(sys.executable).parent / "coffer"
    env = {**os.environ, "COFFER_HOME": str(home)}
    r = subprocess.run([str(exe), *args], input=stdin, env=env, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def test_a_mark_before_piped_text_is_not_kept(tmp_home: Path) -> None:
    out = coffer(tmp_home, "remember", "--global", "--json", "-", stdin=BOM + b"deploys go out on tuesdays")
    fact = out["fact"]
    assert isinstance(fact, dict)
    assert fact["title"] == "deploys go out on tuesdays" and fact["body"] == "deploys go out on tuesdays"


def test_a_mark_at_the_start_of_a_body_file_is_not_kept(tmp_home: Path, tmp_path: Path) -> None:
    fact = coffer(tmp_home, "remember", "--global", "--json", "the first text")["fact"]
    assert isinstance(fact, dict)
    body = tmp_path / "body.txt"
    body.write_bytes(BOM + b"the text from notepad\n")
    edited = coffer(
        tmp_home, "facts", "edit", "--global", "--json", "--body-file", str(body), str(fact["id"])
    )
    new = edited["fact"]
    assert isinstance(new, dict) and str(new["body"]).startswith("the text from notepad"), new
