"""``coffer import`` of a large archive prints a summary, not a line per file (fixes16: a 10k-fact
archive printed a 10,001-line table): the first entries (conflicts and skipped files first), the
counts, and ``--full`` for every entry."""

from __future__ import annotations

from pathlib import Path

from conftest import CliRunner

from coffer_memory import MemoryService
from coffer_memory._cli.porting import SHOWN_ENTRIES

FACTS = SHOWN_ENTRIES + 15


def test_a_large_import_lists_the_first_entries_and_counts(cli: CliRunner, tmp_path: Path) -> None:
    source = tmp_path / "source-home"
    with MemoryService(source) as svc:
        for i in range(FACTS):
            svc.remember(f"Fact number {i} about the widgets.", scope="global", title=f"fact {i}")
        svc.export_memory(tmp_path / "all.zip")
    out = cli("import", str(tmp_path / "all.zip"), home=tmp_path / "one")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert sum(" global " in line for line in lines) == SHOWN_ENTRIES
    assert f"and {FACTS - SHOWN_ENTRIES} more entries not listed ({FACTS} in all; --full" in out.stdout
    assert lines[-1].endswith(f"wrote {FACTS} file(s) ({FACTS} created)")
    full = cli("import", "--dry-run", "--full", str(tmp_path / "all.zip"), home=tmp_path / "two")
    assert full.returncode == 0, full.stderr
    assert sum(" global " in line for line in full.stdout.splitlines()) == FACTS
    assert "not listed" not in full.stdout


def _on_a_terminal(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``argv`` with stderr on a pseudo-terminal (the bars draw only on a terminal): its status
    and everything it drew there."""
    import contextlib
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import termios
    import threading

    leader, follower = pty.openpty()
    # 0 columns, as a new pseudo-terminal has, and tqdm draws an empty bar: give it a screen.
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 160, 0, 0))
    drawn: list[bytes] = []

    def drain() -> None:
        with contextlib.suppress(OSError):  # EIO once the child is gone and the terminal drained
            while chunk := os.read(leader, 65536):
                drawn.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=follower, timeout=600)
    os.close(follower)
    reader.join(timeout=60)
    os.close(leader)
    return proc.returncode, b"".join(drawn).decode(errors="replace")


def test_import_shows_a_bar_while_the_export_is_read_before_the_checks(tmp_path: Path) -> None:
    # A coffer export is read and each file checked against its manifest before the first step
    # (about a second per 1,000 files here): the bar sat empty and nameless all that time.
    import os
    import sys

    with MemoryService(tmp_path / "src") as svc:
        for n in range(30):
            svc.remember(f"Imported fact number {n} about the release train.", store="global")
        svc.export_memory(tmp_path / "out.zip")
        svc.export_memory(tmp_path / "out.jsonl", format="jsonl")
    coffer = str(Path(sys.executable).parent / "coffer")
    for archive in ("out.zip", "out.jsonl"):
        env = {**os.environ, "COFFER_HOME": str(tmp_path / f"dst-{archive}")}
        status, drawn = _on_a_terminal([coffer, "import", str(tmp_path / archive)], env)
        assert status == 0, drawn
        assert "reading" in drawn and "checking" in drawn and "writing" in drawn, drawn
        assert drawn.index("reading") < drawn.index("checking") < drawn.rindex("writing")
