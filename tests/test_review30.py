"""Review of session 30: what a demanding new user still met, on every face.

The read-only home runs a child in a private mount namespace (``unshare -rm``) on a tmpfs made
read-only after the home is written, so no write can get through; where the kernel allows no such
namespace the test skips and says so.
"""

from __future__ import annotations

import argparse
import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import CliRunner, make_repo

from tests.test_review26 import SCRIPTS, _on_tmpfs, full_disk  # noqa: F401  (full_disk: a fixture)

ROOT = Path(__file__).resolve().parents[1]


def test_a_read_only_home_can_still_be_exported(full_disk: Path, tmp_path: Path) -> None:  # noqa: F811
    """docs/repair.md: a home this process may read but not write (a backup restored read-only)
    is read through a private index. Yet ``coffer export`` of it, which only reads the home,
    failed with STORAGE_NOT_WRITABLE "cannot change <home>" because it took the stores' write
    locks: the one way to copy that memory elsewhere was refused."""
    home, out = full_disk / "home", tmp_path / "backup.zip"
    coffer = str(SCRIPTS / "coffer")
    script = (
        f"{coffer} --home '{home}' remember --global 'The kiln fires at 1200 C.' >/dev/null && "
        f"mount -o remount,ro '{full_disk}' && "
        f"{coffer} --home '{home}' export -o '{out}' --json"
    )
    proc = _on_tmpfs(full_disk, "size=4m", ["sh", "-c", script], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["files"] >= 1, proc.stdout
    with zipfile.ZipFile(out) as archive:
        assert any(name.endswith(".md") and "global" in name for name in archive.namelist()), (
            archive.namelist()
        )


def _page_cursors() -> list[tuple[str, str]]:
    """Each whole cursor token a page shows (``--cursor T``, ``cursor=T``), by page."""
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        if page.name != "benchmarks.md":  # a log: what a run printed then
            text = page.read_text(encoding="utf-8")
            found += [
                (page.name, t)
                for t in re.findall(r"cursor[ =]([A-Za-z0-9_-]{40,}(?:\.[A-Za-z0-9_-]+)?)", text)
            ]
    return found


def test_the_cursors_the_pages_show_have_the_shape_coffer_makes() -> None:
    """docs/cli.md showed a cursor of the first format (no signature) for ``facts list --cursor``;
    pasted back, coffer says "cursor is malformed" where the page shows the next page. A cursor
    shown is now one coffer makes: a signed payload of the current format."""
    from coffer_memory._cursor import VERSION, _unb64

    cursors = _page_cursors()
    assert len(cursors) >= 3, cursors  # the facts list example's three
    for page, token in cursors:
        assert token.count(".") == 1, (page, token)
        payload = json.loads(_unb64(token.split(".")[0]))
        assert payload["v"] == VERSION and set(payload) == {"v", "q", "s", "n", "p"}, (page, payload)


def _options(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.Action]]:
    """Each action of ``parser`` and of its subcommands, with the command it belongs to."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction):
            yield path, action


def _commands() -> list[tuple[str, argparse.ArgumentParser, str]]:
    from coffer_memory._cli import build_parser
    from coffer_memory_fastapi.cli import build_parser as api_parser
    from coffer_memory_mcp._args import build_parser as mcp_parser

    return [
        ("coffer", build_parser(), "cli.md"),
        ("coffer-api", api_parser(), "rest.md"),
        ("coffer-mcp", mcp_parser(), "mcp.md"),
    ]


def test_every_option_of_every_command_is_named_in_its_page_and_has_help() -> None:
    """``coffer import --full`` was in no page, nor ``coffer-api --version`` / ``coffer-mcp
    --version`` in theirs; ``coffer-api --log-level`` and ``coffer-mcp --transport`` /
    ``--log-level`` showed no line of help in ``--help``."""
    unnamed, silent = [], []
    for name, parser, page in _commands():
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        for path, action in _options(parser, name):
            if action.help is None:
                silent.append(f"{path} {action.option_strings or action.dest}")
            spelled = [re.escape(o) for o in action.option_strings]
            if spelled and not re.search(rf"(?<![\w-])(?:{'|'.join(spelled)})(?![\w-])", text):
                unnamed.append(f"{path} {action.option_strings} (docs/{page})")
    assert unnamed == [] and silent == [], (unnamed, silent)


def test_a_home_on_a_disk_with_no_inode_left_is_storage_full_not_unexpected(
    full_disk: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """An empty home on a disk with no inode left (a tmpfs's ``nr_inodes``, a full ext4): the
    first ``recall`` or ``remember`` could not make ``locks/`` and died with "unexpected OSError:
    [Errno 28] No space left on device", where every other write on a full disk is STORAGE_FULL
    naming the path."""
    make_repo(tmp_path / "repo")
    home = full_disk / "home"
    coffer = str(SCRIPTS / "coffer")
    script = (
        f"mkdir '{home}' && i=0 && while touch '{full_disk}'/f$i 2>/dev/null; do i=$((i+1)); done; "
        f"{coffer} --home '{home}' recall kiln; {coffer} --home '{home}' remember 'The kiln is hot.'"
    )
    proc = _on_tmpfs(full_disk, "size=1m,nr_inodes=16", ["sh", "-c", script], tmp_path / "repo")
    lines = proc.stderr.splitlines()
    assert len(lines) == 2 and all(
        line.startswith(f"error: STORAGE_FULL: cannot write {home}/") for line in lines
    ), proc.stderr


def test_an_error_a_console_block_shows_is_the_line_coffer_prints() -> None:
    """docs/porting.md showed a refused export as ``INVALID_INPUT: stores/...``; ``coffer``
    prints ``error: INVALID_INPUT: ...`` (docs/cli.md, Exit status and errors), the line a
    reader greps for."""
    from coffer_memory import _errors

    codes = sorted({c.code for c in vars(_errors).values() if isinstance(c, type) and hasattr(c, "code")})
    bare = re.compile(rf"^\s*(?:{'|'.join(codes)}):")
    shown = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        if page.name != "benchmarks.md":
            for block in re.findall(r"```console\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
                shown += [f"{page.name}: {line}" for line in block.splitlines() if bare.match(line)]
    assert len(codes) >= 10 and shown == [], (codes, shown)


def test_reinstalling_does_not_overwrite_a_coffer_entry_the_user_made_their_own_since(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/agents-claude-code.md: a ``coffer`` MCP entry that runs something else is yours, and
    install does not replace it without ``--force``. After an install, an entry the user then
    pointed elsewhere (``claude mcp add --scope user coffer -- uvx my-coffer``) was overwritten
    by the next ``agents install`` (an upgrade's), silently, and lost: uninstall then deleted
    the key. It is now refused the same way; ``--force`` replaces it and uninstall puts it back."""
    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    assert cli("agents", "install", "claude-code", "--no-check").returncode == 0
    config = user / ".claude.json"
    data = json.loads(config.read_text())
    mine = {"type": "stdio", "command": "uvx", "args": ["my-coffer"], "env": {}}
    data["mcpServers"]["coffer"] = mine
    config.write_text(json.dumps(data, indent=2))
    before = config.read_bytes()

    again = cli("agents", "install", "claude-code", "--no-check")
    assert again.returncode == 1 and again.stderr.startswith(
        f"error: AGENT_CONFIG_INVALID: {config}: has a 'coffer' entry of its own under mcpServers (it runs uvx my-coffer)"
    ), again
    assert config.read_bytes() == before

    forced = cli("agents", "install", "claude-code", "--no-check", "--force")
    assert forced.returncode == 0 and "replaced the 'coffer' entry of your own" in forced.stdout, forced
    assert json.loads(config.read_text())["mcpServers"]["coffer"]["command"].endswith("coffer-mcp")
    assert cli("agents", "uninstall", "claude-code").returncode == 0
    assert json.loads(config.read_text())["mcpServers"]["coffer"] == mine
