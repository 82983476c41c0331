"""What a newcomer meets who reads the README and docs/ in order and types what they show: every
command the pages name parses, and a missing extra or an offline machine gives a clear answer."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The console script's own two lines (``sys.exit(main())``), with the [fastapi] extra's packages
# absent as on a plain ``pip install coffer-memory`` (``make demo``): importing one raises
# ModuleNotFoundError, as it does when it is not installed.
_WITHOUT_FASTAPI = """\
import sys
for name in ("fastapi", "starlette", "uvicorn", "httptools", "jinja2", "markdown_it", "nh3"):
    sys.modules[name] = None
from coffer_memory_fastapi.cli import main
sys.argv[0] = "coffer-api"
sys.exit(main())
"""


def _coffer_api_without_fastapi(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_FASTAPI, *args],
        env={**os.environ, "COFFER_HOME": str(home)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_coffer_api_without_the_fastapi_extra_says_what_to_install(tmp_path: Path) -> None:
    """``make demo`` installs no extra, yet ``coffer-api`` is on PATH and the README names it: it
    stopped on a ModuleNotFoundError traceback from the package's ``__init__``."""
    proc = _coffer_api_without_fastapi("--port", "0", home=tmp_path / "home")
    assert proc.returncode == 1, proc.stderr
    [line] = proc.stderr.splitlines()
    assert re.fullmatch(
        r"coffer-api: the REST server needs the \[fastapi\] extra, and (fastapi|uvicorn) is not "
        r"installed: pip install 'coffer-memory\[fastapi\]'",
        line,
    ), line
    assert not (tmp_path / "home").exists()
    from coffer_memory import __version__

    version = _coffer_api_without_fastapi("--version", home=tmp_path / "home")
    assert (version.returncode, version.stdout.strip()) == (0, f"coffer-api {__version__}"), version.stderr
    helped = _coffer_api_without_fastapi("--help", home=tmp_path / "home")
    assert helped.returncode == 0 and "--allowed-host" in helped.stdout, helped.stderr


def test_the_rest_package_still_exports_create_app() -> None:
    import coffer_memory_fastapi

    assert callable(coffer_memory_fastapi.create_app)
    assert coffer_memory_fastapi.STATUS["MEMORY_NOT_FOUND"] == 404
    with pytest.raises(AttributeError):
        _ = coffer_memory_fastapi.no_such_name
