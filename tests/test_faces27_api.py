"""Ctrl-C while ``coffer-api`` is still starting (importing uvicorn, FastAPI, pydantic...): it
printed a ``KeyboardInterrupt`` traceback; it ends quietly with status 0, as Ctrl-C after
start-up does (tests/test_review26.py). A real child, interrupted for real; no timing assumed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPTS = Path(sys.executable).parent
# A module the server imports on its way up, long before it listens: once its shared object is
# mapped into the child, the child is importing (or past it: then the run is tried again).
IMPORTING = "pydantic_core"


def _mapped(pid: int) -> bool:
    try:
        return IMPORTING in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def test_ctrl_c_while_coffer_api_imports_exits_quietly(tmp_path: Path) -> None:
    caught = None
    for _attempt in range(20):
        with tempfile.TemporaryFile() as err:
            child = subprocess.Popen(
                [str(SCRIPTS / "coffer-api"), "--port", "0", "--home", str(tmp_path / "home")],
                stderr=err,
                stdout=subprocess.DEVNULL,
                env={k: v for k, v in os.environ.items() if k != "COFFER_API_TOKEN"},
            )
            try:
                deadline = time.monotonic() + 120  # a bound on a loaded machine, not a measurement
                while not _mapped(child.pid) and child.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.001)
                err.seek(0)
                early = b"listening on" not in err.read()
                if early and child.poll() is None:
                    child.send_signal(signal.SIGINT)
                    status = child.wait(timeout=120)
                    err.seek(0)
                    text = err.read().decode(errors="replace")
                    if "listening on" not in text:  # interrupted before the server ran
                        caught = (status, text)
                        break
            finally:
                if child.poll() is None:
                    child.kill()
                    child.wait()
    assert caught is not None, "the child was never caught while importing"
    status, text = caught
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert status == 0, text
