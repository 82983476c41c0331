"""A plain ``pip install coffer-memory`` (no ``[mcp]`` extra): agents install refuses, hooks-only works.

The environment is real: a new venv whose site-packages links every distribution of the test
environment except the MCP SDK (``mcp`` and ``mcp_types``), with ``coffer``, ``coffer-hook`` and
``coffer-mcp`` scripts next to its interpreter as pip writes them. Every command runs in a
subprocess of that venv's Python, so ``import mcp`` fails there as it does after a plain install.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from coffer_memory._agents.homes import AgentHomes

SDK_PARTS = ("mcp", "mcp_types")
EXTRA_COMMAND = "pip install 'coffer-memory[mcp]'"
SCRIPTS = {
    "coffer": "coffer_memory._cli:main",
    "coffer-hook": "coffer_memory._agents.hook:main",
    "coffer-mcp": "coffer_memory_mcp._stdio:main",
}


def _is_sdk(entry: str) -> bool:
    name = entry.split("-", 1)[0] if entry.endswith(".dist-info") else entry
    return name in SDK_PARTS


def _link_packages(site: Path, *, with_sdk: bool) -> None:
    here = Path(sysconfig.get_paths()["purelib"])
    for entry in sorted(os.listdir(here)):
        if with_sdk or not _is_sdk(entry):
            link = site / entry
            if not link.exists():
                link.symlink_to(here / entry)


def _drop_sdk(site: Path) -> None:
    for entry in os.listdir(site):
        if _is_sdk(entry):
            (site / entry).unlink()


@pytest.fixture(scope="module")
def plain_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding the test environment's packages (the MCP SDK too, until ``_drop_sdk``)."""
    venv = tmp_path_factory.mktemp("plain") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    return venv


def _site(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def _scripts(venv: Path) -> None:
    for name, target in SCRIPTS.items():
        module, func = target.split(":")
        path = venv / "bin" / name
        path.write_text(f"#!{venv / 'bin' / 'python'}\nimport sys\nfrom {module} import {func}\nsys.exit({func}())\n")
        path.chmod(0o755)


def _run(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "coffer"), *args], capture_output=True, text=True, timeout=240, check=False
    )


def _homes() -> AgentHomes:
    return AgentHomes.from_env()


def _no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr


def test_without_the_sdk_install_refuses_hooks_only_works_and_status_says_so(
    plain_venv: Path, tmp_path: Path
) -> None:
    site = _site(plain_venv)
    _link_packages(site, with_sdk=False)
    _scripts(plain_venv)
    home = str(tmp_path / "home")
    probe = subprocess.run(
        [str(plain_venv / "bin" / "python"), "-c", "import mcp"], capture_output=True, text=True, check=False
    )
    assert probe.returncode == 1 and "No module named 'mcp'" in probe.stderr  # a plain install, for real

    refused = _run(plain_venv, "--home", home, "agents", "install", "claude-code")
    assert refused.returncode != 0
    assert EXTRA_COMMAND in refused.stderr and "--hooks-only" in refused.stderr
    _no_traceback(refused)
    homes = _homes()
    assert not (homes.claude / "settings.json").exists() and not homes.claude_json.exists()  # nothing written

    hooks = _run(plain_venv, "--home", home, "agents", "install", "claude-code", "--hooks-only")
    assert hooks.returncode == 0, hooks.stderr
    settings = json.loads((homes.claude / "settings.json").read_text())
    assert "coffer-hook" in json.dumps(settings["hooks"])
    claude = json.loads(homes.claude_json.read_text()) if homes.claude_json.exists() else {}
    assert "coffer" not in claude.get("mcpServers", {})

    status = _run(plain_venv, "--home", home, "agents", "status", "claude-code", "--json")
    assert status.returncode == 0, status.stdout + status.stderr
    data = json.loads(status.stdout)
    assert data["installed"] and data["up_to_date"] and data["hooks_only"] and not data["mcp_registered"]
    assert any(EXTRA_COMMAND in note for note in data["notes"])

    # coffer-mcp itself: one line naming the command, no traceback.
    server = subprocess.run(
        [str(plain_venv / "bin" / "coffer-mcp")], capture_output=True, text=True, timeout=120, check=False
    )
    assert server.returncode == 1 and EXTRA_COMMAND in server.stderr
    _no_traceback(server)


def test_a_registered_server_whose_sdk_went_missing_fails_status_and_doctor(
    plain_venv: Path, tmp_path: Path
) -> None:
    site = _site(plain_venv)
    _link_packages(site, with_sdk=True)
    _scripts(plain_venv)
    home = str(tmp_path / "home")
    try:
        full = _run(plain_venv, "--home", home, "agents", "install", "claude-code", "--no-check")
        assert full.returncode == 0, full.stderr
        _drop_sdk(site)  # e.g. `pip uninstall mcp`, or an upgrade that made it an extra
        status = _run(plain_venv, "--home", home, "agents", "status", "claude-code", "--timeout", "60")
        assert status.returncode == 1
        assert "MCP SDK" in status.stdout and EXTRA_COMMAND in status.stdout
        doctor = _run(plain_venv, "--home", home, "doctor")
        assert doctor.returncode != 0 and EXTRA_COMMAND in doctor.stdout + doctor.stderr
        _no_traceback(doctor)
    finally:
        _drop_sdk(site)
