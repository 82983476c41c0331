"""A home whose folder passes the access check but refuses a new file (sysfs, where root may
write by mode bits and the kernel still says no) answers ``INDEX_UNAVAILABLE`` naming the file,
not "unexpected PermissionError"."""

from __future__ import annotations

import os

import pytest
from conftest import CliRunner


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or not os.access("/sys", os.W_OK),
    reason="needs a folder the access check calls writable that refuses files: /sys as root",
)
def test_a_home_that_refuses_the_index_file_is_index_unavailable(cli: CliRunner) -> None:
    out = cli("--home", "/sys", "recall", "anything")
    assert out.returncode == 1
    assert "INDEX_UNAVAILABLE" in out.stderr and "/sys/index.db" in out.stderr
    assert "unexpected" not in out.stderr and "Traceback" not in out.stderr
    assert not os.path.exists("/sys/index.db")
