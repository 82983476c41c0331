"""Review of session 26: what a demanding new user (and a full or read-only disk) still met.

The full-disk tests run a child in a private mount namespace (``unshare -rm``) on a small tmpfs,
so the home's disk really fills; where the kernel allows no such namespace they skip and say so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CliRunner, make_repo

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(sys.executable).parent


def _unshare_works(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs '{probe}'"],
        capture_output=True,
    )
    return proc.returncode == 0


@pytest.fixture
def full_disk(tmp_path: Path) -> Path:
    """A folder a child can mount a small tmpfs on (skips where no mount namespace can be made)."""
    try:
        if not _unshare_works(tmp_path):
            pytest.skip("no private mount namespace here (unshare -rm): cannot fill a disk safely")
    except FileNotFoundError:
        pytest.skip("unshare is not installed: cannot fill a disk safely")
    folder = tmp_path / "disk"
    folder.mkdir()
    return folder


def _on_tmpfs(folder: Path, options: str, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` with a fresh tmpfs (``options``) mounted on ``folder``, in a namespace of its own."""
    script = f"mount -t tmpfs -o {options} tmpfs '{folder}' && exec \"$@\""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


# The children below take the home and a repository, and the tmpfs's last inodes with empty
# files (its bytes stay free).
_FILL = r"""
import json, os, sys
from coffer_memory import CofferError, MemoryService

home, repo = sys.argv[1], sys.argv[2]


def fill_inodes(folder):
    count = 0
    try:
        while True:
            open(os.path.join(folder, f"filler-{count}"), "w").close()
            count += 1
    except OSError:
        pass
"""


# Fills the tmpfs's inodes (not its bytes): a journal append to an existing day file needs no new
# file, the store version's temp file does.
_APPEND_ON_FULL = (
    _FILL
    + r"""
from pathlib import Path
from coffer_memory._store.versions import read_version

with MemoryService(home) as svc:
    store = svc.journal_append("first entry", cwd=repo).store
    before = read_version(Path(home), store)
    svc.recall("first", cwd=repo)
    fill_inodes(home)
    try:
        svc.journal_append("second entry", cwd=repo)
        out = ["ok"]
    except CofferError as exc:
        out = ["typed", exc.code]
    except Exception as exc:
        out = ["raw", repr(exc)]
    day = next(os.path.join(d, f) for d, _, fs in os.walk(home) if d.endswith("journal") for f in fs)
    out.append(open(day).read().count("second entry"))
    out.append(read_version(Path(home), store) - before)
print(json.dumps(out))
"""
)


def test_a_change_made_on_a_full_disk_is_reported_made(full_disk: Path, tmp_path: Path) -> None:
    """On a disk with no room for one more file, a journal entry was appended, then advancing the
    store's version (a new file renamed over the old) failed: the call died with a raw
    ``OSError: No space left on device`` (the CLI: ``unexpected OSError``) although the entry was
    written, so an agent retried and wrote it twice; ``coffer facts rm`` on a full disk said the
    same of a fact it had deleted. The version is now rewritten in place when no new file fits."""
    repo = make_repo(tmp_path / "repo")
    home = full_disk / "home"
    proc = _on_tmpfs(
        full_disk, "size=8m,nr_inodes=64", [sys.executable, "-c", _APPEND_ON_FULL, str(home), str(repo)], repo
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == ["ok", 1, 1]


# Thirty facts written beside coffer (the next reconcile has rows to add), then the disk filled
# to the last byte: the index cannot take them. Runs the real CLI in the same namespace.
_INDEX_ON_FULL = r"""
import json, os, subprocess, sys
from coffer_memory import MemoryService

home, coffer = sys.argv[1], sys.argv[2]
# Held open, so index.db's -shm and -wal stay (with no room for them the index cannot even open).
svc = MemoryService(home)
svc.remember("The kiln runs hot.", title="kiln", scope="global")
inbox = os.path.join(home, "memory", "global", "knowledge", "inbox")
for i in range(30):
    with open(os.path.join(inbox, f"outside-{i}.md"), "w") as out:
        out.write(f"Fact {i} written in an editor: " + "word " * 200 + "\n")
try:
    with open(os.path.join(home, "filler"), "wb") as out:
        while True:
            out.write(b"\0" * 4096)
            out.flush()
except OSError:
    pass
out = {}
for command in (["doctor"], ["reindex"], ["reindex", "--rebuild"]):
    proc = subprocess.run([coffer, "--home", home, *command], capture_output=True, text=True)
    out[" ".join(command)] = [proc.returncode, proc.stderr]
svc.close()
print(json.dumps(out))
"""


def test_doctor_and_reindex_on_a_full_disk_say_so(full_disk: Path, tmp_path: Path) -> None:
    """With the disk full under ``index.db``, ``coffer doctor`` (the command a user runs when
    something is wrong) and ``coffer reindex`` died with ``error: unexpected FullError: database
    or disk is full`` and a traceback in a log file, where every read answers from the index as
    it stands. Doctor now reports the files the index lacks; reindex fails with STORAGE_FULL
    naming the index."""
    home = full_disk / "home"
    argv = [sys.executable, "-c", _INDEX_ON_FULL, str(home), str(SCRIPTS / "coffer")]
    proc = _on_tmpfs(full_disk, "size=2m", argv, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    rc, err = got["doctor"]
    assert "unexpected" not in err and rc == 1, err
    assert "could not bring the index of global up to date (database or disk is full)" in err
    for command in ("reindex", "reindex --rebuild"):
        rc, err = got[command]
        assert rc == 1 and err.startswith(f"error: STORAGE_FULL: cannot write {home}/index.db: "), err


def test_config_set_on_a_read_only_or_full_home_is_a_typed_error(full_disk: Path, tmp_path: Path) -> None:
    """``coffer config set`` on a home it may not write (a read-only mount) or on a full disk died
    with ``error: unexpected OSError: [Errno 30] Read-only file system`` (or ``[Errno 28]``), where
    every other write names the folder with STORAGE_NOT_WRITABLE or STORAGE_FULL."""
    home = full_disk / "home"
    coffer = str(SCRIPTS / "coffer")
    script = (
        f"mkdir '{home}' && mount -o remount,ro '{full_disk}' && "
        f"{coffer} --home '{home}' config set memory.default_mode grep; "
        f"mount -o remount,rw '{full_disk}' && head -c 300000 /dev/zero > '{home}/filler' 2>/dev/null; "
        f"{coffer} --home '{home}' config set memory.default_mode grep"
    )
    proc = _on_tmpfs(full_disk, "size=256k", ["sh", "-c", script], tmp_path)
    read_only, full = proc.stderr.splitlines()[:2]
    assert read_only.startswith(f"error: STORAGE_NOT_WRITABLE: cannot change {home}"), proc.stderr
    assert full.startswith(f"error: STORAGE_FULL: cannot write {home}/config.toml"), proc.stderr
    assert proc.returncode == 1


def test_the_global_stores_label_survives_a_deleted_index(tmp_home: Path) -> None:
    """``coffer stores label global Personal`` kept the label in ``index.db`` alone (a project
    store's is in its ``store.json``): deleting the index, which the README says loses nothing
    ("Delete index.db and the next read rebuilds it"), lost it. The global store's
    ``store.json`` (where its settings already are) now holds it too."""
    from coffer_memory import MemoryService

    with MemoryService(tmp_home) as svc:
        svc.remember("The user prefers uv.", scope="global")
        assert svc.set_label("global", "Personal").label == "Personal"
    for leftover in tmp_home.glob("index.db*"):
        leftover.unlink()
    with MemoryService(tmp_home) as svc:
        assert svc.store_info("global").label == "Personal"
        assert [s.display_name for s in svc.stores()] == ["Personal"]
        assert svc.clear_label("global").label is None
    for leftover in tmp_home.glob("index.db*"):
        leftover.unlink()
    with MemoryService(tmp_home) as svc:
        assert svc.store_info("global").label is None


# A handoff and a journal day, then no inode left: deleting either frees one, which the new
# consolidation log (not there yet) could not have before the delete.
_LANE_DELETE_ON_FULL = (
    _FILL
    + r"""
with MemoryService(home) as svc:
    handoff = svc.save_handoff("Parser half done.", cwd=repo).path
    day = svc.journal_append("Shipped it.", cwd=repo).path
    fill_inodes(home)
    out = {}
    for name, call, path in (
        ("handoff", lambda: svc.delete_handoff("main", cwd=repo), handoff),
        ("journal", lambda: svc.delete_journal(day.stem, cwd=repo), day),
    ):
        try:
            out[name] = ["ok", call().after_sha256, path.exists()]
        except CofferError as exc:
            out[name] = ["typed", exc.code, path.exists()]
    out["audited"] = sorted(
        e["details"]["lane"] for e in svc.audit_events(event="memory_deleted") if "lane" in e["details"]
    )
print(json.dumps(out))
"""
)


def test_a_lane_delete_on_a_full_disk_is_not_reported_as_nothing_written(
    full_disk: Path, tmp_path: Path
) -> None:
    """``coffer handoff rm main`` (and ``journal rm``) on a full disk deleted the file, then the line
    for the consolidation log did not fit: 'error: STORAGE_FULL: ... nothing was written', exit 1,
    no audit event, and the handoff was gone. The log is secondary to the change it records (a
    link in its place is skipped already): once the change is made, a full disk skips the line
    with a warning and the delete is reported, and audited, as made."""
    repo = make_repo(tmp_path / "repo")
    home = full_disk / "home"
    argv = [sys.executable, "-c", _LANE_DELETE_ON_FULL, str(home), str(repo)]
    proc = _on_tmpfs(full_disk, "size=8m,nr_inodes=64", argv, repo)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    assert got["handoff"] == ["ok", None, False]
    assert got["journal"] == ["ok", None, False]
    assert got["audited"] == ["handoff", "journal"]


# coffer-api serving a home whose disk is then filled: a POST of a new fact.
_REST_ON_FULL = (
    _FILL
    + r"""
import re, subprocess, urllib.error, urllib.request

with MemoryService(home) as svc:
    svc.remember("seed", scope="global")
api = subprocess.Popen(
    [os.path.join(os.path.dirname(sys.executable), "coffer-api"), "--port", "0", "--home", home],
    stderr=subprocess.PIPE, text=True,
)
port = next(int(m.group(1)) for line in api.stderr if (m := re.search(r"listening on http://127.0.0.1:(\d+)", line)))
fill_inodes(home)
request = urllib.request.Request(
    f"http://127.0.0.1:{port}/api/v1/memory_stores/global/facts",
    data=json.dumps({"text": "The kiln runs hot."}).encode(),
    headers={"Content-Type": "application/json"},
)
try:
    with urllib.request.urlopen(request) as answer:
        out = [answer.status, json.loads(answer.read())]
except urllib.error.HTTPError as exc:
    out = [exc.code, json.loads(exc.read())]
openapi = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/openapi.json").read())
out.append(sorted(openapi["paths"]["/api/v1/memory_stores/{name}/facts"]["post"]["responses"]))
api.terminate()
api.wait()
print(json.dumps(out))
"""
)


def test_rest_answers_a_full_disk_with_507_not_500(full_disk: Path, tmp_path: Path) -> None:
    """A write on a full disk is STORAGE_FULL everywhere, but REST answered it ``500`` (its code
    was missing from the status table): a client read the server's "unexpected failure" and could
    not tell that freeing space is the fix. It is ``507 Insufficient Storage`` now, documented on
    every writing route."""
    home = full_disk / "home"
    argv = [sys.executable, "-c", _REST_ON_FULL, str(home), str(tmp_path)]
    proc = _on_tmpfs(full_disk, "size=8m,nr_inodes=64", argv, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    status, body, documented = json.loads(proc.stdout)
    assert (status, body["error"]["code"]) == (507, "STORAGE_FULL")
    assert "507" in documented


_TOKEN = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789AB"


def test_the_cli_says_when_it_redacted_a_secret(cli: CliRunner, repo: Path) -> None:
    """``coffer remember "... ghp_..."`` wrote ``[REDACTED:github_token]`` in place of the token
    and printed 'remembered ...' alone: the user who typed it was not told that what is on disk
    differs from what they typed (MCP's answer says so, REST's has ``redacted``, the CLI's JSON
    its receipt's findings). ``journal add``, ``handoff save`` and ``memory rules --add`` the same.
    Each now prints a ``redacted:`` line naming the kinds, never the value."""
    said = [cli("remember", f"The CI token is {_TOKEN} for now", cwd=repo)]
    fact_id = json.loads(cli("facts", "list", "--json", cwd=repo).stdout)["items"][0]["fact"]["id"]
    said += [
        cli("facts", "edit", fact_id, "--text", f"Now {_TOKEN}", cwd=repo),
        cli("journal", "add", f"Rotated {_TOKEN}", cwd=repo),
        cli("handoff", "save", f"Next: revoke {_TOKEN}", cwd=repo),
        cli("memory", "rules", "--add", f"Never print {_TOKEN}", cwd=repo),
    ]
    for out in said:
        assert out.returncode == 0, out.stderr
        assert "redacted: 1 github_token ([security] secrets; the value was not written)" in out.stdout, out
        assert _TOKEN not in out.stdout + out.stderr
    plain = cli("remember", "Nothing secret here", cwd=repo)
    assert "redacted" not in plain.stdout


def test_stdin_that_is_not_utf8_is_named_as_such(tmp_home: Path, repo: Path) -> None:
    """``iconv -t latin1 notes.txt | coffer remember -`` answered 'text contains a lone surrogate
    (not valid Unicode text)': true of the decoded string, meaningless to someone who piped a
    Latin-1 file. It now names standard input, the byte and where it is, and how to convert."""
    env = {**os.environ, "COFFER_HOME": str(tmp_home)}
    for argv in (["remember", "-"], ["journal", "add", "-"], ["handoff", "save", "-"]):
        proc = subprocess.run(
            [str(SCRIPTS / "coffer"), *argv], input=b"caf\xe9 au lait", cwd=repo, env=env, capture_output=True
        )
        assert proc.returncode == 1
        assert proc.stderr.decode() == (
            "error: INVALID_INPUT: standard input is not UTF-8 text (byte 0xe9 at offset 3); "
            "convert it first, e.g. iconv -f latin1 -t utf-8\n"
        )


def test_ctrl_c_stops_coffer_api_without_a_traceback(tmp_home: Path) -> None:
    """Ctrl-C is how a user stops ``coffer-api`` (``--open`` or not): it shut down cleanly, then
    printed two tracebacks ending in ``KeyboardInterrupt`` (uvicorn re-raises the signal it caught
    once the server has stopped, and only ``uvicorn.run`` swallows it). It ends with status 0 now,
    the shutdown lines alone."""
    import signal
    import urllib.request

    api = subprocess.Popen(
        [str(SCRIPTS / "coffer-api"), "--port", "0", "--home", str(tmp_home)],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert api.stderr is not None
    lines = []
    for line in api.stderr:
        lines.append(line)
        if "listening on http://" in line:
            break
    url = line.split("listening on ", 1)[1].strip()
    with urllib.request.urlopen(f"{url}/api/v1/memory_stores") as answer:
        assert answer.status == 200
    api.send_signal(signal.SIGINT)
    rest = api.stderr.read()
    assert api.wait(timeout=120) == 0, rest
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest, rest
    assert "Finished server process" in rest
