"""``coffer`` ends without the interpreter's teardown (``_quick_exit.leave``), and
lose nothing by it: buffered output, exit handlers, a thread still at work, a reader that left.

Each case is a real child interpreter, since ``leave`` ends the process it runs in.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path


def _child(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


# Output to a pipe is block-buffered, as for a user's `coffer recall | less`, unless this is set.
BUFFERED = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def test_buffered_output_and_exit_handlers_survive_with_the_status(tmp_path: Path) -> None:
    handler = tmp_path / "handler-ran"
    out = subprocess.run(
        _child(
            f"""
            import atexit, sys
            from pathlib import Path
            from coffer_memory._quick_exit import leave
            atexit.register(lambda: Path({str(handler)!r}).write_text("yes"))
            print("x" * 200_000, end="")  # more than one buffer, the rest still in it at exit
            print("last line")
            sys.stderr.write("said on stderr")
            leave(3)
            """
        ),
        capture_output=True,
        text=True,
        timeout=60,
        env=BUFFERED,
    )
    assert out.returncode == 3
    assert out.stdout == "x" * 200_000 + "last line\n"
    assert out.stderr == "said on stderr"
    assert handler.read_text() == "yes"


def test_a_thread_still_at_work_is_waited_for(tmp_path: Path) -> None:
    done = tmp_path / "thread-done"
    out = subprocess.run(
        _child(
            f"""
            import threading, time
            from pathlib import Path
            from coffer_memory._quick_exit import leave
            def work():
                time.sleep(0.5)
                Path({str(done)!r}).write_text("done")
            threading.Thread(target=work).start()
            leave(0)
            """
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert done.read_text() == "done"  # os._exit would have cut the thread short


def test_a_reader_that_left_early_gets_the_status_and_no_error_message(tmp_path: Path) -> None:
    ready, go = tmp_path / "ready", tmp_path / "go"
    child = subprocess.Popen(
        _child(
            f"""
            import time
            from pathlib import Path
            from coffer_memory._quick_exit import leave
            print("hits " * 100)  # kept in stdout's buffer: it is a pipe
            Path({str(ready)!r}).write_text("")
            while not Path({str(go)!r}).exists():
                time.sleep(0.01)
            leave(0)
            """
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=BUFFERED,
    )
    assert child.stdout is not None and child.stderr is not None
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.01)
    child.stdout.close()  # `coffer recall ... | head -0`: the reader is gone before the flush
    go.write_text("")
    assert child.wait(timeout=60) == 0
    assert child.stderr.read() == b""  # no "Exception ignored ... BrokenPipeError"


def test_the_console_script_ends_through_it() -> None:
    # The entry point pyproject names is the one that leaves; ``main`` itself returns, for the
    # tests and programs that call it.
    import tomllib

    scripts = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["coffer"] == "_coffer_scripts:coffer"  # which arms SIGINT, then runs console()
    import _coffer_scripts

    assert "console()" in inspect.getsource(_coffer_scripts.coffer)
