"""The ``coffer`` command, run in-process through ``main(argv)`` against a temp home.

Only the console-script smoke tests start real processes: one per installed command.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import CliRunner

from coffer_memory import __version__, demo
from coffer_memory._cli import build_parser
from coffer_memory._config import CONFIG_FILENAME, setting_keys

SCRIPTS = Path(sys.executable).parent


def test_remember_recall_show_edit_rm(cli: CliRunner, tmp_home: Path, repo: Path) -> None:
    out = cli("remember", "Deploy with make release", "--title", "deploy", "--json", cwd=repo)
    assert out.returncode == 0, out.stderr
    fact = json.loads(out.stdout)
    fid, path = fact["fact"]["id"], fact["path"]
    assert Path(path).is_file() and fact["store"].startswith("project-")

    out = cli("recall", "how do we deploy?", cwd=repo)
    assert out.returncode == 0 and "deploy" in out.stdout and "mode: keyword" in out.stdout

    out = cli("recall", "deploy", "--mode", "grep", "--json", cwd=repo)
    assert [h["id"] for h in json.loads(out.stdout)["hits"]] == [fid]

    shown = json.loads(cli("facts", "show", fid, "--json", cwd=repo).stdout)
    assert shown["fact"]["body"] == "Deploy with make release" and shown["folder_path"] == str(
        Path(path).parent
    )

    out = cli("facts", "edit", fid, "--text", "-", "--expect-sha256", "0" * 64, cwd=repo, stdin="x")
    assert out.returncode == 1 and "MEMORY_CONFLICT" in out.stderr
    out = cli(
        "facts",
        "edit",
        fid,
        "--text",
        "-",
        "--expect-sha256",
        shown["sha256"],
        cwd=repo,
        stdin="Deploy with make ship",
    )
    assert out.returncode == 0, out.stderr
    assert "make ship" in Path(path).read_text()

    assert cli("facts", "rm", fid, cwd=repo).returncode == 0
    out = cli("facts", "show", fid, "--json", cwd=repo)
    assert out.returncode == 1 and json.loads(out.stderr)["error"]["code"] == "MEMORY_NOT_FOUND"


def test_lists_stores_labels_clear_reindex_doctor(cli: CliRunner, tmp_home: Path, repo: Path) -> None:
    for i in range(3):
        assert cli("remember", f"global fact {i}", "--global").returncode == 0
    cli("remember", "project fact", cwd=repo)

    page = json.loads(cli("facts", "list", "--global", "--limit", "2", "--json").stdout)
    assert len(page["items"]) == 2 and page["next_cursor"]
    rest = json.loads(cli("facts", "list", "--global", "--cursor", page["next_cursor"], "--json").stdout)
    assert len(rest["items"]) == 1 and rest["next_cursor"] is None

    stores = json.loads(cli("stores", "list", "--json").stdout)
    assert {s["name"] for s in stores} == {"global", next(s["name"] for s in stores if s["name"] != "global")}
    project = next(s for s in stores if s["name"] != "global")
    assert project["fact_count"] == 1 and project["project_root"] == str(repo.resolve())

    out = cli("stores", "label", project["name"], "Acme API")
    assert out.returncode == 0 and "Acme API" in out.stdout
    assert "Acme API" in cli("stores", "list").stdout
    assert cli("stores", "label", project["name"], "--clear").stdout.strip().endswith("repo")

    out = cli("clear", "--global")
    assert out.returncode == 1 and "--yes" in out.stderr
    assert "cleared 3" in cli("clear", "--global", "--yes").stdout

    (tmp_home / "index.db").unlink()
    out = cli("reindex", "--json")
    assert out.returncode == 0, out.stderr
    assert sum(r["added"] for r in json.loads(out.stdout)) == 1

    out = cli("doctor")
    assert out.returncode == 0 and "ok" in out.stdout and "grep backend: ripgrep" in out.stdout


def test_errors_exit_nonzero_with_the_code(cli: CliRunner, tmp_home: Path, tmp_path: Path) -> None:
    out = cli("remember", "x", cwd=tmp_path)
    assert out.returncode == 1 and out.stderr.startswith("error: SCOPE_UNRESOLVED:")
    assert "--global or --store NAME" in out.stderr.splitlines()[1]
    out = cli("journal", "add", "x", cwd=tmp_path)  # journal has --store but no --global
    assert "--store NAME" in out.stderr and "--global" not in out.stderr
    out = cli("remember", "   ", "--global")
    assert out.returncode == 1 and "MEMORY_REJECTED" in out.stderr
    tmp_home.mkdir()  # a refused remember made no home; reads on a missing one are refused
    out = cli("facts", "list", "--store", "../etc")
    assert out.returncode == 1 and "MEMORY_STORE_NOT_FOUND" in out.stderr
    out = cli("recall", "x", "--mode", "vector")
    assert out.returncode == 1 and "INVALID_INPUT" in out.stderr
    assert not (tmp_home / "memory").exists()


def test_remember_reads_stdin(cli: CliRunner) -> None:
    out = cli("remember", "-", "--global", "--json", stdin="from stdin\n")
    assert json.loads(out.stdout)["fact"]["body"] == "from stdin"


def test_demo_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main([]) == 0
    out = capsys.readouterr().out
    assert "mode=keyword" in out and "mode=grep" in out and "deploy-via-make-release" in out
    # The session step: the answer, which shares no word with the question, is recalled.
    session = out.split("origin_session_id='demo-chat-1'", 1)[1].split("\n\n", 1)[0]
    assert "staging-port-answer" in session
    session_start = out.split("session start:", 1)[1]
    assert (
        session_start.index("make lint")
        < session_start.index("short paragraphs")
        < session_start.index("coffer__resume")
    )
    root = out.split("coffer home: ", 1)[1].split("\n", 1)[0].removesuffix("/home")
    assert not Path(root).exists()
    # It never points at a file it is about to delete, and it ends with what to type next.
    fact_line = next(line for line in out.splitlines() if "Markdown file you can read" in line)
    assert root not in fact_line and "knowledge/inbox/" in fact_line
    assert "unless you pass --keep" in out and f"removed {root} (run the demo with --keep" in out
    tail = out.rsplit("next: ", 1)[1]
    assert "/bin/activate" in tail and "/bin/coffer" in tail and 'coffer recall "how do we deploy?"' in tail


def test_demo_keep_leaves_a_home_the_printed_command_works_on(
    capsys: pytest.CaptureFixture[str], cli: CliRunner
) -> None:
    assert demo.main(["--keep"]) == 0
    out = capsys.readouterr().out
    # The demo moves the repository; the printed recall runs from the new path.
    command = next(line.split() for line in out.splitlines() if line.strip().endswith("acme-api-moved"))
    assert Path(command[0]).name == "coffer" and command[1] == "--home"
    root = Path(command[2]).parent
    try:
        assert str(Path(command[2]) / "memory") in out  # the fact file is shown where it stays
        result = cli(*command[1:])
        assert result.returncode == 0 and "deploy-via-make-release" in result.stdout
    finally:
        shutil.rmtree(root)


def test_lane_commands(cli: CliRunner, tmp_home: Path, repo: Path) -> None:
    assert cli("journal", "add", "Deployed v2 to staging", cwd=repo).returncode == 0
    days = json.loads(cli("journal", "--json", cwd=repo).stdout)
    assert len(days) == 1 and "Deployed v2" in days[0]["text"]
    assert cli("handoff", "save", "-", cwd=repo, stdin="WIP: parser").returncode == 0
    out = cli("resume", cwd=repo)
    assert "WIP: parser" in out.stdout and "'main'" in out.stdout
    assert cli("memory", "rules", "--add", "Never force-push main", cwd=repo).returncode == 0
    assert cli("memory", "rules", "--add", "Answer in English", "--global").returncode == 0
    bundle = json.loads(cli("session-context", "--json", cwd=repo).stdout)["additional_context"]
    assert bundle.index("force-push") < bundle.index("English") < bundle.index("coffer__resume")
    assert cli("memory", "rules", "--delete", cwd=repo).returncode == 1  # needs --yes
    assert cli("memory", "rules", "--delete", "--yes", cwd=repo).returncode == 0
    assert "deleted: rules/rules.md" in cli("memory", "log", cwd=repo).stdout
    out = cli("journal", "rm", "2001-01-01", cwd=repo)
    assert out.returncode == 1 and "MEMORY_NOT_FOUND" in out.stderr


def test_organize_without_a_model_says_so(cli: CliRunner) -> None:
    cli("remember", "an inbox item", "--global")
    out = cli("organize", "--global", "--dry-run")
    assert out.returncode == 0 and "no LLM is configured" in out.stdout
    assert json.loads(cli("reorg", "--global", "--json").stdout)["status"] == "no_model"


# -- conventions: version, help, completion ----------------------------------------------------------


def test_version_and_bare_coffer_prints_help(cli: CliRunner) -> None:
    out = cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"coffer {__version__}"
    out = cli()
    assert out.returncode == 0 and out.stdout.startswith("usage: coffer") and "remember" in out.stdout
    assert out.stderr == ""


def _parsers(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parsers(child, f"{path} {name}")


def test_every_argument_and_subcommand_has_help() -> None:
    missing = []
    for path, parser in _parsers(build_parser(), "coffer"):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helped = {a.dest for a in action._choices_actions if a.help}
                missing += [f"{path} {name}" for name in action.choices if name not in helped]
            elif not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, missing


def test_bash_completion_registers_and_completes_subcommands(cli: CliRunner, tmp_path: Path) -> None:
    for shell in ("bash", "zsh", "tcsh"):
        out = cli("completion", shell)
        assert out.returncode == 0 and "remember" in out.stdout and "forget-session" in out.stdout
    script = tmp_path / "coffer.bash"
    script.write_text(cli("completion", "bash").stdout)
    probe = (
        f"source {script}; complete -p coffer; "
        "COMP_WORDS=(coffer sto); COMP_CWORD=1; COMP_LINE='coffer sto'; COMP_POINT=10; "
        "_shtab_coffer coffer sto coffer; echo ${COMPREPLY[@]}"
    )
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "_shtab_coffer coffer" in out.stdout and out.stdout.split()[-1] == "stores"


# -- coffer config ---------------------------------------------------------------------------------


def _config(cli: CliRunner, *args: str) -> dict[str, dict[str, object]]:
    out = cli("config", "list", "--json", *args)
    assert out.returncode == 0, out.stderr
    return {row["key"]: row for row in json.loads(out.stdout)}


def test_config_shows_each_value_and_its_source(
    cli: CliRunner, tmp_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp_home.mkdir()  # a read on a named home that does not exist is refused
    rows = _config(cli)
    assert set(rows) == {"home", *setting_keys()}
    assert rows["home"]["source"] == "environment" and rows["home"]["value"] == str(tmp_home)
    assert rows["llm.model"] == {
        "key": "llm.model",
        "value": None,
        "source": "default",
        "env": "COFFER_LLM_MODEL",
    }

    assert cli("config", "set", "llm.model", "gpt-4o").returncode == 0
    assert cli("config", "set", "memory.retrieval_modes", "grep,keyword,vector").returncode == 0
    assert cli("config", "set", "llm.timeout_seconds", "60").returncode == 0
    rows = _config(cli)
    assert rows["llm.model"]["value"] == "gpt-4o" and rows["llm.model"]["source"] == "file"
    assert rows["memory.retrieval_modes"]["value"] == ["grep", "keyword", "vector"]
    assert rows["llm.timeout_seconds"]["value"] == 60.0 and rows["grep_backend"]["source"] == "default"
    assert cli("config", "get", "llm.model").stdout == "gpt-4o\n"

    monkeypatch.setenv("COFFER_LLM_MODEL", "from-env")
    monkeypatch.setenv("COFFER_MEMORY_DEFAULT_MODE", "grep")
    rows = _config(cli)
    assert rows["llm.model"]["value"] == "from-env" and rows["llm.model"]["source"] == "environment"
    out = cli("config", "set", "llm.model", "other")
    assert out.returncode == 0 and "COFFER_LLM_MODEL is set in the environment" in out.stdout
    # The environment reaches the service too, not only this listing.
    cli("remember", "grep finds this", "--global")
    assert "mode: grep" in cli("recall", "finds").stdout

    config = tmp_home / CONFIG_FILENAME
    before = config.read_bytes()
    out = cli("config", "set", "memory.max_fact_chars", "10")
    assert out.returncode == 1 and "memory.max_fact_chars" in out.stderr and "greater than" in out.stderr
    out = cli("config", "set", "llm.modle", "x")
    assert out.returncode == 1 and "did you mean llm.model" in out.stderr
    assert config.read_bytes() == before
    assert cli("config", "unset", "llm.model").returncode == 0
    assert "model" not in config.read_text().split("[llm]", 1)[1].split("[", 1)[0]


def test_config_set_keeps_the_users_comments(cli: CliRunner, tmp_home: Path) -> None:
    tmp_home.mkdir()
    config = tmp_home / CONFIG_FILENAME
    config.write_text('# my settings\n[llm]\nprovider = "none"  # no model yet\n')
    assert cli("config", "set", "llm.max_tokens", "500").returncode == 0
    text = config.read_text()
    assert text.startswith("# my settings\n") and "# no model yet" in text and "max_tokens = 500" in text


def test_every_environment_variable_is_documented() -> None:
    docs = (Path(__file__).parent.parent / "docs" / "configuration.md").read_text()
    missing = [var for var in setting_keys().values() if f"`{var}`" not in docs]
    assert not missing, missing


# -- naming stores and facts -------------------------------------------------------------------------


def test_stores_by_label_folder_name_and_prefix(cli: CliRunner, repo: Path, tmp_path: Path) -> None:
    from conftest import make_repo

    other = make_repo(tmp_path / "other")
    cli("remember", "fact in repo", cwd=repo)
    cli("remember", "fact in other", cwd=other)
    stores = json.loads(cli("stores", "list", "--json").stdout)
    name = next(s["name"] for s in stores if s["project_root"] == str(repo.resolve()))
    table = cli("stores", "list").stdout
    assert "label" in table.splitlines()[0] and str(repo.resolve()) in table

    assert cli("stores", "label", "repo", "Acme API").returncode == 0  # the repository's folder name
    assert "Acme API" in cli("stores", "list").stdout
    for given in ("acme api", name[:12], name.removeprefix("project-")[:6].lower()):
        out = cli("facts", "list", "--store", given, "--json")
        assert out.returncode == 0, (given, out.stderr)
        assert [r["fact"]["body"] for r in json.loads(out.stdout)["items"]] == ["fact in repo"]
    out = cli("recall", "fact", "--store", "Acme API", "--json")
    assert json.loads(out.stdout)["stores"] == [name]

    out = cli("facts", "list", "--store", "project-", "--json")
    assert out.returncode == 1
    error = json.loads(out.stderr)["error"]
    assert error["code"] == "INVALID_INPUT" and "ambiguous" in error["message"]
    assert len(error["details"]["candidates"]) == 2
    out = cli("facts", "list", "--store", "nosuch")
    assert out.returncode == 1 and "MEMORY_STORE_NOT_FOUND" in out.stderr


def test_fact_ids_by_unique_prefix(cli: CliRunner) -> None:
    ids = [
        json.loads(cli("remember", f"fact {i}", "--global", "--json").stdout)["fact"]["id"] for i in range(3)
    ]
    common = ids[0][: next(i for i in range(26) if len({fid[i] for fid in ids}) > 1)]
    for fid in ids:
        unique = (
            fid[: len(common) + 1] if sum(i.startswith(fid[: len(common) + 1]) for i in ids) == 1 else fid
        )
        out = cli("facts", "show", unique.lower(), "--global", "--json")
        assert out.returncode == 0 and json.loads(out.stdout)["fact"]["id"] == fid
    out = cli("facts", "rm", common, "--global")
    assert out.returncode == 1 and "ambiguous" in out.stderr and all(fid in out.stderr for fid in ids)
    out = cli("facts", "show", "ZZZ", "--global")
    assert out.returncode == 1 and "MEMORY_NOT_FOUND" in out.stderr
    assert cli("facts", "rm", ids[0], "--global").returncode == 0


# -- facts edit in $EDITOR ---------------------------------------------------------------------------


def _editor(tmp_path: Path, code: str) -> str:
    """An EDITOR command: a Python script that gets the file to edit as argv[1]."""
    script = tmp_path / "editor.py"
    script.write_text(
        "import sys\nfrom pathlib import Path\npath = Path(sys.argv[1])\n" + textwrap.dedent(code)
    )
    return f"{sys.executable} {script}"


def test_facts_edit_without_flags_opens_the_editor(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fact = json.loads(
        cli("remember", "Deploy with make release", "--title", "deploy", "--global", "--json").stdout
    )
    fid, path = fact["fact"]["id"], Path(fact["path"])
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv(
        "EDITOR",
        _editor(
            tmp_path,
            """
            text = path.read_text()
            assert text.startswith("---\\ntitle: deploy\\n"), text
            path.write_text(text.replace("make release", "make ship").replace("title: deploy", "title: shipping"))
            """,
        ),
    )
    out = cli("facts", "edit", fid[:20], "--global")
    assert out.returncode == 0, out.stderr
    assert "before sha256" in out.stdout
    shown = json.loads(cli("facts", "show", fid, "--global", "--json").stdout)
    assert shown["fact"]["body"] == "Deploy with make ship" and shown["fact"]["title"] == "shipping"
    assert shown["sha256"] in out.stdout

    monkeypatch.setenv("EDITOR", _editor(tmp_path, "pass"))
    before = path.read_bytes()
    out = cli("facts", "edit", fid, "--global")
    assert out.returncode == 0 and "no changes" in out.stdout and path.read_bytes() == before
    assert cli("facts", "edit", fid, "--global", "--json").stdout == "null\n"
    monkeypatch.setenv("EDITOR", _editor(tmp_path, "sys.exit(3)"))
    out = cli("facts", "edit", fid, "--global")
    assert out.returncode == 1 and "status 3" in out.stderr and path.read_bytes() == before


def test_facts_edit_in_the_editor_is_compare_and_swap(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fact = json.loads(cli("remember", "Original text", "--global", "--json").stdout)
    fid, fact_path = fact["fact"]["id"], Path(fact["path"])
    # While the user edits, someone else changes the fact's file: the save must be refused.
    monkeypatch.setenv(
        "EDITOR",
        _editor(
            tmp_path,
            f"""
            fact = Path({str(fact_path)!r})
            fact.write_text(fact.read_text().replace("Original text", "Changed meanwhile"))
            path.write_text(path.read_text().replace("Original text", "My edit"))
            """,
        ),
    )
    out = cli("facts", "edit", fid, "--global", "--json")
    assert out.returncode == 1
    error = json.loads(out.stderr)["error"]
    assert error["code"] == "MEMORY_CONFLICT"
    kept = Path(error["details"]["kept"])
    assert "My edit" in kept.read_text()
    assert "Changed meanwhile" in fact_path.read_text() and "My edit" not in fact_path.read_text()
    kept.unlink()


# -- the installed console scripts, as real processes (one smoke test each) -------------------------


def test_coffer_console_script_round_trip(tmp_home: Path, repo: Path) -> None:
    env = {**os.environ, "COFFER_HOME": str(tmp_home)}
    run = [str(SCRIPTS / "coffer")]
    out = subprocess.run(
        [*run, "remember", "-", "--title", "deploy"],
        input="Deploy with make release",
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    out = subprocess.run(
        [*run, "recall", "deploy", "--json"], cwd=repo, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert [h["title"] for h in json.loads(out.stdout)["hits"]] == ["deploy"]


@pytest.mark.parametrize("script", ["coffer-hook", "coffer-api", "coffer-mcp"])
def test_console_script_prints_help(script: str) -> None:
    out = subprocess.run([str(SCRIPTS / script), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"usage: {script}")


def test_keyword_recall_imports_nothing_heavy(tmp_home: Path, repo: Path) -> None:
    # Start-up is most of a CLI call: a keyword recall must not pay for the vector stack, the HTTP
    # client, the adapters, pydantic, the plugin machinery or the components it does not use
    # (bench/cli_startup.py measures it).
    env = {**os.environ, "COFFER_HOME": str(tmp_home)}
    run = [sys.executable, "-X", "importtime", "-m", "coffer_memory._cli"]
    subprocess.run([*run, "remember", "Deploy with make release"], cwd=repo, env=env, check=True)
    out = subprocess.run([*run, "recall", "deploy"], cwd=repo, env=env, capture_output=True, text=True)
    assert out.returncode == 0 and "make release" in out.stdout, out.stderr[-2000:]
    imported = {
        line.split("|")[2].strip() for line in out.stderr.splitlines() if line.startswith("import time:")
    }
    assert "coffer_memory._retrieval" in imported  # the import log is read right
    heavy = {
        "numpy",
        "sqlite_vec",
        "httpx",
        "tenacity",
        "onnxruntime",
        "tokenizers",
        "fastapi",
        "mcp",
        "shtab",
        "pydantic",
        "pluggy",
        "tomlkit",
        "coffer_memory.plugins.builtin",
        "coffer_memory._organize",
        "coffer_memory._transcripts",
        "coffer_memory._agents",
        "coffer_memory._lanes",
        "coffer_memory._stores",
        "coffer_memory._doctor",
        "coffer_memory._cli.agents",
        "coffer_memory._cli.lanes",
        "coffer_memory._cli.transcripts",
    }
    found = {name for name in imported if any(name == h or name.startswith(h + ".") for h in heavy)}
    assert not found, sorted(found)


def test_recall_across_stores_says_the_order_is_fused_and_the_scores_per_store(
    cli: CliRunner, repo: Path
) -> None:
    # Ranked by reciprocal rank fusion across stores, the table showed each store's own score in a
    # column called "score": a 0.9 above a 1.6 read as a wrong order.
    assert cli("remember", "Staging deploys run from the release branch.", cwd=repo).returncode == 0
    for n in range(3):
        text = f"Staging staging staging: note {n} about the staging cluster and staging deploys."
        assert cli("remember", "--global", text, cwd=repo).returncode == 0
    out = cli("recall", "staging deploys", cwd=repo)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[1].split()[:3] == ["#", "store", "score"]
    assert {line.split()[2] for line in lines[3:-1]} == {"project", "global"}
    assert lines[-1].startswith("# is the order across stores (reciprocal rank fusion")
    only = cli("recall", "staging deploys", "--store", "global", cwd=repo)
    assert only.stdout.splitlines()[1].split()[:2] == ["#", "score"] and "fusion" not in only.stdout


def test_config_list_shows_no_stale_legacy_embedding_size(cli: CliRunner, tmp_home: Path) -> None:
    # memory.embedding_dimensions 768 was listed beside the real settings: the default of the seed's
    # legacy flat field, which nothing reads (embeddings come from [embedding]); it read as the
    # vector size in effect.
    tmp_home.mkdir(parents=True, exist_ok=True)
    listed = cli("config", "list")
    assert listed.returncode == 0
    assert "memory.embedding_dimensions" not in listed.stdout and "768" not in listed.stdout
    assert "embedding.dimensions               (unset: the model's own size)" in listed.stdout
    (tmp_home / CONFIG_FILENAME).write_text("[memory]\nembedding_dimensions = 1024\n")
    row = next(
        line for line in cli("config", "list").stdout.splitlines() if line.startswith("memory.embedding_dim")
    )
    assert "1024 (ignored: legacy: accepted and ignored; embeddings come from embedding.*)" in row
    rows = json.loads(cli("config", "list", "--json").stdout)
    legacy = next(r for r in rows if r["key"] == "memory.embedding_dimensions")
    assert legacy["value"] == 1024 and legacy["note"].startswith("legacy: accepted and ignored")
    got = cli("config", "get", "memory.embedding_dimensions")
    assert got.stdout == "1024\n" and "ignored" in got.stderr


def test_an_empty_coffer_home_is_the_default_home_and_doctor_and_config_say_why(tmp_path: Path) -> None:
    # An empty COFFER_HOME counts as unset (as XDG's variables do): the home is ~/.coffer. Nothing
    # said so, and a user who had emptied the variable to "turn it off" could not tell which home
    # was in use or why.
    coffer = str(Path(sys.executable).parent / "coffer")
    env = {**os.environ, "HOME": str(tmp_path), "COFFER_HOME": ""}
    home = tmp_path / ".coffer"
    home.mkdir()  # a read makes no home (tests/test_faces27_home.py)
    doctor = subprocess.run([coffer, "doctor"], env=env, capture_output=True, text=True, timeout=120)
    reason = "the default: COFFER_HOME is set but empty, which counts as unset"
    assert f"home:         {home} ({reason})" in doctor.stdout, doctor.stdout + doctor.stderr
    listed = subprocess.run(
        [coffer, "config", "list", "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    row = json.loads(listed.stdout)[0]
    assert row == {
        "key": "home",
        "value": str(home),
        "source": "default",
        "env": "COFFER_HOME",
        "note": reason[13:],
    }
    named = subprocess.run(
        [coffer, "doctor", "--json"],
        env={**env, "COFFER_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(named.stdout)["home_chosen_by"] == "COFFER_HOME"


def test_clear_counts_one_fact_as_one_fact(cli: CliRunner) -> None:
    assert cli("remember", "--global", "the only global fact").returncode == 0
    assert cli("clear", "--global", "--yes").stdout == "cleared 1 fact from global\n"
    assert cli("remember", "--global", "one").returncode == 0
    assert cli("remember", "--global", "two").returncode == 0
    assert cli("clear", "--global", "--yes").stdout == "cleared 2 facts from global\n"
