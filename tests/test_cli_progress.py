"""The CLI's progress counter (``coffer import``, ``coffer distill``): drawn on a terminal only."""

from __future__ import annotations

import io
import os
import pty

from coffer_memory._cli._progress import Progress


def test_nothing_is_drawn_where_standard_error_is_not_a_terminal() -> None:
    stream = io.StringIO()
    bar = Progress("step", desc="writing", stream=stream)
    bar.reset("checking", 4)
    bar.update(4)
    bar.close()
    assert stream.getvalue() == ""


def test_a_terminal_gets_each_phase_and_the_last_count() -> None:
    leader, follower = pty.openpty()
    try:
        with os.fdopen(follower, "w", closefd=False) as stream:
            bar = Progress("step", leave=True, stream=stream)
            bar.reset("checking", 4)
            bar.update(2)
            bar.reset("writing", None)
            bar.update(3)
            bar.close()
        drawn = os.read(leader, 65536).decode()
    finally:
        os.close(follower)
        os.close(leader)
    assert "checking: 0/4 step (0%)" in drawn
    assert drawn.rstrip().endswith("writing: 3 step\x1b[K"), repr(drawn)


def test_json_output_turns_it_off_on_a_terminal_too() -> None:
    leader, follower = pty.openpty()
    try:
        with os.fdopen(follower, "w", closefd=False) as stream:
            bar = Progress("session", desc="distilling", enabled=False, stream=stream)
            bar.update(1)
            bar.close()
            stream.write("end")
        assert os.read(leader, 65536).decode() == "end"
    finally:
        os.close(follower)
        os.close(leader)
