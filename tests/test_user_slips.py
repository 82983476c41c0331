"""Slips a user makes at the prompt or in a script (an unset shell variable, a string where a list
goes, Ctrl-C): a clear typed error or message, and nothing deleted or half-done. Real processes
and temp homes, as in ``test_first_run.py``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from test_first_run import SCRIPTS, one_error, run

from coffer_memory import InvalidInput, MemoryService, ServiceClosed


def _facts(home: Path, *where: str, cwd: Path | None = None) -> list[str]:
    proc = run("facts", "list", "--json", *where, home=home, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return [item["fact"]["id"] for item in json.loads(proc.stdout)["items"]]


@pytest.mark.parametrize("command", [("facts", "rm"), ("facts", "show"), ("facts", "edit")])
def test_an_empty_fact_id_is_invalid_input_not_the_only_fact(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """``coffer facts rm "$ID"`` with ``ID`` unset: the empty string was a prefix of every id, so
    in a store of one fact it named that fact and ``rm`` deleted it."""
    home = tmp_path / "home"
    assert run("remember", "--global", "the only fact", home=home).returncode == 0
    [kept] = _facts(home, "--global")
    extra = ("--title", "new") if command[-1] == "edit" else ()
    proc = run(*command, "", "--global", *extra, home=home)
    assert "fact id is empty" in one_error(proc, "error: INVALID_INPUT: ")
    assert _facts(home, "--global") == [kept]


@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_store_name_is_invalid_input_not_the_only_store(tmp_path: Path, value: str) -> None:
    """``--store "$STORE"`` with ``STORE`` unset matched every store by prefix: with one store,
    ``coffer stores delete "" --yes`` deleted it."""
    home = tmp_path / "home"
    assert run("remember", "--global", "keep me", home=home).returncode == 0
    proc = run("stores", "delete", value, "--yes", home=home)
    assert "store name is empty" in one_error(proc, "error: INVALID_INPUT: ")
    proc = run("facts", "list", "--store", value, home=home)
    assert "store name is empty" in one_error(proc, "error: INVALID_INPUT: ")
    assert len(_facts(home, "--global")) == 1


def test_a_mode_that_is_not_enabled_hints_at_the_command_that_enables_it(tmp_path: Path, repo: Path) -> None:
    """``mode 'hybrid' is not enabled`` said what was wrong but not how to turn it on."""
    home = tmp_path / "home"
    home.mkdir()  # a read on a named home that does not exist is refused first
    proc = run("--home", str(home), "recall", "deploy", "--mode", "hybrid", home=home)
    assert proc.returncode == 1
    error, tip = proc.stderr.splitlines()
    assert (
        error == "error: INVALID_INPUT: mode 'hybrid' is not enabled (retrieval_modes = ['grep', 'keyword'])"
    )
    command = f"coffer --home {home} config set memory.retrieval_modes grep,keyword,hybrid"
    # This environment has the [vector] embedder: no install to suggest (test_plain_install.py
    # checks the hint where it is missing).
    assert tip == f"hint: {command}"
    assert run(*command.split()[1:], home=home).returncode == 0
    made = run("remember", "--json", "deploy with make release", home=home, cwd=repo)
    store = json.loads(made.stdout)["store"]
    assert run("stores", "config", store, "retrieval_modes", "keyword", home=home).returncode == 0
    proc = run("recall", "deploy", "--mode", "grep", home=home, cwd=repo)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == f"hint: coffer stores config {store} retrieval_modes keyword,grep"
    assert run(*f"stores config {store} retrieval_modes keyword,grep".split(), home=home).returncode == 0
    assert run("recall", "deploy", "--mode", "grep", home=home, cwd=repo).returncode == 0


def test_ctrl_c_during_a_reindex_is_one_line_and_status_130(tmp_path: Path) -> None:
    """Ctrl-C printed a KeyboardInterrupt traceback of thirty lines; the index stays usable."""
    home = tmp_path / "home"
    inbox = home / "memory" / "global" / "knowledge" / "inbox"
    inbox.mkdir(parents=True)
    for i in range(4000):
        (inbox / f"f{i}.md").write_text(f"---\ntitle: fact {i}\n---\n\nword{i} deploy release staging\n")
    proc = subprocess.Popen(
        [str(SCRIPTS / "coffer"), "reindex", "--rebuild"],
        env={**os.environ, "COFFER_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # SIGINT at its default even in a suite run as a background job (conftest.pytest_configure).
    )
    db = home / "index.db"
    while not db.exists() and proc.poll() is None:  # interrupt it once it is at work
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.skip("the reindex finished before the interrupt reached it")
    assert proc.returncode == 130, err
    assert err.decode().splitlines()[-1] == "interrupted", err
    assert b"Traceback" not in err
    found = run("recall", "word3999", "--store", "global", home=home)
    assert found.returncode == 0 and "fact 3999" in found.stdout, found.stderr


def test_a_text_or_query_that_is_not_a_string_is_invalid_input(tmp_path: Path) -> None:
    """``remember(123)`` and ``remember(b"...")`` said "memory rejected: text is empty", and
    ``recall(5)`` "query is empty"."""
    with MemoryService(tmp_path / "home") as svc:
        for text in (123, b"deploy with make release", None):
            with pytest.raises(InvalidInput, match="text must be a string") as caught:
                svc.remember(text, scope="global")  # type: ignore[arg-type]
            assert caught.value.details["field"] == "text"
        for query in (5, b"deploy", None):
            with pytest.raises(InvalidInput, match="query must be a string"):
                svc.recall(query, stores=["global"])  # type: ignore[arg-type]
    assert not (tmp_path / "home" / "memory").exists()


def test_one_store_name_given_as_a_string_is_invalid_input(tmp_path: Path) -> None:
    """``recall(q, stores="global")`` searched the stores 'g', 'l', 'o'... and said store 'g' was
    not found; ``export_memory(stores="global")`` the same."""
    with MemoryService(tmp_path / "home") as svc:
        svc.remember("deploy with make release", scope="global")
        with pytest.raises(InvalidInput, match="stores must be a list of store names") as caught:
            svc.recall("deploy", stores="global")
        assert caught.value.details["field"] == "stores"
        with pytest.raises(InvalidInput, match="stores must be a list of store names"):
            svc.export_memory(tmp_path / "out.zip", stores="global")
        assert [h.store for h in svc.recall("deploy", stores=["global"]).hits] == ["global"]
    assert not (tmp_path / "out.zip").exists()


@pytest.mark.parametrize("method", ["DELETE", "PATCH", "PUT", "POST"])
def test_a_change_to_a_path_with_a_trailing_slash_is_not_redirected(client: Any, method: str) -> None:
    """``DELETE /memory_stores/global/facts/`` (a fact id that came out empty) was answered with a
    307 to ``DELETE /memory_stores/global/facts``, which a client following redirects (httpx's
    TestClient, requests) obeyed: every fact of the store was deleted."""
    api = "/api/v1/memory_stores/global"
    made = client.post(f"{api}/facts", json={"text": "keep me"})
    assert made.status_code == 201, made.text
    r = client.request(method, f"{api}/facts/", json={} if method != "DELETE" else None)
    assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND", r.text
    assert "trailing '/'" in r.json()["error"]["message"]
    assert client.get(f"{api}/facts/").json()["items"][0]["text"] == "keep me"  # reads keep the redirect


def test_deleting_the_global_store_is_refused_before_asking_for_yes(tmp_path: Path) -> None:
    """Without ``--yes`` it said "pass --yes to confirm"; with ``--yes`` it said the global store
    cannot be deleted: the first answer sent the user into the second."""
    home = tmp_path / "home"
    assert run("remember", "--global", "keep me", home=home).returncode == 0
    for extra in ((), ("--yes",)):
        line = one_error(run("stores", "delete", "global", *extra, home=home), "error: INVALID_INPUT: ")
        assert line.endswith("the global store cannot be deleted; clear it instead"), line
    assert len(_facts(home, "--global")) == 1


def test_a_bad_setting_says_where_it_came_from(tmp_path: Path) -> None:
    """``COFFER_MEMORY_DEFAULT_MODE=hybird coffer recall x`` said "invalid settings:
    memory.default_mode: ..." with no word of the variable that set it."""
    home = tmp_path / "home"
    home.mkdir()  # a read on a named home that does not exist is refused first
    proc = run("recall", "x", home=home, env={"COFFER_MEMORY_DEFAULT_MODE": "hybird"})
    line = one_error(proc, "error: INVALID_INPUT: invalid settings: memory.default_mode: ")
    assert line.endswith("(settings from: COFFER_MEMORY_DEFAULT_MODE)"), line
    (home / "config.toml").write_text('[memory]\ndefault_mode = "vector"\n')
    proc = run("recall", "x", home=home, env={"COFFER_MEMORY_RETRIEVAL_MODES": "grep,keyword"})
    line = one_error(proc, "error: INVALID_INPUT: invalid settings: memory.default_mode 'vector' ")
    assert line.endswith(f"(settings from: {home / 'config.toml'}, COFFER_MEMORY_RETRIEVAL_MODES)"), line


def test_a_service_used_after_close_says_it_is_closed(tmp_path: Path) -> None:
    """docs/api.md says so. A closed service used to open its index again on the next call (and
    closed it under calls other threads were making, which failed with a raw apsw error): a call
    after ``close()`` now fails with ``ServiceClosed``, and a second ``close()`` does nothing."""
    svc = MemoryService(tmp_path / "home")
    svc.remember("deploy with make release", scope="global")
    svc.close()
    with pytest.raises(ServiceClosed, match="closed"):
        svc.recall("deploy", stores=["global"])
    svc.close()
    assert not svc.index.is_open


def test_a_codex_config_that_is_not_toml_says_where_in_words(tmp_path: Path) -> None:
    """An array left open at the end of ``config.toml`` was reported as tomlkit's "Unexpected
    character: '\\x00' at line 1 col 0"."""
    codex = tmp_path / "codex"
    codex.mkdir()
    (codex / "config.toml").write_text('model = "o4"\nbad = [\n')
    proc = run(
        "agents", "install", "codex", "--no-check", home=tmp_path / "home", env={"CODEX_HOME": str(codex)}
    )
    line = one_error(proc, "error: AGENT_CONFIG_INVALID: ")
    assert line.endswith(
        "config.toml: is not valid TOML (Invalid value (at end of document)); nothing was written"
    )
    assert (codex / "config.toml").read_text() == 'model = "o4"\nbad = [\n'


@pytest.mark.parametrize("label", ["global", "Global", "project-0CN67023MCKFM6S6F2Z9YD0618"])
def test_a_label_that_looks_like_a_store_name_is_refused(tmp_path: Path, repo: Path, label: str) -> None:
    """A project store labelled "global" showed as "global" in every list, yet ``--store global``
    still named the global store: ``coffer clear --store global --yes`` meant for the project
    would have emptied the global store."""
    home = tmp_path / "home"
    assert run("remember", "p fact", home=home, cwd=repo).returncode == 0
    name = json.loads(run("stores", "list", "--json", home=home).stdout)[0]["name"]
    assert name.startswith("project-")
    line = one_error(run("stores", "label", name, label, home=home), "error: INVALID_INPUT: ")
    assert line.endswith("looks like a store name; choose another"), line
    assert run("stores", "label", name, "acme", home=home).returncode == 0


def test_a_cwd_that_is_a_file_is_not_called_missing(tmp_path: Path, repo: Path) -> None:
    """``--cwd README.md`` (a file inside the repository) said "no such directory"."""
    proc = run("remember", "x", "--cwd", str(repo / "README.md"), home=tmp_path / "home")
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0].endswith("/README.md': not a directory"), proc.stderr
    proc = run("remember", "x", "--cwd", str(repo / "gone"), home=tmp_path / "home")
    assert proc.stderr.splitlines()[0].endswith("/gone': no such directory"), proc.stderr


def test_a_session_no_agent_has_is_not_said_to_be_missing_from_opencode_alone(tmp_path: Path) -> None:
    """Without ``--agent`` every agent's sessions are searched, yet the error named the last one
    looked in: "session 'nope' not found in opencode sessions"."""
    (tmp_path / "home").mkdir()  # a read on a named home that does not exist is refused first
    for args in (("transcripts", "show", "nope"), ("distill", "nope")):
        line = one_error(run(*args, home=tmp_path / "home"), "error: SESSION_NOT_FOUND: ")
        assert line.endswith("session 'nope' not found in any agent's sessions"), line
    line = one_error(
        run("distill", "nope", "--agent", "codex", home=tmp_path / "home"), "error: SESSION_NOT_FOUND: "
    )
    assert line.endswith("session 'nope' not found in codex sessions"), line


def test_the_help_names_every_exit_status_the_cli_page_lists(tmp_path: Path) -> None:
    """A script author reading ``coffer --help`` learns what the exit statuses mean, the same
    ones docs/cli.md's table lists (130 for Ctrl-C is new)."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")
    table = page.split("## Exit status and errors", 1)[1].split("\n\n", 2)[1]
    statuses = [line.split("|")[1].strip() for line in table.splitlines()[2:]]
    assert statuses == ["0", "1", "2", "130"]
    helped = " ".join(run("--help", home=tmp_path / "home").stdout.split())
    assert all(f" {status} " in helped for status in statuses), helped


def test_a_global_fact_recall_showed_is_shown_edited_and_deleted_by_its_id(
    cli: Any, repo: Path, tmp_path: Path
) -> None:
    """Inside a repository ``recall`` lists global facts beside the project's, but ``facts show
    ID`` of one said "not found in store 'project-…'", and outside a repository (where recall
    searches the global store) it failed with SCOPE_UNRESOLVED: an id is unique, so without
    --store or --global the project store is looked in first, then the global store."""
    out = cli("remember", "--global", "The user prefers uv for Python envs.", "--json", cwd=repo)
    fid = json.loads(out.stdout)["fact"]["id"]
    project = json.loads(cli("remember", "Deploy with make release.", "--json", cwd=repo).stdout)
    [hit] = [h for h in json.loads(cli("recall", "uv", "--json", cwd=repo).stdout)["hits"] if h["id"] == fid]
    assert hit["store"] == "global"
    shown = cli("facts", "show", fid, "--json", cwd=repo)
    assert shown.returncode == 0 and json.loads(shown.stdout)["store"] == "global", shown.stderr
    assert cli("facts", "show", fid[:12], cwd=tmp_path).returncode == 0  # outside: the global store
    edited = cli("facts", "edit", fid, "--title", "uv", cwd=repo)
    assert edited.returncode == 0 and f"edited {fid} in global" in edited.stdout
    assert cli("facts", "show", project["fact"]["id"], cwd=repo).returncode == 0  # the project's first
    missing = cli("facts", "show", "01" + "Z" * 24, cwd=repo)
    assert missing.returncode == 1 and f"not found in store '{project['store']}'" in missing.stderr
    gone = cli("facts", "show", "01" + "Z" * 24, cwd=tmp_path)
    assert gone.returncode == 1 and "SCOPE_UNRESOLVED" in gone.stderr and "--global" in gone.stderr
    assert cli("facts", "rm", fid, cwd=repo).returncode == 0
    assert cli("facts", "list", "--global", "--json").stdout.count(fid) == 0


def test_a_sweep_without_an_llm_says_so_once(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``coffer distill --sweep`` in a home with no LLM printed one "no_model ... (no LLM is
    configured ...)" line per past session (20 by default) and then "0 distilled"."""
    from agent_samples import build
    from conftest import make_repo

    written = build(tmp_path / "agents", project_dir=make_repo(tmp_path / "work" / "demo-repo"))
    for key, value in written.env.items():
        if key != "HOME":
            monkeypatch.setenv(key, value)
    out = cli("distill", "--sweep")
    assert (out.returncode, out.stdout) == (
        0,
        "no LLM is configured ([llm] in config.toml, see docs/llm.md): nothing to distill\n",
    )
    shown = json.loads(cli("distill", "--sweep", "--json").stdout)  # the report stays whole
    assert shown["results"] and {r["status"] for r in shown["results"]} <= {"no_model", "not_git"}
