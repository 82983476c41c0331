"""Odd files meet the rebuild's fast paths: a header shaped like the one coffer renders but
written by hand reads exactly as YAML reads it (or is reported broken exactly as YAML reports
it), and a bulk rebuild of odd files indexes and reports what the file-by-file routine does."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import apsw
import pytest

from coffer_memory import MemoryService
from coffer_memory._index.apply import BATCH
from coffer_memory._models import MemoryFact
from coffer_memory._store import fastmeta
from coffer_memory._store.files import FactParseError, ParsedFile, parse_fact, render_fact, split_frontmatter

RENDERED = (
    "---\nkind: knowledge\ntitle: {title}\ndescription: {description}\nmetadata:\n  actor: agent\n"
    "origin_session_id: {origin}\ncreated_at: {created}\nupdated_at: 2026-01-01T00:00:00.000+00:00\n"
    "{tags}---\n{body}"
)


def _text(**values: str) -> str:
    fields = {
        "title": "T",
        "description": "D",
        "origin": "null",
        "created": "2026-01-01T00:00:00.000+00:00",
        "tags": "",
        "body": "\nbody\n",
    }
    return RENDERED.format(**{**fields, **values})


def _parse(text: str) -> ParsedFile | str:
    try:
        return parse_fact(text.encode("utf-8"), store="global", relpath="knowledge/x.md", mtime=0.0)
    except FactParseError as exc:
        return f"FactParseError: {exc}"


def _both_ways(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    fast = _parse(text)
    with monkeypatch.context() as m:
        m.setattr(fastmeta, "split_rendered", lambda text: None)
        return fast, _parse(text)


@pytest.mark.parametrize(
    "text",
    [
        # YAML's other line breaks: inside a plain value they break the header, in a quoted one
        # they fold to a space
        _text(title="foo\x85bar"),
        _text(title="foo\u2028bar"),
        _text(description="a\u2029"),
        _text(title="'a\x85b'"),
        _text(origin="'x\u2028'"),
        _text(tags="tags: [a\x85b]\n"),
        # a header holding "*" or "&" is read by PyYAML's own loader (aliases refused), which
        # ends a plain scalar of a flow list at "?" (libyaml does not)
        _text(title="a*b", tags="tags: [why?]\n"),
        _text(description="&", tags="tags: [a, b?c]\n"),
        # the shape of a time that names no day
        _text(created="2026-02-30T00:00:00.000+00:00"),
        _text(created="2026-13-01T00:00:00.000+00:00"),
        _text(created="0000-01-01T00:00:00.000+00:00"),
        _text(created="2026-01-01T24:00:00.000+00:00"),
        # CRLF lines in the body under LF header lines
        _text(body="\r\nfirst\r\nsecond\r\n"),
        _text(body="\nmixed\r\nends\n"),
    ],
)
def test_a_header_shaped_like_ours_reads_as_yaml_reads_it(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, reference = _both_ways(text, monkeypatch)
    assert fast == reference


ALPHABET = [
    *"ab yYnNtTfFoO~01.-+:#'\",[]{}?&*!|>%@`=<\\\t\r",
    *"\x85\u2028\u2029\ufeff\xa0\u3000é部🚀\ufffd\x7f",
]
ALPHABET += ["''", "---"]
WORDS = [
    "null",
    "yes",
    "no",
    "true",
    "off",
    "~",
    "1",
    "1.5",
    "2026-01-01",
    "0x1f",
    "1:2",
    "a",
    "it's",
    ".inf",
]


def _value(r: random.Random) -> str:
    text = r.choice(WORDS) if r.random() < 0.3 else ""
    for _ in range(r.randint(0, 4)):
        i = r.randint(0, len(text))
        text = text[:i] + r.choice(ALPHABET) + text[i:]
    return "'" + text.replace("'", "''") + "'" if r.random() < 0.2 else text


def test_hand_written_headers_of_the_rendered_shape_read_as_yaml_reads_them() -> None:
    """Random values in every field of the rendered shape: whenever the fast reader answers,
    YAML (through python-frontmatter) gives the same metadata and body."""
    r = random.Random(1)
    answered = 0
    for _ in range(20000):
        tags = (
            ""
            if r.random() < 0.4
            else "tags: [" + ", ".join(_value(r) for _ in range(r.randint(1, 3))) + "]\n"
        )
        text = _text(
            title=_value(r),
            description=_value(r),
            origin=_value(r),
            created=r.choice(["2026-01-01T00:00:00.000+00:00", "2026-02-29T10:00:00.000+00:00"]),
            tags=tags,
            body=r.choice(["\nbody\n", "", "\n---\nx\n", "a\r\nb", "\n\n  x  \n", _value(r)]),
        )
        quick = fastmeta.split_rendered(text)
        if quick is None:
            continue
        answered += 1
        try:
            meta, body = split_frontmatter(text)
        except FactParseError as exc:
            raise AssertionError(f"YAML finds {text!r} broken ({exc}), the fast reader read it") from exc
        assert quick == (meta, body.strip()), text
    assert answered > 500


# -- files and folders this process may not read -------------------------------------------------
SCRIPTS = Path(sys.executable).parent
# Root reads any file: the CLI then runs without the capabilities that override file modes.
NO_OVERRIDE = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"] if os.geteuid() == 0 else []


def _coffer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COFFER_HOME": str(home)}
    command = [*NO_OVERRIDE, str(SCRIPTS / "coffer"), *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(bool(NO_OVERRIDE) and shutil.which("setpriv") is None, reason="root without setpriv")
def test_an_unreadable_file_or_folder_is_reported_broken_and_the_store_stays_readable(tmp_home: Path) -> None:
    with MemoryService(home=tmp_home) as svc:
        svc.remember("visible fact about deploys", store="global")
        secret = svc.remember("secret deploy notes", store="global").path
        knowledge = svc.targets.paths("global").knowledge
    locked = knowledge / "locked"
    locked.mkdir()
    (locked / "inside.md").write_text("locked deploy notes\n")
    assert _coffer(tmp_home, "reindex").returncode == 0
    secret.chmod(0)
    locked.chmod(0)
    try:
        for args in (
            ["recall", "deploy", "--store", "global"],
            ["reindex"],
            ["facts", "list", "--store", "global"],
        ):
            run = _coffer(tmp_home, *args)
            assert run.returncode == 0 and "unexpected" not in run.stderr, (args, run.stderr)
        found = _coffer(tmp_home, "recall", "deploy", "--store", "global").stdout
        assert "visible fact" in found and "secret" not in found and "locked" not in found
        rebuilt = _coffer(tmp_home, "reindex", "--rebuild").stdout.splitlines()[-1].split()
        assert rebuilt[0] == "global" and rebuilt[-1] == "1"  # the unreadable file counts as broken
        doctor = _coffer(tmp_home, "doctor").stdout
        assert f"broken: {secret}: cannot be read" in doctor
        assert f"broken: {locked}: folder cannot be read" in doctor
        assert ": not indexed:" not in doctor  # its advice, `coffer reindex`, would not help
    finally:
        secret.chmod(0o600)
        locked.chmod(0o700)
    found = _coffer(tmp_home, "recall", "deploy", "--store", "global").stdout
    assert "secret deploy notes" in found and "locked deploy notes" in found


# -- a rebuild killed mid-way ---------------------------------------------------------------------
def test_a_rebuild_killed_mid_way_leaves_an_index_the_next_read_completes(tmp_home: Path) -> None:
    """``kill -9`` of ``coffer reindex --rebuild`` once its first batch is committed: the next read
    indexes the rest, and the index holds the rows a clean rebuild writes."""
    from test_speed_paths_same_results import _rows

    with MemoryService(home=tmp_home) as svc:
        inbox = svc.targets.paths("global").inbox
        inbox.mkdir(parents=True)
        when = datetime(2026, 1, 1, tzinfo=UTC)
        for i in range(BATCH + 600):
            fact = MemoryFact(
                id="",
                title=f"fact {i}",
                description="",
                body=f"note {i} about deploys",
                actor="agent",
                origin_session_id=None,
                created_at=when,
                updated_at=when,
                tags=("ops",) if i % 2 else (),
            )
            (inbox / f"f{i}.md").write_bytes(render_fact(fact))
        svc.reindex()
    rebuild = subprocess.Popen(
        [str(SCRIPTS / "coffer"), "reindex", "--rebuild"],
        env={**os.environ, "COFFER_HOME": str(tmp_home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    index = apsw.Connection(str(tmp_home / "index.db"), flags=apsw.SQLITE_OPEN_READONLY)
    index.set_busy_timeout(1000)
    try:
        while rebuild.poll() is None:  # its rows dropped, then a first batch committed
            count = index.execute("SELECT count(*) FROM documents").fetchall()[0][0]
            if 0 < count < BATCH + 600:
                rebuild.kill()
                break
            time.sleep(0.005)
    finally:
        rebuild.kill()
        rebuild.wait()
        index.close()
    with MemoryService(home=tmp_home) as svc:
        assert len(svc.recall("deploys", stores=["global"], mode="keyword", limit=5).hits) == 5
        after_kill = _rows(svc.index.db.conn)
        svc.reindex(rebuild=True)
        assert _rows(svc.index.db.conn) == after_kill
        assert len(after_kill["documents"]) == BATCH + 600


# -- a binary file named .md ----------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["ripgrep", "python"])
def test_a_binary_md_file_is_found_by_no_mode_and_reported_broken(tmp_home: Path, backend: str) -> None:
    # A file holding a NUL byte (an image or a database saved as .md): the word index took its
    # words, so keyword recall returned it, while ripgrep takes it for binary and skips it. Both
    # modes now skip it, and doctor names it. Bytes that are not UTF-8 alone (a Latin-1 file)
    # still make a fact both modes find, read with U+FFFD for them.
    from coffer_memory import Settings

    with MemoryService(settings=Settings.load(tmp_home, grep_backend=backend)) as svc:
        inbox = svc.remember("deploys go out on Tuesdays", store="global").path.parent
        binary = inbox / "blob.md"
        binary.write_bytes(b"---\ntitle: blob\n---\ndeploys \x00\x01\xff\xfe deploys\n")
        (inbox / "latin.md").write_bytes(b"deploys to the caf\xe9 server\n")
        found = {
            mode: sorted(h.path.name for h in svc.recall("deploys", stores=["global"], mode=mode).hits)
            for mode in ("keyword", "grep")
        }
        assert found["keyword"] == found["grep"] == ["deploys-go-out-on-tuesdays.md", "latin.md"], found
        [latin] = [f for f in svc.list_facts(store="global").items if f.path.name == "latin.md"]
        assert latin.fact.body == "deploys to the caf\ufffd server"
        report = svc.doctor()
    assert [(b.path, b.error) for b in report.broken] == [
        (binary, "binary, not text: a NUL byte at offset 28")
    ]
    assert not report.ok
