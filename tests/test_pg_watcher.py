"""The outage's watcher thread (``_index/pg/failures.py``) survives a probe that fails with
something other than ``psycopg.Error`` (fixes16, found by reading): it caught only that, so any
other exception ended the thread, the outage was never probed again and every request was told
"down" after waiting for a round that never came."""

from __future__ import annotations

import logging

import pytest

from coffer_memory import IndexUnavailable

pytest.importorskip(
    "psycopg", reason="PostgreSQL tests need psycopg: pip install 'coffer-memory[postgresql]'"
)
from coffer_memory._index.pg.failures import start_outage  # imports psycopg


def test_the_watcher_survives_and_logs_a_probe_that_is_no_psycopg_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A URL of bytes that are not UTF-8 (an environment variable decoded with surrogateescape):
    # the real probe's psycopg.connect raises UnicodeEncodeError, not psycopg.Error.
    url = "postgresql://coffer@127.0.0.1:1/fixes16_\udcff"
    outage = start_outage(url)
    caplog.set_level(logging.ERROR, logger="coffer_memory.postgresql")
    try:
        outage.begin("connection refused")
        for _ in range(3):  # each check wakes a probe round and waits for it
            with pytest.raises(IndexUnavailable):
                outage.check()
        with outage._lock:  # a bound for a loaded machine, not a timing assertion
            outage._round_done.wait_for(lambda: outage._rounds >= 3, timeout=60)
        assert outage._rounds >= 3
        watcher = outage._watcher
        assert watcher is not None and watcher.is_alive()
        logged = [r for r in caplog.records if r.exc_info and r.exc_info[0] is UnicodeEncodeError]
        assert len(logged) == 1, caplog.records  # logged once, not once a round
        assert outage.down
    finally:
        outage.close()
