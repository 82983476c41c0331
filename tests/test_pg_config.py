"""A team member's PostgreSQL configuration gone wrong: a URL with a typo, a server that does not
answer. Each face (CLI, REST, MCP, as subprocesses) says it in one typed line, without a
traceback and without the URL's password, in its answer and in its logs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from served import Served, closed_port

from coffer_memory import MemoryService

psycopg = pytest.importorskip(
    "psycopg", reason="PostgreSQL tests need psycopg: pip install 'coffer-memory[postgresql]'"
)
SCRIPTS = Path(sys.executable).parent
PASSWORD = "Hunter2-s3cret"
# A client's handshake, then one keyword recall (id 2), as coffer-mcp reads them on stdin.
RECALL_OVER_MCP = (
    {
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    },
    {"method": "notifications/initialized"},
    {
        "id": 2,
        "method": "tools/call",
        "params": {"name": "coffer__recall", "arguments": {"query": "release"}},
    },
)


@pytest.fixture
def home_with_a_fact(tmp_path: Path) -> Path:
    """A home whose global store has a fact (a server's start-up sweep reads it)."""
    home = tmp_path / "home"
    with MemoryService(home) as svc:
        svc.remember("the release train leaves on Thursdays", store="global")
    return home


def environment(home: Path, url: str) -> dict[str, str]:
    return {
        **os.environ,
        "COFFER_HOME": str(home),
        "COFFER_INDEX_BACKEND": "postgresql",
        "COFFER_PG_URL": url,
    }


def typo_url(pg_admin_url: str) -> str:
    """The test server's URL with the scheme mistyped and a password (libpq repeats such a URL)."""
    parts = urlsplit(pg_admin_url)
    return f"postgresq://{parts.username}:{PASSWORD}@{parts.hostname}:{parts.port}/coffer"


def logs_of(home: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in (home / "logs").glob("*") if p.is_file())


def test_the_cli_says_a_mistyped_url_is_invalid_without_its_password(
    pg_admin_url: str, home_with_a_fact: Path
) -> None:
    """It said 'unexpected ProgrammingError: missing "=" after "postgresq://coffer:<the password>@..."',
    and wrote the password with a traceback into logs/errors.log."""
    env = environment(home_with_a_fact, typo_url(pg_admin_url))
    for args in (["recall", "release train"], ["remember", "a second fact", "--store", "global"], ["doctor"]):
        run = subprocess.run(
            [str(SCRIPTS / "coffer"), *args], env=env, capture_output=True, text=True, timeout=300
        )
        said = run.stdout + run.stderr
        assert run.returncode != 0, args
        assert "INVALID_INPUT" in said and "postgresql://user:password@host:port/database" in said, said
        assert "postgresq://coffer:***@" in said and PASSWORD not in said, said
        assert "Traceback" not in said
    assert PASSWORD not in logs_of(home_with_a_fact)


def _rest(
    home: Path, url: str, before: Callable[[str], None] | None = None
) -> tuple[list[httpx.Response], str]:
    """Two requests (a recall, a remember) to a ``coffer-api`` on ``home``; ``before`` is given the
    store's URL once the server listens."""
    with Served([str(SCRIPTS / "coffer-api"), "--log-level", "warning"], environment(home, url)) as served:
        base = f"{served.base}/api/v1/memory_stores/global"
        if before is not None:
            before(base)
        answers = [
            httpx.get(f"{base}/recall", params={"query": "release"}, timeout=60),
            httpx.post(f"{base}/facts", json={"text": "a second fact"}, timeout=60),
        ]
    return answers, served.stderr()


@pytest.mark.timeout(300)
def test_rest_answers_a_mistyped_url_as_invalid_input_and_logs_no_traceback(
    pg_admin_url: str, home_with_a_fact: Path
) -> None:
    """REST answered 500 INTERNAL ("ProgrammingError"), and its log held a traceback with the password."""
    answers, err = _rest(home_with_a_fact, typo_url(pg_admin_url))
    for answer in answers:
        assert answer.status_code == 422, answer.text  # INVALID_INPUT, as every face maps it
        error = answer.json()["error"]
        assert error["code"] == "INVALID_INPUT" and error["details"] == {"field": "index.url"}
        assert PASSWORD not in answer.text
    assert "Traceback" not in err and PASSWORD not in err, err
    assert "start-up sweep of global skipped: INVALID_INPUT" in err


@pytest.mark.timeout(300)
def test_rest_started_while_the_server_is_down_logs_one_line_not_a_traceback(
    pg_admin_url: str, home_with_a_fact: Path
) -> None:
    """The start-up sweep met INDEX_UNAVAILABLE and logged it with a traceback."""
    down = f"postgresql://coffer:{PASSWORD}@127.0.0.1:{closed_port()}/coffer"
    answers, err = _rest(home_with_a_fact, down)
    assert [a.status_code for a in answers] == [503, 503]
    assert "start-up sweep of global skipped: INDEX_UNAVAILABLE" in err, err
    assert "Traceback" not in err and PASSWORD not in err


@pytest.mark.timeout(300)
def test_a_server_that_stops_under_rest_is_logged_in_single_lines_said_once(home_with_a_fact: Path) -> None:
    """Each reconnection attempt of the pool logged libpq's refusal over two lines (the second a
    tab-indented hint), again and again through each request's 10 s wait."""
    from pg_server import PgServer, PgUnavailable
    from test_pg_faults import _pg_ctl

    try:
        server = PgServer()
    except PgUnavailable as exc:
        pytest.skip(f"NO POSTGRESQL: {exc}")

    def stop_the_server(base: str) -> None:
        assert httpx.get(f"{base}/recall", params={"query": "release"}, timeout=60).status_code == 200
        _pg_ctl(server, "-m", "fast", "stop")

    try:
        answers, err = _rest(home_with_a_fact, server.url(), before=stop_the_server)
    finally:
        server.stop()
    assert [a.status_code for a in answers] == [503, 503]
    lines = err.splitlines()
    assert not [line for line in lines if line[:1].isspace()], err
    pool = [line for line in lines if "error connecting in" in line]
    assert pool and len(pool) == len(set(pool)), err


@pytest.mark.timeout(300)
def test_an_mcp_tool_answers_a_mistyped_url_without_its_password(
    pg_admin_url: str, home_with_a_fact: Path
) -> None:
    proc = subprocess.Popen(
        [str(SCRIPTS / "coffer-mcp")],
        env=environment(home_with_a_fact, typo_url(pg_admin_url)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    messages = RECALL_OVER_MCP
    try:
        for message in messages:
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
            proc.stdin.flush()
            if "id" not in message:
                continue
            for line in proc.stdout:
                got = json.loads(line)
                if got.get("id") == message["id"]:
                    break
    finally:
        _, err = proc.communicate(timeout=60)
    result = got["result"]
    said = "\n".join(block["text"] for block in result["content"] if block.get("type") == "text")
    assert result["isError"] is True and said.startswith("INVALID_INPUT: "), said
    assert PASSWORD not in said and "postgresq://coffer:***@" in said
    stderr = err.decode(errors="replace")
    assert "Traceback" not in stderr and PASSWORD not in stderr


# -- a server that asks for passwords, as a team's does ---------------------------------------------
ADMIN_PASSWORD = "admin-Pw9"


@pytest.fixture(scope="module")
def guarded() -> Iterator[str]:
    """The admin URL of a server of its own that asks every role for its password (scram-sha-256)."""
    from pg_server import PgServer, PgUnavailable

    try:
        server = PgServer(password=ADMIN_PASSWORD)
    except PgUnavailable as exc:
        pytest.skip(f"NO POSTGRESQL: the PostgreSQL tests did not run: {exc}")
    try:
        with psycopg.connect(server.url(), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE member LOGIN PASSWORD '{PASSWORD}'")
            conn.execute("CREATE DATABASE team")  # owned by the superuser: member may not create in it
            conn.execute("GRANT CONNECT ON DATABASE team TO member")
        yield server.url()
    finally:
        server.stop()


def _url(guarded: str, login: str, database: str = "team", port: int | None = None) -> str:
    parts = urlsplit(guarded)
    return f"postgresql://{login}@{parts.hostname}:{port or parts.port}/{database}"


# The URL of each mistake and the words of what the one line tells the member to do.
MISTAKES = {
    "wrong password": (lambda g: _url(g, "member:not-the-password"), "check the user name and password"),
    "no password": (lambda g: _url(g, "member"), "put the password in the URL"),
    "wrong database": (lambda g: _url(g, f"member:{PASSWORD}", "taem"), "correct the name in the URL"),
    # The server does not tell a stranger which roles exist: it is told as a wrong password.
    "unknown role": (lambda g: _url(g, f"memebr:{PASSWORD}"), "check the user name and password"),
    "server not there": (
        lambda g: _url(g, f"member:{PASSWORD}", port=closed_port()),
        "check the host and port",
    ),
    "no CREATE right": (lambda g: _url(g, f"member:{PASSWORD}"), "start coffer once as the database's owner"),
}


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_each_bad_configuration_is_one_line_saying_what_to_do(
    mistake: str, guarded: str, home_with_a_fact: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each said only the server's refusal (or, for a role without CREATE, two warnings about
    extensions first); none said what to change."""
    monkeypatch.delenv("PGPASSWORD", raising=False)
    make, advice = MISTAKES[mistake]
    env = {**environment(home_with_a_fact, make(guarded)), "PGPASSFILE": str(home_with_a_fact / "no-pgpass")}
    run = subprocess.run(
        [str(SCRIPTS / "coffer"), "recall", "release train"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = (run.stdout + run.stderr).strip().splitlines()
    assert run.returncode != 0
    assert len(lines) == 1 and lines[0].startswith("error: INDEX_UNAVAILABLE: "), lines
    assert advice in lines[0] and PASSWORD not in lines[0], lines


# -- a URL's password in messages: its field replaced, nothing else -----------------------------------
# Passwords the substring replacement got wrong: one character (every 'a' of the message became
# '***'), the user name (the name was hidden), percent-encoded, and '@' and ':' unencoded (libpq
# reads the part after '@' as the host, and named it in its message).
ODD_PASSWORDS = {
    "one character": "a",
    "the user name": "member",
    "percent-encoded": "p%40ss%3Aw%2F",
    "@ and :": "p@ss:w",
}
NOT_READ = "write it as postgresql://user:password@host:port/database (docs/team.md, 'Set-up')"


@pytest.mark.parametrize("kind", list(ODD_PASSWORDS))
def test_a_url_password_of_any_length_or_form_is_redacted_by_its_field(kind: str, guarded: str) -> None:
    from coffer_memory import IndexUnavailable, InvalidInput
    from coffer_memory._index.pg.backend import PostgresIndex

    password = ODD_PASSWORDS[kind]
    port = urlsplit(guarded).port
    typo = f"postgresq://member:{password}@127.0.0.1:{port}/team"
    with pytest.raises(InvalidInput) as caught:
        PostgresIndex(typo)
    assert str(caught.value) == (
        'the PostgreSQL URL is not a connection string libpq reads (missing "=" after '
        f'"postgresq://member:***@127.0.0.1:{port}/team" in connection info string): {NOT_READ}'
    )
    closed = closed_port()
    wrong = f"postgresql://member:{password}@127.0.0.1:{port}/team"
    if kind == "@ and :":  # libpq would read the host 'ss' and port 'w@127.0.0.1:...': refused as written
        for url in (wrong, f"postgresql://member:{password}@127.0.0.1:{closed}/team"):
            with pytest.raises(InvalidInput) as caught:
                PostgresIndex(url)
            shown = url.replace(password, "***")
            assert str(caught.value) == (
                f"libpq reads the PostgreSQL URL {shown} another way than it is written: percent-encode "
                f"'@', ':' and '/' in the user name and password (%40, %3A, %2F); {NOT_READ}"
            )
        return
    with pytest.raises(IndexUnavailable) as caught:
        PostgresIndex(f"postgresql://member:{password}@127.0.0.1:{closed}/team")
    assert str(caught.value) == (
        f'the postgresql index is unavailable: connection failed: connection to server at "127.0.0.1", '
        f"port {closed} failed: Connection refused: is PostgreSQL running there? check the host and port in the URL"
    )
    with pytest.raises(IndexUnavailable) as caught:  # the server refuses the password: the name stays
        PostgresIndex(wrong)
    assert str(caught.value) == (
        f'the postgresql index is unavailable: connection failed: connection to server at "127.0.0.1", '
        f'port {port} failed: FATAL:  password authentication failed for user "member": check the user '
        "name and password in the URL (COFFER_PG_URL, the keyring's index.credential_ref, or PGPASSWORD / ~/.pgpass)"
    )


def test_a_password_percent_encoded_as_a_url_holds_it_still_connects(guarded: str, tmp_path: Path) -> None:
    """The check that libpq reads the URL as written refuses no password written right."""
    from coffer_memory._index.pg.backend import PostgresIndex

    with psycopg.connect(guarded, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS oddpw")
        conn.execute("DROP ROLE IF EXISTS oddpw")
        conn.execute("CREATE ROLE oddpw LOGIN PASSWORD 'p@ss:w/ %'")
        conn.execute("CREATE DATABASE oddpw OWNER oddpw")
    port = urlsplit(guarded).port
    index = PostgresIndex(
        f"postgresql://oddpw:p%40ss%3Aw%2F%20%25@127.0.0.1:{port}/oddpw", memory_dir=tmp_path
    )
    index.close()


# -- a server older than the index needs --------------------------------------------------------------
def test_a_server_older_than_the_index_needs_is_refused_in_one_line_before_any_table(
    pg_url: str, tmp_path: Path
) -> None:
    """An old server started, and failed a statement later (``hashtextextended`` on the first
    write, ``AS MATERIALIZED`` on the first vector recall) with a syntax error. The real server's
    ``server_version_num`` against a threshold one above it, then equal to it."""
    from coffer_memory import IndexUnavailable
    from coffer_memory._index.pg.backend import PostgresIndex
    from coffer_memory._index.pg.schema import MIN_SERVER_VERSION

    with psycopg.connect(pg_url) as conn:
        found = int(conn.execute("SELECT current_setting('server_version_num')").fetchone()[0])  # type: ignore[index]
    assert found >= MIN_SERVER_VERSION >= 120000  # the test server is one the index runs on
    parts = urlsplit(pg_url)
    with pytest.raises(IndexUnavailable) as caught:
        PostgresIndex(pg_url, memory_dir=tmp_path, min_server_version=found + 1)
    major, minor = divmod(found, 10000)
    assert str(caught.value) == (
        f"the postgresql index is unavailable: PostgreSQL {major}.{minor} at {parts.hostname}:{parts.port} "
        f"is too old for coffer's index, which needs PostgreSQL {major}.{minor + 1} or later: upgrade the "
        "server (docs/team.md, 'Set-up')"
    )
    with psycopg.connect(pg_url) as conn:  # refused before anything was created or bound
        assert conn.execute("SELECT to_regclass('coffer_meta')").fetchone() == (None,)
    assert not (tmp_path / "folder.json").exists()
    PostgresIndex(pg_url, memory_dir=tmp_path, min_server_version=found).close()
    PostgresIndex(pg_url, memory_dir=tmp_path, min_server_version=(found // 10000) * 10000).close()


def test_server_versions_are_named_as_postgresql_names_its_releases() -> None:
    from coffer_memory._index.pg.schema import release

    assert [release(n) for n in (90624, 110022, 120000, 160002, 180003)] == [
        "9.6.24",
        "11.22",
        "12",
        "16.2",
        "18.3",
    ]


@pytest.mark.parametrize(
    ("conninfo", "shown"),
    [
        ("postgresql://u:a@h/db", "postgresql://u:***@h/db"),
        ("postgresql://member:member@h:5432/member", "postgresql://member:***@h:5432/member"),
        ("postgresql://u:p%40ss%3Aw@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:p@ss:w@h:5/db", "postgresql://u:***@h:5/db"),
        ("postgres://u:@h/db", "postgres://u:***@h/db"),
        (
            "postgresql://u@h/db?password=a&sslmode=require",
            "postgresql://u@h/db?password=***&sslmode=require",
        ),
        ("postgresql://a@a/a", "postgresql://a@a/a"),
        ("host=h user=u password=a dbname=db", "host=h user=u password=*** dbname=db"),
        ("host=h password='a b\\' c' user=u", "host=h password=*** user=u"),
    ],
)
def test_a_connection_string_is_shown_with_its_password_field_replaced_and_nothing_else(
    conninfo: str, shown: str
) -> None:
    from coffer_memory._index.pg.redact import redact, scrub

    assert redact(conninfo) == shown
    said = f'connection to server at "h" failed for {conninfo}: a'
    assert scrub(said, conninfo) == f'connection to server at "h" failed for {shown}: a'


# -- a URL with bytes that are not UTF-8 -------------------------------------------------------------
NOT_UTF8 = "postgresql://coffer@127.0.0.1:1/team\udcff"  # os.fsencode gives the raw byte 0xff back


@pytest.mark.timeout(600)
@pytest.mark.parametrize("variable", ["COFFER_PG_URL", "COFFER_INDEX_URL"])
def test_a_url_with_bytes_that_are_not_utf8_is_invalid_input_on_every_face(
    home_with_a_fact: Path, variable: str
) -> None:
    """psycopg raised a raw UnicodeEncodeError on the URL: 'unexpected UnicodeEncodeError' from the
    CLI, INTERNAL from MCP (with a traceback on its stderr) and REST."""
    env = {**environment(home_with_a_fact, NOT_UTF8), variable: NOT_UTF8}
    where = "COFFER_PG_URL" if variable == "COFFER_PG_URL" else "index.url"
    if variable != "COFFER_PG_URL":
        del env["COFFER_PG_URL"]
    said = f"INVALID_INPUT: the database URL in {where} is not UTF-8 text"
    run = subprocess.run(
        [str(SCRIPTS / "coffer"), "recall", "release"], env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 1 and run.stderr.startswith(f"error: {said}"), run.stderr
    mcp = subprocess.run(
        [str(SCRIPTS / "coffer-mcp")],
        env=env,
        input="".join(json.dumps({"jsonrpc": "2.0", **m}) + "\n" for m in RECALL_OVER_MCP),
        capture_output=True,
        text=True,
        errors="replace",
        timeout=300,
    )
    [answer] = [json.loads(line) for line in mcp.stdout.splitlines() if json.loads(line).get("id") == 2]
    assert answer["result"]["content"][0]["text"].startswith(said), answer
    assert "Traceback" not in mcp.stderr, mcp.stderr
    with Served([str(SCRIPTS / "coffer-api"), "--log-level", "warning"], env) as served:
        rest = httpx.get(
            f"{served.base}/api/v1/memory_stores/global/recall", params={"query": "x"}, timeout=60
        )
    assert rest.status_code == 422 and rest.json()["error"]["message"].startswith(
        said[len("INVALID_INPUT: ") :]
    )
    assert "Traceback" not in served.stderr()
