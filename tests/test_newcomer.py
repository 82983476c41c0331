"""What a newcomer meets who reads the README and docs/ in order and types what they show: every
command the pages name parses, their Python examples run, and a missing extra or an offline
machine gives a clear answer."""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import io
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import make_repo

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


API = "/api/v1/memory_stores"


def test_every_api_answer_and_page_says_no_store(client: Any) -> None:
    """Answers carry memories (possibly secrets the writer scrubbed only when asked): a browser or
    proxy must not keep them on disk. The web view's pages said so already; the JSON did not."""
    made = client.post(f"{API}/global/facts", json={"text": "Staging is at staging.acme.test."})
    assert made.status_code == 201, made.text
    fact = made.json()["fact"]["id"]
    answers = {
        "remember": made,
        "stores": client.get(API),
        "facts": client.get(f"{API}/global/facts"),
        "fact": client.get(f"{API}/global/facts/{fact}"),
        "recall (shortcut)": client.get(f"{API}/recall", params={"query": "staging", "store": "global"}),
        "recall (routes)": client.get(f"{API}/global/recall?query=staging&limit=5&limit=5"),
        "audit": client.get("/api/v1/audit"),
        "not found": client.get(f"{API}/global/facts/01M8MJSG9PX20EC3PSBHZ6R372"),
        "bad input": client.get(f"{API}/recall", params={"query": ""}),
        "web view": client.get("/ui"),
        "web view fact": client.get(f"/ui/stores/global/facts/{fact}"),
    }
    assert {name: r.headers.get_list("cache-control") for name, r in answers.items()} == {
        name: ["no-store"] for name in answers
    }
    assert answers["not found"].status_code == 404 and answers["bad input"].status_code == 422
    assert "staging.acme.test" in answers["recall (shortcut)"].text
    assert "staging.acme.test" in answers["recall (routes)"].text


def test_the_interactive_docs_load_nothing_from_another_host(client: Any) -> None:
    """``/docs`` and ``/redoc`` took Swagger UI and ReDoc from a CDN: on a machine without network
    the page stayed blank. Every script, style sheet and icon must come from the server itself."""
    for page in ("/docs", "/redoc"):
        r = client.get(page)
        assert r.status_code == 200, page
        urls = re.findall(r"""(?:src|href)=["']([^"']+)["']|(?:url|Url)\s*:\s*['"]([^'"]+)['"]""", r.text)
        urls = [a or b for a, b in urls]
        assert urls and not [u for u in urls if "://" in u or u.startswith("//")], (page, urls)
        assets = [u for u in urls if u.endswith((".js", ".css", ".png"))]
        assert len(assets) >= (3 if page == "/docs" else 2), (page, urls)
        for url in assets:
            asset = client.get(url)
            assert asset.status_code == 200 and len(asset.content) > 1000, (page, url)
        assert "fonts.googleapis" not in r.text


# -- every command line the pages show parses with the real parsers ---------------------------------
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_SHELL_OPERATORS = {"|", "||", "&&", ";", "&", "(", ")", ">", ">>", "<", "2>", "2>&1"}
_PLACEHOLDER = re.compile(r"‹|\[|\]|\.\.\.|…|\|")  # a synopsis, not a command to run


def _parsers() -> dict[str, argparse.ArgumentParser]:
    from coffer_memory._cli import build_parser
    from coffer_memory_fastapi.cli import build_parser as api_parser
    from coffer_memory_mcp._args import build_parser as mcp_parser

    return {"coffer": build_parser(), "coffer-api": api_parser(), "coffer-mcp": mcp_parser()}


def _shell_lines(text: str) -> Iterator[tuple[str, bool]]:
    """The commands of a page's console blocks (``$`` lines) and sh/bash blocks (every line), and
    the inline code spans of its prose; the flag says the line is a whole command."""
    for lang, block in re.findall(r"```(console|sh|bash|shell)\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if lang == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            yield line, True
    prose = re.sub(r"```.*?```", "", text, flags=re.S).replace("\n", " ")
    for span in re.findall(r"`(coffer[-a-z]* [^`]+)`", prose):
        yield span, False  # a fragment of a sentence: only its option names are checked


def _commands(line: str, names: Iterable[str]) -> Iterator[list[str]]:
    """Each ``coffer``/``coffer-api``/``coffer-mcp`` command of one shell line, as argv."""
    line = re.sub(r"<([\w.-]+)>", r"‹\1›", line)  # <session-id> is a placeholder, not a redirection
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = "#"
    words: list[str] = []
    for word in [*lex, ";"]:
        if word in _SHELL_OPERATORS:
            if words and words[0] in names:
                yield words
            words = []
        elif not (not words and "=" in word and word.split("=")[0].isupper()):  # VAR=value cmd
            words.append(word)


def _subparser(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The (sub)parser that a synopsis line names, and the words after its name."""
    words = list(argv)
    while words:
        if words[0] == "--home":
            words = words[2:]
            continue
        choices = next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})
        if words[0] not in choices:
            break
        parser = choices[words.pop(0)]
    return parser, words


def test_every_documented_command_line_parses() -> None:
    """What a reader copies from a page must be a command the real parser takes; a synopsis
    (``<id>``, ``[--agent A]``) must name options that exist."""
    parsers = _parsers()
    wrong, seen = [], 0
    for page in PAGES:
        for line, whole in _shell_lines(page.read_text(encoding="utf-8")):
            for argv in _commands(line, parsers):
                seen += 1
                where = f"{page.name}: {' '.join(argv)}"
                parser = parsers[argv[0]]
                # Every option named exactly (argparse would take --mod for --mode).
                sub, words = _subparser(parser, argv[1:])
                known = {o for a in [*sub._actions, *parser._actions] for o in a.option_strings}
                named = {w.strip("[]").split("=")[0] for w in words if w.strip("[]").startswith("-")}
                wrong += [f"{where}: no option {o}" for o in sorted(named - known - {"-", "--"})]
                if not whole or _PLACEHOLDER.search(" ".join(argv)):
                    continue
                err = io.StringIO()
                try:
                    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                        parser.parse_args(argv[1:])
                except SystemExit as exc:
                    if exc.code not in (0, None):
                        wrong.append(f"{where}: {err.getvalue().strip().splitlines()[-1]}")
    assert seen >= 350  # about 210 in blocks and 165 in prose: far fewer means the scan broke
    assert wrong == []


def test_no_table_of_the_pages_is_cut_by_a_blank_line() -> None:
    """Rows after a blank line inside a table render as a paragraph of pipes (two merges left one
    in docs/configuration.md's settings table and one in its environment table)."""
    cut = []
    for page in PAGES:
        lines = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), page.read_text(), flags=re.S)
        rows = lines.splitlines()
        for number, (before, line, after) in enumerate(
            zip(["", *rows[:-1]], rows, [*rows[1:], ""], strict=True), 1
        ):
            if line.startswith("|") and not before.startswith("|") and not re.match(r"\|\s*:?-", after):
                cut.append(f"{page.name}:{number}: {line[:60]}")
    assert cut == []


def test_the_recall_page_offers_only_the_modes_this_home_enables(tmp_path: Path) -> None:
    """The web view's mode list offered vector and hybrid on a default home, where picking either
    only led to an error page ("mode 'vector' is not enabled")."""
    from fastapi.testclient import TestClient

    from coffer_memory import MemoryService
    from coffer_memory_fastapi import create_app

    def offered(home: Path, url: str = "/ui/search") -> list[str]:
        with MemoryService(home) as svc, TestClient(create_app(svc)) as client:
            page = client.get(url)
            assert page.status_code == 200, page.text
            return re.findall(r'<option value="(\w+)"', page.text)

    assert offered(tmp_path / "plain") == ["grep", "keyword"]
    vector = tmp_path / "vector"
    vector.mkdir()
    (vector / "config.toml").write_text('[memory]\nretrieval_modes = ["keyword", "vector", "hybrid"]\n')
    assert offered(vector) == ["keyword", "vector", "hybrid"]


# -- the pages' Python examples run as written ------------------------------------------------------
# Blocks that are signatures to read, not programs (held to the code by
# test_the_signature_blocks_match_the_code); each named by a phrase.
_SIGNATURES = ("@hookspec", "(Protocol)")
_NOT_RUNNABLE = _SIGNATURES


def _agent_sessions(tmp_path: Path) -> dict[str, str]:
    """transcripts.md: past Claude Code, Codex and OpenCode sessions of ``acme-api`` (one about a
    deploy script), in agent folders the block's environment points at."""
    from agent_samples import write_all

    return write_all(tmp_path / "agents", tmp_path / "acme-api")


def _claude_folder_and_rules(tmp_path: Path) -> dict[str, str]:
    """porting.md: Claude Code's folder (user instructions, ``acme-api``'s auto memory) and the
    instruction files of ``~/src/acme-api``, where the block imports them from."""
    from coffer_memory._porting.claude_code import encode_path

    home, claude = tmp_path / "user", tmp_path / "user" / ".claude"
    memory = claude / "projects" / encode_path(str((tmp_path / "acme-api").resolve())) / "memory"
    memory.mkdir(parents=True)
    (claude / "CLAUDE.md").write_text("# My preferences\n\nAnswer briefly.\n")
    (memory / "MEMORY.md").write_text("# Memory index\n\n- [Deploys](deploys.md) — when\n")
    (memory / "deploys.md").write_text("---\nname: Deploys\ntype: project\n---\n\nDeploy on Tuesdays.\n")
    rules = make_repo(home / "src" / "acme-api")
    (rules / "AGENTS.md").write_text("# Agents\n\nNever push to main.\n")
    return {"CLAUDE_CONFIG_DIR": str(claude)}  # what ~/.claude stands for, as Claude Code reads it


def _two_project_stores(tmp_path: Path) -> dict[str, str]:
    """projects.md: two clones of one repository, ``first`` and ``second``, each with its store."""
    from coffer_memory import MemoryService

    with MemoryService(tmp_path / "home") as svc:
        for name, text in (
            ("first", "the staging database is called heron"),
            ("second", "deploys on Tuesdays"),
        ):
            svc.remember(text, cwd=make_repo(tmp_path / name))
    return {}


def _organized_home(tmp_path: Path) -> dict[str, str]:
    """organizer.md: its scratch home ``home``, in which ``acme-api``'s four items were organized
    by a stand-in model on 127.0.0.1 answering as the page shows (the first item into a new topic,
    then the page's own three answers), and then a run with nothing to do."""
    from http_scripted import ScriptedServer, answer

    from coffer_memory import MemoryService, Settings

    page = (ROOT / "docs" / "organizer.md").read_text(encoding="utf-8")
    shown = [
        json.loads(line)
        for block in re.findall(r"```json\n(.*?)```", page, re.S)
        for line in block.splitlines()
        if line.startswith('{"action"')
    ]
    first = {
        "action": "create",
        "slug": "deploy",
        "title": "Deploying",
        "description": "How releases go out.",
    }
    first["body"] = "Releases go out with `make release`, which tags and pushes."
    unused = dict.fromkeys(("target", "slug", "title", "description", "body", "rule"), "")
    server = ScriptedServer(answer("{}"))
    server.script.extend(answer(json.dumps({**unused, **reply})) for reply in [first, *shown])
    repo = tmp_path / "acme-api"
    llm = {"provider": "openai", "base_url": server.url, "model": "stand-in"}
    try:
        with MemoryService(settings=Settings.load(tmp_path / "home", llm=llm)) as svc:
            store = svc.remember(
                "Releases go out with `make release`, which tags and pushes.", cwd=repo
            ).store
            svc.organize(store)
            svc.remember("Deploy on Tuesdays, after the standup.", title="deploy day", cwd=repo)
            svc.remember(
                "Never force-push to main; open a revert PR instead.",
                title="never force-push to main",
                cwd=repo,
            )
            svc.remember(
                "Production runs PostgreSQL 16; the orders database lives on db-7.",
                title="postgres",
                cwd=repo,
            )
            assert svc.organize(store).count("merged") == 1
            svc.organize(store)  # nothing to organize
    finally:
        server.close()
    return {}


# Blocks that read what the pages made before them (past agent sessions, a Claude Code folder, an
# organizer run, two stores of one repository): made for them first, each named by a phrase; what
# a setup returns joins the block's environment.
_SETUPS = {
    "svc.list_transcripts(": _agent_sessions,
    'import_memory(kind="claude-code")': _claude_folder_and_rules,
    'resolve_store(cwd="first")': _two_project_stores,
    "audit_events(limit=3)[1]": _organized_home,
}
# Pages whose blocks are the cells of one session (a later block uses what an earlier one made):
# they run as one program.
_SESSIONS = ("notebooks.md",)


def _awaits_at_top(code: str) -> bool:
    """Whether ``code`` awaits outside a function, as a notebook cell may."""
    try:
        compile(code, "<cells>", "exec")
    except SyntaxError:
        compile(code, "<cells>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        return True
    return False


def _blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)


def _python_examples() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        runnable = [
            (f"{page.name}#{n}", code)
            for n, code in enumerate(_blocks(page))
            if not any(phrase in code for phrase in _NOT_RUNNABLE)
        ]
        if page.name in _SESSIONS:
            runnable = [(page.name, "\n".join(code for _, code in runnable))]
        found += runnable
    return found


@pytest.mark.parametrize(("where", "code"), _python_examples(), ids=[w for w, _ in _python_examples()])
def test_the_python_examples_run(where: str, code: str, tmp_path: Path) -> None:
    """Each example in a real process, from a folder that is a git repository holding another one
    (``cwd="."`` and ``cwd="acme-api"`` both name a repository, as the pages assume), with its own
    home; ``/tmp/`` paths land in a temp folder. A fragment that uses ``svc`` gets one."""
    if "import pandas" in code and importlib.util.find_spec("pandas") is None:
        code = code.split("import pandas")[0]  # pandas is not a dependency: the cells before it
    make_repo(tmp_path)
    make_repo(tmp_path / "acme-api")
    code = code.replace("/tmp/", f"{tmp_path}/")
    if "async def main(" in code and "asyncio.run(" not in code:  # defined for the reader to run
        code += "\n\nimport asyncio\n\nasyncio.run(main())\n"
    if where in _SESSIONS and _awaits_at_top(code):  # cells run in a running loop, as a kernel's do
        code = (
            f"import ast, asyncio\n\nasync def _cells():\n    found = eval(compile({code!r}, '<cells>', 'exec', "
            "flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), {'__name__': '__main__'})\n    if asyncio.iscoroutine(found):\n        await found\n\n"
            "asyncio.run(_cells())\n"
        )
    if "svc." in code and "svc =" not in code and " as svc" not in code:
        code = (
            "from datetime import UTC, datetime\nfrom coffer_memory import MemoryService\nsvc = MemoryService()\n"
            + code
        )
    environ = {**os.environ, "HOME": str(tmp_path / "user"), "COFFER_HOME": str(tmp_path / "home")}
    for phrase, setup in _SETUPS.items():
        if phrase in code:
            environ.update(setup(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"{where}:\n{proc.stderr}"
    if "audit_events(limit=3)[1]" in code:  # the page prints the event of the run it showed
        shown = "memory_organized {'merged': 1, 'created': 1, 'rules_appended': 1, 'rules_split': 0, 'skipped': 0,"
        assert shown in (ROOT / "docs" / "organizer.md").read_text() and proc.stdout.startswith(shown), (
            proc.stdout
        )


def _signatures(source: str, where: str) -> dict[str, str]:
    """Each function's, protocol member's and alias's signature in ``source``, by name, as text.
    A read-only property reads as the attribute it stands for (``name: str``)."""
    found: dict[str, str] = {}
    for node in ast.parse(source).body:
        members = node.body if isinstance(node, ast.ClassDef) else [node]
        owner = f"{node.name}." if isinstance(node, ast.ClassDef) else ""
        for item in members:
            if isinstance(item, ast.FunctionDef):
                returns = ast.unparse(item.returns) if item.returns else "None"
                if any(ast.unparse(d) == "property" for d in item.decorator_list):
                    found[owner + item.name] = returns
                else:
                    found[owner + item.name] = f"({ast.unparse(item.args)}) -> {returns}"
            elif isinstance(item, ast.AnnAssign):
                found[owner + ast.unparse(item.target)] = ast.unparse(item.annotation)
            elif isinstance(item, ast.Assign) and not owner and where == "page":
                found[ast.unparse(item.targets[0])] = ast.unparse(item.value)
    return found


@pytest.mark.parametrize("page", ["plugins.md", "llm.md"])
def test_the_signature_blocks_match_the_code(page: str) -> None:
    """The hookspec and protocol blocks are copies of coffer_memory/plugins/hookspecs.py for the
    reader; the examples test leaves them out, so nothing held them to the code."""
    from coffer_memory.plugins import hookspecs

    code = _signatures(Path(hookspecs.__file__).read_text(encoding="utf-8"), "code")
    code |= {k.removeprefix("CofferHookSpecs."): v for k, v in code.items()}
    shown: dict[str, str] = {}
    for block in _blocks(ROOT / "docs" / page):
        if any(phrase in block for phrase in _SIGNATURES):
            shown |= _signatures(block, "page")
    assert shown
    source = Path(hookspecs.__file__).read_text(encoding="utf-8")
    aliases = {k: v for k, v in shown.items() if "." not in k and k not in code}
    assert {k: v for k, v in shown.items() if k not in aliases} == {
        k: code.get(k) for k in shown if k not in aliases
    }
    assert all(f"{name} = {value}" in source for name, value in aliases.items()), aliases


def test_export_refuses_to_print_a_zip_on_a_terminal(tmp_path: Path) -> None:
    """``coffer export -o -`` typed at a prompt poured a zip's bytes onto the terminal; a pipe or a
    redirect still gets them, and JSONL (text) still goes to the terminal."""
    import pty

    home = tmp_path / "home"
    environ = {**os.environ, "COFFER_HOME": str(home)}
    coffer = str(Path(sys.executable).parent / "coffer")
    assert subprocess.run([coffer, "remember", "--global", "hi"], env=environ, check=False).returncode == 0

    def on_a_terminal(*args: str) -> tuple[int, bytes, str]:
        leader, follower = pty.openpty()
        with os.fdopen(leader, "rb", buffering=0) as screen:
            proc = subprocess.run(
                [coffer, "export", *args], env=environ, stdout=follower, stderr=subprocess.PIPE, timeout=120
            )
            os.close(follower)
            shown = b""
            with contextlib.suppress(OSError):  # EIO once the terminal is drained
                while chunk := screen.read(65536):
                    shown += chunk
        return proc.returncode, shown, proc.stderr.decode()

    status, shown, said = on_a_terminal("-o", "-")
    assert (status, shown) == (1, b""), said
    assert said.startswith("error: INVALID_INPUT: a zip is binary: ") and said.count("\n") <= 2, said
    status, shown, said = on_a_terminal("-o", "-", "--format", "jsonl")
    assert status == 0 and b'"record": "manifest"' in shown, said
    piped = subprocess.run([coffer, "export", "-o", "-"], env=environ, capture_output=True, timeout=120)
    assert piped.returncode == 0 and piped.stdout.startswith(b"PK"), piped.stderr


def test_the_cli_page_names_every_command_up_front() -> None:
    """docs/cli.md opens with the list of commands; audit, export, import, agents, transcripts,
    distill and forget-session were missing from it."""
    from coffer_memory._cli import COMMANDS

    opening = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8").split("```", 1)[0]
    named = set(re.findall(r"`([a-z-]+)", opening))
    assert sorted(set(COMMANDS) - named) == []


def test_a_recall_page_with_no_hit_says_so_outside_the_numbered_list(client: Any) -> None:
    """It showed "1. Nothing found.": the message was the first item of the hits' ordered list."""
    page = client.get("/ui/search", params={"q": "nothing matches this"})
    assert page.status_code == 200
    assert '<p class="empty">Nothing found.</p>' in page.text and '<ol class="hits">' not in page.text


def test_organize_with_a_provider_but_no_model_says_which_setting_is_missing(tmp_path: Path) -> None:
    """``[llm] provider = "openai"`` without ``model`` answered "no LLM is configured ([llm] in
    config.toml)", which reads as if the table were not there at all."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[llm]\nprovider = "openai"\n')
    environ = {**os.environ, "COFFER_HOME": str(home)}
    coffer = str(Path(sys.executable).parent / "coffer")
    subprocess.run([coffer, "remember", "--global", "Deploy on Tuesdays."], env=environ, check=True)
    for command in ("organize", "reorg"):
        proc = subprocess.run(
            [coffer, command, "--global"], env=environ, capture_output=True, text=True, timeout=120
        )
        # Session 28: an error (exit 1) naming the setting, no longer "nothing to do" with exit 0.
        assert proc.returncode == 1 and proc.stdout == "", proc
        assert proc.stderr.startswith(
            "error: INVALID_INPUT: the [llm] provider 'openai' has no model: set llm.model "
            "(`coffer config set llm.model NAME`)"
        )
    (home / "config.toml").write_text("")
    proc = subprocess.run([coffer, "organize", "--global"], env=environ, capture_output=True, text=True)
    assert proc.stdout == "global: no LLM is configured ([llm] in config.toml): nothing to do\n"


def test_session_context_refuses_a_cwd_that_is_not_a_folder(tmp_path: Path) -> None:
    """A mistyped ``--cwd`` printed the global bundle with exit status 0, as if the project had no
    rules; ``recall --cwd`` refuses the same path (the hook, run by an agent, still never fails)."""
    environ = {**os.environ, "COFFER_HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir()  # a read on a named home that does not exist is refused first
    coffer = str(Path(sys.executable).parent / "coffer")
    missing = tmp_path / "no-such-folder"
    for command in ("session-context", "recall"):
        args = [coffer, command, *(["deploy"] if command == "recall" else []), "--cwd", str(missing)]
        proc = subprocess.run(args, env=environ, capture_output=True, text=True, timeout=120)
        assert (proc.returncode, proc.stdout) == (1, ""), (command, proc.stdout)
        assert proc.stderr == f"error: INVALID_INPUT: cwd is not a directory: {str(missing)!r}\n", command


def test_every_public_error_is_in_the_api_page_and_the_error_table() -> None:
    """``InvalidCursor`` (code ``INVALID_CURSOR``, which a stale page raises), ``IndexUnavailable``,
    ``StoreNotDeletable`` and ``StoreNotMergeable`` are exported, but a reader of api.md's Errors
    or of the error table in concepts.md could not find them (nor the code ``INVALID_CURSOR``)."""
    import coffer_memory

    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    table = (ROOT / "docs" / "concepts.md").read_text(encoding="utf-8").split("## Errors", 1)[1]
    errors = [
        getattr(coffer_memory, name)
        for name in coffer_memory.__all__
        if isinstance(getattr(coffer_memory, name), type)
        and issubclass(getattr(coffer_memory, name), Exception)
    ]
    assert [e.__name__ for e in errors if f"::: coffer_memory.{e.__name__}\n" not in api] == []
    rows = [e for e in errors if e.__name__ != "CofferError"]  # the root is the paragraph above it
    assert [e.__name__ for e in rows if f"| `{e.__name__}` | `{e.code}` |" not in table] == []


def test_a_relative_cwd_outside_a_repository_is_named_as_the_folder_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's ``remember(..., cwd=".")`` run outside a repository (a notebook's kernel often
    is) said "cannot resolve a project scope for '.'", which does not say where '.' was."""
    from coffer_memory import MemoryService, ScopeUnresolved

    outside = tmp_path / "notes"
    outside.mkdir()
    monkeypatch.chdir(outside)
    with MemoryService(tmp_path / "home") as svc, pytest.raises(ScopeUnresolved) as caught:
        svc.remember("This repo deploys via `make release`.", cwd=".")
    assert (
        str(caught.value)
        == f"cannot resolve a project scope for '.' ({outside}): not inside a git repository"
    )
    assert caught.value.details == {"cwd": "."}
    with MemoryService(tmp_path / "home") as svc, pytest.raises(ScopeUnresolved) as caught:
        svc.remember("x", cwd=str(outside))
    assert (
        str(caught.value)
        == f"cannot resolve a project scope for {str(outside)!r}: not inside a git repository"
    )


@pytest.mark.parametrize(
    ("limit", "said"),
    [
        ("5", "limit must be an integer from 1 to 200, not str '5'"),
        (5.0, "limit must be an integer from 1 to 200, not float 5.0"),
        (True, "limit must be an integer from 1 to 200, not bool True"),
        (0, "limit must be an integer from 1 to 200, not 0"),
    ],
)
def test_a_limit_that_is_not_an_integer_in_range_says_what_it_is(
    limit: Any, said: str, tmp_path: Path
) -> None:
    """``recall(..., limit="5")`` (a value from a form or a notebook widget) answered "limit must
    be between 1 and 200", which "5" is; ``limit=True`` was taken as 1."""
    from coffer_memory import InvalidInput, MemoryService

    with MemoryService(tmp_path / "home") as svc:
        svc.remember("Deploy with make ship.", scope="global")
        with pytest.raises(InvalidInput) as caught:
            svc.recall("deploy", stores=["global"], limit=limit)
        assert (str(caught.value), caught.value.field) == (said, "limit")
        with pytest.raises(InvalidInput) as caught:
            svc.list_facts(store="global", limit=limit)
        assert str(caught.value) == said.replace("200", "500")
