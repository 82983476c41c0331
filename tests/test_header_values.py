"""A header value YAML types (a numeric title) and text that is not UTF-8 in an index row. Each
test here failed before its fix. Real homes, real SQLite files, the CLI in a subprocess.
"""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from test_attack_home_entries import _coffer

from coffer_memory import MemoryService


@pytest.mark.parametrize(
    ("written", "title"),
    [("2024", "2024"), ("3.10", "3.10"), ("2024-05-01", "2024-05-01"), ("yes", "yes"), ("0x1F", "0x1F")],
)
def test_a_title_yaml_reads_as_a_number_is_kept_as_written(tmp_home: Path, written: str, title: str) -> None:
    """``title: 2024`` (a number, a date, a bool to YAML) was dropped for the file's name."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kettle whistles at dawn.", store="global")
        folder = svc.settings.home / "memory" / "global" / "knowledge"
    (folder / "budget-notes.md").write_text(
        f"---\ntitle: {written}\ndescription: 7\n---\nThe budget review is in March.\n", encoding="utf-8"
    )
    with MemoryService(tmp_home) as svc:
        hits = svc.recall("budget review", stores=["global"], mode="keyword").hits
        assert [h.title for h in hits] == [title]
        assert svc.get_fact(hits[0].id, store="global").fact.title == title


@pytest.mark.parametrize("written", ["7", "3.10", "2024-05-01", "no"])
def test_a_description_yaml_reads_as_a_number_is_kept_as_written(tmp_home: Path, written: str) -> None:
    """``description: 3.10`` (a number, a date, a bool to YAML) was shown empty."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kettle whistles at dawn.", store="global")
        folder = svc.settings.home / "memory" / "global" / "knowledge"
    (folder / "release.md").write_text(
        f"---\ntitle: release\ndescription: {written}\n---\nThe release train leaves on Friday.\n",
        encoding="utf-8",
    )
    with MemoryService(tmp_home) as svc:
        hits = svc.recall("release train", stores=["global"], mode="keyword").hits
        assert [h.title for h in hits] == ["release"]
        assert svc.get_fact(hits[0].id, store="global").fact.description == written


def test_text_that_is_not_utf8_in_a_row_is_damage(tmp_home: Path) -> None:
    """Another program stored bytes that are not UTF-8 as TEXT in a chunk's row: every keyword and
    grep recall died with a raw ``UnicodeDecodeError``. It is damage like a blob there: the index
    is moved aside and rebuilt, and the call answers."""
    with MemoryService(tmp_home) as svc:
        kiln = svc.remember("The kiln runs hot.", title="kiln", scope="global").fact.id
        svc.remember("The kettle whistles.", title="kettle", scope="global")
    index = tmp_home / "index.db"
    conn = apsw.Connection(str(index))
    for table, column, key in (("documents_fts", "text", "text"), ("documents", "title", "title")):
        conn.execute(f"UPDATE {table} SET {column} = CAST(x'6b696c6eff' AS TEXT) WHERE {key} LIKE '%kiln%'")
        assert conn.changes() == 1
    conn.close()
    bad = index.read_bytes()
    for args in (
        ("recall", "kiln runs hot", "--store", "global", "--mode", "keyword"),
        ("recall", "kiln runs hot", "--store", "global", "--mode", "grep"),
        ("facts", "list", "--store", "global"),
        ("facts", "show", kiln, "--store", "global"),
    ):
        index.write_bytes(bad)
        proc = _coffer(tmp_home, *args)
        assert "unexpected" not in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "kiln" in proc.stdout, (args, proc.stdout)
    with MemoryService(tmp_home) as svc:
        hits = svc.recall("kiln runs hot", stores=["global"], mode="keyword").hits
        assert hits[0].id == kiln and hits[0].text == "The kiln runs hot."
