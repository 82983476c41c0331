"""One time rule for the lanes and what the CLI shows (coffer_memory/_localtime.py): a journal day is
the writer's local day, lane files state their zone's offset, and the CLI shows local time with the
offset (journal, handoffs, transcripts, facts). Each case runs ``coffer`` in a subprocess with ``TZ``
set, as a user in that zone would.

There is no clock to inject, so the zones are chosen to make the rule bite at any hour: Kiritimati
(UTC+14) is on another day than UTC from 10:00 UTC on, Pago Pago (UTC-11) before 11:00 UTC, so at
every moment one of them is (Shanghai and Los Angeles bracket midnight UTC by eight hours). The
expected day is computed from the instant the file holds, never from a second reading of the clock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from agent_samples import build
from conftest import make_repo

from coffer_memory._store.lanes import journal_entries, read_handoff

ZONES = ("Pacific/Kiritimati", "Asia/Shanghai", "America/Los_Angeles", "Pacific/Pago_Pago")
COFFER = str(Path(sys.executable).parent / "coffer")


def coffer(home: Path, zone: str, *args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        [COFFER, "--home", str(home), *args],
        cwd=cwd,
        env={**os.environ, **(env or {}), "TZ": zone},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def shown(at: datetime, zone: str, timespec: str = "seconds") -> str:
    """What the CLI shows for ``at`` in ``zone``: local time with the offset stated."""
    return at.astimezone(ZoneInfo(zone)).isoformat(sep=" ", timespec=timespec)


def test_a_journal_day_is_the_writers_local_day_and_says_its_offset(tmp_path: Path) -> None:
    """Journal days were UTC days: an entry written in Shanghai at 07:30 went into yesterday's
    file, its heading at 23:30 UTC, while ``transcripts list`` showed local times."""
    repo = make_repo(tmp_path / "repo")
    home = tmp_path / "home"
    days = {}
    for zone in ZONES:
        out = coffer(home, zone, "journal", "add", f"Written in {zone}.", "--json", cwd=repo)
        path = Path(json.loads(out)["path"])
        entry = next(e for e in journal_entries(path.read_text()) if e.text == f"Written in {zone}.")
        assert entry.at.utcoffset() == ZoneInfo(zone).utcoffset(entry.at)  # the heading states its zone
        days[zone] = path.stem
        assert path.stem == entry.at.astimezone(ZoneInfo(zone)).date().isoformat(), zone
        listed = json.loads(coffer(home, zone, "journal", "--json", "--limit", "7", cwd=repo))
        assert any(f"Written in {zone}." in day["text"] for day in listed if day["period"] == path.stem)
    # Kiritimati is 25 hours ahead of Pago Pago: never the same day.
    assert days["Pacific/Kiritimati"] > days["Pacific/Pago_Pago"]


def test_handoffs_are_shown_in_local_time_with_the_offset(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    home = tmp_path / "home"
    coffer(home, "Asia/Shanghai", "handoff", "save", "Parser half done.", cwd=repo)
    (saved,) = (home / "memory" / "projects").glob("*/handoff/main.md")
    scene = read_handoff(saved)
    assert scene is not None
    assert scene.updated_at.utcoffset() == ZoneInfo("Asia/Shanghai").utcoffset(scene.updated_at)
    for zone in ("Asia/Shanghai", "America/Los_Angeles"):
        assert f"Handoff for branch 'main', saved {shown(scene.updated_at, zone)}:" in coffer(
            home, zone, "resume", cwd=repo
        )
        assert f"=== main  saved {shown(scene.updated_at, zone)} at " in coffer(
            home, zone, "handoff", "show", cwd=repo
        )


def test_transcripts_and_facts_are_listed_in_local_time_with_the_offset(tmp_path: Path) -> None:
    """``transcripts list`` showed local time without saying so; ``coffer facts list`` showed UTC
    without saying so. Both now state the offset, in the same form."""
    project = make_repo(tmp_path / "work" / "demo-repo")
    samples = build(tmp_path / "agents", project_dir=project)
    env = {k: v for k, v in samples.env.items() if k != "HOME"}
    home = tmp_path / "home"
    home.mkdir()
    codex = samples.expected_for("codex")
    for zone in ("Asia/Shanghai", "America/Los_Angeles"):
        out = coffer(home, zone, "transcripts", "list", "--agent", "codex", cwd=tmp_path, env=env)
        for session in codex:
            at = datetime.fromisoformat(session.last_activity_at.replace("Z", "+00:00"))
            line = next(line for line in out.splitlines() if session.session_id in line)
            assert line.startswith(shown(at, zone, "minutes") + "  "), (zone, line)

    coffer(home, "UTC", "remember", "Deploys go out on Tuesdays.", cwd=project)
    (fact,) = (home / "memory" / "projects").glob("*/knowledge/inbox/*.md")
    updated = datetime.fromisoformat(fact.read_text().split("updated_at: ")[1].split("\n")[0])
    for zone in ("Asia/Shanghai", "America/Los_Angeles"):
        assert shown(updated, zone, "minutes") in coffer(home, zone, "facts", "list", cwd=project)


@pytest.mark.parametrize("zone", ["Asia/Shanghai", "America/Los_Angeles"])
def test_the_rule_reads_back_exactly(zone: str, tmp_path: Path) -> None:
    """An entry's heading in local time is the same instant as the UTC one it replaces: recall's
    ``since``/``until`` and a store merge's ordering by time see no difference."""
    repo = make_repo(tmp_path / "repo")
    home = tmp_path / "home"
    out = coffer(home, zone, "journal", "add", "Exact instant.", "--json", cwd=repo)
    (entry,) = journal_entries(Path(json.loads(out)["path"]).read_text())
    listed = json.loads(coffer(home, "UTC", "journal", "--json", cwd=repo))
    (again,) = listed[0]["entries"]
    assert datetime.fromisoformat(again["at"]) == entry.at


def test_a_zone_whose_offset_has_seconds_keeps_the_instant_on_every_face(tmp_path: Path) -> None:
    """A POSIX ``TZ`` may give an offset with seconds (``XST-5:30:15``): the heading and the
    handoff held ``+05:30:15``, which JSON (Pydantic) writes as ``+05:30``, so REST and MCP
    answered an instant 15 seconds off the one written. Such a zone's times are written in UTC;
    the day is still the local one."""
    from fastapi.testclient import TestClient

    from coffer_memory import MemoryService
    from coffer_memory_fastapi import create_app

    repo = make_repo(tmp_path / "repo")
    home = tmp_path / "home"
    zone = "XST-5:30:15"
    out = coffer(home, zone, "journal", "add", "Written at an odd offset.", "--json", cwd=repo)
    path = Path(json.loads(out)["path"])
    (entry,) = journal_entries(path.read_text())
    local = entry.at.astimezone(timezone(timedelta(hours=5, minutes=30, seconds=15)))
    assert path.stem == local.date().isoformat()  # the local day still
    coffer(home, zone, "handoff", "save", "Odd offset scene.", cwd=repo)
    (saved,) = (home / "memory" / "projects").glob("*/handoff/main.md")
    scene = read_handoff(saved)
    assert scene is not None
    with MemoryService(home) as svc, TestClient(create_app(svc)) as client:
        store = svc.resolve_scope(repo).store_name
        (day,) = client.get(f"/api/v1/memory_stores/{store}/journal").json()["files"]
        assert datetime.fromisoformat(day["entries"][0]["at"]) == entry.at
        (listed,) = client.get(f"/api/v1/memory_stores/{store}/handoff").json()["scenes"]
        assert datetime.fromisoformat(listed["updated_at"]) == scene.updated_at
