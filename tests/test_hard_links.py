"""Fact and lane files with other names (hard links) in a store.

A hard link is not refused: making one needs write access to the store and grants no read its
maker lacked (``fs.protected_hardlinks``), and stores hold them for good reasons (``cp -al`` and
rsnapshot backups, sync tools). ``coffer doctor`` says which files have other names, and an
append to a linked lane file gives the store its own copy, as every other write does: appended
in place, a ``cp -al`` backup of the journal changed with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from coffer_memory import MemoryService

COFFER = str(Path(sys.executable).parent / "coffer")


def test_doctor_names_a_fact_file_linked_outside_the_store(
    svc: MemoryService, tmp_home: Path, tmp_path: Path
) -> None:
    plain = svc.remember("the harbour opens at six", store="global")
    outside = tmp_path / "outside.md"
    outside.write_text("---\ntitle: Linked\n---\nthe ferry leaves at nine\n", encoding="utf-8")
    linked = plain.path.parent / "linked.md"
    os.link(outside, linked)
    # Indexed as any file (a legitimate store may hold links) ...
    assert [h.title for h in svc.recall("ferry", stores=["global"], mode="keyword").hits] == ["Linked"]
    report = svc.doctor()
    assert len(report.hard_links) == 1 and str(linked) in report.hard_links[0], report.hard_links
    assert "1 other name" in report.hard_links[0]
    assert report.ok  # ... and said, not counted as a problem
    env = {**os.environ, "COFFER_HOME": str(tmp_home)}
    shown = subprocess.run([COFFER, "doctor"], env=env, capture_output=True, text=True)
    assert shown.returncode == 0 and f"hard link: {linked}: 1 other name" in shown.stdout, shown.stdout
    as_json = subprocess.run([COFFER, "doctor", "--json"], env=env, capture_output=True, text=True)
    assert [str(linked) in line for line in json.loads(as_json.stdout)["hard_links"]] == [True]
    os.unlink(outside)
    assert svc.doctor().hard_links == ()


def test_an_append_to_a_linked_journal_day_leaves_the_other_name_as_it_was(
    svc: MemoryService, repo: Path, tmp_path: Path
) -> None:
    day = svc.journal_append("the first episode", cwd=repo).path
    backup = tmp_path / "backup-day.md"
    os.link(day, backup)  # what ``cp -al`` makes of the store
    before = backup.read_bytes()
    rules = svc.append_rule("Never force-push main.", cwd=repo).path
    rules_backup = tmp_path / "backup-rules.md"
    os.link(rules, rules_backup)
    rules_before = rules_backup.read_bytes()
    svc.journal_append("the second episode", cwd=repo)
    svc.append_rule("Run the tests first.", cwd=repo)
    assert backup.read_bytes() == before
    assert rules_backup.read_bytes() == rules_before
    assert b"the second episode" in day.read_bytes() and b"the first episode" in day.read_bytes()
    assert os.stat(day).st_nlink == 1 and os.stat(backup).st_nlink == 1
    assert b"Run the tests first." in rules.read_bytes()
    assert [e.text for e in svc.journal(cwd=repo)[0].entries][-1] == "the second episode"
