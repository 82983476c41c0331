"""Session 28, the faces' findings left open: ``organize`` with a provider but no model, a broken
plugin's warning, zero-width characters in the web view, Ctrl-C while a console script starts,
the MCP pick-up of left sessions and which session ``--max-sessions`` ends. Real console scripts
in real subprocesses, real temp homes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
from served import Served

SCRIPTS = Path(sys.executable).parent


def _coffer(*args: str, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPTS / "coffer"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COFFER_HOME": str(home), **(env or {})},
    )


# -- 1: organize with a provider and no model ------------------------------------------------------


def test_organize_with_a_provider_but_no_model_is_an_error_naming_the_setting(tmp_path: Path) -> None:
    """``llm.provider = openai`` set without ``llm.model``: ``organize`` and ``reorg`` said "nothing
    to do" and exited 0, as if the half-made setting were fine."""
    home = tmp_path / "home"
    assert _coffer("remember", "--global", "Deploy on Tuesdays.", home=home).returncode == 0
    assert _coffer("config", "set", "llm.provider", "openai", home=home).returncode == 0
    for command in ("organize", "reorg"):
        proc = _coffer(command, "--global", home=home)
        assert proc.returncode == 1, (proc.stdout, proc.stderr)
        assert proc.stdout == ""
        assert proc.stderr.startswith("error: INVALID_INPUT: the [llm] provider 'openai' has no model:"), (
            proc.stderr
        )
        assert "coffer config set llm.model NAME" in proc.stderr
        proc = _coffer(command, "--global", "--json", home=home)
        assert proc.returncode == 1 and proc.stdout == ""
        error = json.loads(proc.stderr)["error"]
        assert error["code"] == "INVALID_INPUT" and error["details"]["field"] == "llm.model", error
    inbox = home / "memory" / "global" / "knowledge" / "inbox"
    assert len(list(inbox.glob("*.md"))) == 1  # nothing was filed
    assert _coffer("config", "unset", "llm.provider", home=home).returncode == 0
    proc = _coffer("organize", "--global", home=home)  # no model at all: still the no-op
    assert proc.returncode == 0 and "nothing to do" in proc.stdout, proc


def test_rest_organize_with_a_provider_but_no_model_is_refused_naming_the_setting(tmp_path: Path) -> None:
    """``POST .../organize`` queued an operation that "succeeded" with status ``no_model``."""
    home = tmp_path / "home"
    assert _coffer("config", "set", "llm.provider", "openai", home=home).returncode == 0
    env = {k: v for k, v in os.environ.items() if k != "COFFER_API_TOKEN"}
    args = [str(SCRIPTS / "coffer-api"), "--home", str(home), "--log-level", "warning"]
    with Served(args, env) as api:
        for kind in ("organize", "reorg"):
            r = httpx.post(f"{api.base}/api/v1/memory_stores/global/{kind}", json={}, timeout=60)
            assert r.status_code == 422, r.text
            error = r.json()["error"]
            assert error["code"] == "INVALID_INPUT" and error["details"]["field"] == "llm.model", error
            assert "coffer config set llm.model NAME" in error["message"]
        assert httpx.get(f"{api.base}/api/v1/operations", timeout=60).json()["items"] == []


# -- 3: zero-width characters in the web view ---------------------------------------------------

ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"


def test_the_web_view_shows_zero_width_characters_written_out(tmp_path: Path) -> None:
    """A title ``pay\\u200bpal`` looked like ``paypal`` on every page (bidi controls were written
    out, zero-width ones were not): each shows as ``\\u200b`` now, and the file keeps them."""
    home = tmp_path / "home"
    text = "send to pay\u200bpal and a\u200cb\u200dc\u2060d\ufeffe"
    made = _coffer("remember", "--global", "--title", "pay\u200bpal", "--json", text, home=home)
    assert made.returncode == 0, made.stderr
    written = json.loads(made.stdout)
    fact = written["fact"]
    env = {k: v for k, v in os.environ.items() if k != "COFFER_API_TOKEN"}
    args = [str(SCRIPTS / "coffer-api"), "--home", str(home), "--log-level", "warning"]
    with Served(args, env) as api:
        for url in (
            "/ui/stores/global",
            f"/ui/stores/global/facts/{fact['id']}",
            "/ui/search?q=send&store=global",
        ):
            r = httpx.get(api.base + url, timeout=60)
            assert r.status_code == 200, (url, r.text)
            assert not any(c in r.text for c in ZERO_WIDTH), url
            assert "pay\\u200bpal" in r.text, url
        shown = httpx.get(f"{api.base}/ui/stores/global/facts/{fact['id']}", timeout=60).text
        assert "a\\u200cb\\u200dc\\u2060d\\ufeffe" in shown
    assert text in Path(written["path"]).read_text(encoding="utf-8")


# -- 4: Ctrl-C while a console script starts ---------------------------------------------------

# Runs a console script (the file pip wrote) with a tripwire in front of the import system: at the
# N-th import the main thread asks for, the process sends itself SIGINT, as a Ctrl-C in those
# milliseconds would; with N = 0 it counts them and writes the count to $TRIPWIRE_COUNT.
TRIPWIRE = """
import _signal, _thread, atexit, os, sys
wanted, seen, main = int(os.environ["TRIPWIRE_AT"]), [], _thread.get_ident()
class Tripwire:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if _thread.get_ident() == main:
            seen.append(name)
            if len(seen) == wanted:
                os.kill(os.getpid(), _signal.SIGINT)
        return None
sys.meta_path.insert(0, Tripwire)
if not wanted:
    atexit.register(lambda: open(os.environ["TRIPWIRE_COUNT"], "w").write("\\n".join(seen)))
script = sys.argv[1]
sys.argv = sys.argv[1:]
exec(compile(open(script).read(), script, "exec"), {"__name__": "__main__", "__file__": script})
"""


def _tripped(
    script: str, args: list[str], at: int, env: dict[str, str], stdin: bytes, tmp: Path
) -> tuple[int, bytes, bytes]:
    proc = subprocess.run(
        [sys.executable, "-c", TRIPWIRE, str(SCRIPTS / script), *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        env={**env, "TRIPWIRE_AT": str(at), "TRIPWIRE_COUNT": str(tmp / "count")},
    )
    return proc.returncode, proc.stdout, proc.stderr


def _import_points(script: str, args: list[str], env: dict[str, str], stdin: bytes, tmp: Path) -> list[str]:
    _, _, err = _tripped(script, args, 0, env, stdin, tmp)
    assert b"Traceback" not in err, err
    return (tmp / "count").read_text().splitlines()


def test_ctrl_c_at_any_import_while_a_console_script_starts_prints_no_traceback(tmp_path: Path) -> None:
    """A Ctrl-C while ``coffer``'s modules loaded (before ``main``'s ``try``) printed a
    ``KeyboardInterrupt`` traceback; so did ``coffer-hook`` (whose agent must see status 0 and no
    output) and ``coffer-mcp``. Each import of the start-up is tried in turn (every one for the
    first 40, then every fifth): the first, the script's own entry module, is Python's import
    statement in the file pip wrote, before any of coffer's code runs."""
    home = tmp_path / "home"
    assert _coffer("remember", "--global", "Deploy on Tuesdays.", home=home).returncode == 0
    env = {**os.environ, "COFFER_HOME": str(home), "COFFER_HOOK_DEADLINE": "120"}
    hook_input = json.dumps(
        {"hook_event_name": "SessionStart", "cwd": str(tmp_path), "session_id": "s"}
    ).encode()
    cases = [
        ("coffer", ["recall", "deploy", "--global"], b"", (130,), b"\ninterrupted\n"),
        ("coffer-hook", ["--agent", "claude-code"], hook_input, (0,), b""),
        ("coffer-mcp", [], b"", (130, 0), b""),  # 0 once the SDK serves (docs/mcp.md)
        ("coffer-api", ["--help"], b"", (0,), b""),  # quietly, status 0 (docs/rest.md)
    ]
    for script, args, stdin, statuses, said in cases:
        points = _import_points(script, args, env, stdin, tmp_path)
        assert len(points) > 20, (script, points)
        tried = [*range(2, min(len(points), 41) + 1), *range(45, len(points) + 1, 5)]
        for at in tried:
            status, out, err = _tripped(script, args, at, env, stdin, tmp_path)
            where = (script, at, points[at - 1])
            assert b"Traceback" not in err and b"KeyboardInterrupt" not in err, (where, err.decode()[-2000:])
            assert status in statuses, (where, status, err)
            assert err == said, (where, err)
            if script == "coffer-hook":
                assert out == b"", where


# -- 2: a plugin that fails to load --------------------------------------------------------------


def test_a_plugin_that_fails_to_load_is_said_where_it_matters_not_on_every_call(tmp_path: Path) -> None:
    """With vector recall on, every command loads the plugins (the embedder is one), and each
    printed ``skipping plugin broken (...)``: ``facts list`` and ``stores list`` too, which the
    plugin could never have served. It is said where it may matter: in the error of a name no
    plugin registered (it may have been the broken one's), and by ``coffer doctor`` and ``coffer
    plugins list``, every time."""
    site = tmp_path / "site"
    info = site / "coffer_broken-2.3.dist-info"
    info.mkdir(parents=True)
    (site / "coffer_broken.py").write_text('raise RuntimeError("this plugin is broken")\n')
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: coffer-broken\nVersion: 2.3\n")
    (info / "entry_points.txt").write_text("[coffer_memory]\nbroken = coffer_broken\n")
    home = tmp_path / "home"
    env = {"PYTHONPATH": str(site)}
    said = "RuntimeError: this plugin is broken"
    assert (
        _coffer(
            "config", "set", "memory.retrieval_modes", "grep,keyword,hybrid", home=home, env=env
        ).returncode
        == 0
    )
    for args in (
        ["remember", "--global", "Deploy on Tuesdays."],
        ["recall", "deploy", "--store", "global"],
        ["recall", "deploy", "--store", "global", "--mode", "grep"],
        ["facts", "list", "--store", "global"],
        ["stores", "list"],
    ):
        proc = _coffer(*args, home=home, env=env)
        assert proc.returncode == 0 and proc.stderr == "", (args, proc.stderr)
    for _ in range(2):
        proc = _coffer("doctor", home=home, env=env)
        assert f"plugin: broken (coffer-broken) failed to load: {said}" in proc.stdout, proc.stdout
        listed = _coffer("plugins", "list", home=home, env=env).stdout
        assert f"failed to load, skipped: {said}" in listed
    proc = _coffer("config", "set", "llm.provider", "brokens-llm", home=home, env=env)
    assert proc.returncode == 1 and f"(plugin broken failed to load: {said})" in proc.stderr, proc.stderr
    with (home / "config.toml").open("a") as config:  # written by hand, as before the plugin broke
        config.write('\n[llm]\nprovider = "brokens-llm"\n')
    proc = _coffer("organize", "--global", home=home, env=env)
    assert proc.returncode == 1, proc
    assert "error: INVALID_INPUT: unknown llm provider 'brokens-llm'" in proc.stderr, proc.stderr
    assert f"plugin broken failed to load: {said}" in proc.stderr, proc.stderr


# -- 6: which session --max-sessions ends ----------------------------------------------------------


def test_past_max_sessions_the_session_ended_is_the_least_recently_used_of_those_in_use(
    tmp_path: Path,
) -> None:
    """Past ``--max-sessions`` the session ended was the one that had served the fewest requests:
    an agent's session used a minute ago was ended before one used 100 times and left an hour
    ago. Now a session opened and never used past its handshake goes first (a flood's), then the
    one idle longest, as one expects of a bounded table."""
    from test_attack_mcp_sessions import ARGS, _agent, _open, _tools

    env = {**os.environ, "COFFER_HOME": str(tmp_path / "home"), "COFFER_MCP_MAX_SESSIONS": "2"}
    with Served(ARGS, env) as server:
        busy = _agent(server.port)
        for _ in range(5):
            assert _tools(server.port, busy) == 200  # many requests, then left
        recent = _agent(server.port)  # fewer requests, used since
        status, opened, _ = _open(server.port)  # a third: one of the two gives its place
        assert status == 200
        assert _tools(server.port, busy) == 404  # the one idle longest
        assert _tools(server.port, recent) == 200
        status, _, _ = _open(server.port)  # a fourth: the third, opened and never used, goes first
        assert status == 200
        assert _tools(server.port, opened) == 404
        assert _tools(server.port, recent) == 200
