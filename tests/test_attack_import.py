"""Hostile import files (attack5, session 13): JSON nested past the parser's depth, member names
too long for the file system, and names holding control or bidirectional characters. Each is
``InvalidImport`` before anything is written, through the library and the CLI."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
from conftest import CliRunner

from coffer_memory import InvalidImport, MemoryService

MANIFEST = {"format": "coffer-export", "format_version": 1}
FACT = b"---\ntitle: plain\n---\na plain fact\n"
DEEP = "[" * 100_000 + "]" * 100_000


def export_zip(path: Path, members: dict[str, bytes]) -> Path:
    files = [
        {"path": f"stores/global/{rel}", "sha256": hashlib.sha256(d).hexdigest()}
        for rel, d in members.items()
    ]
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("manifest.json", json.dumps({**MANIFEST, "files": files}))
        for rel, data in members.items():
            z.writestr(f"stores/global/{rel}", data)
    return path


def file_line(rel: str, data: bytes) -> str:
    record = {"record": "file", "store": "global", "path": rel, "content": data.decode()}
    return json.dumps({**record, "sha256": hashlib.sha256(data).hexdigest()})


def nothing_written(svc: MemoryService) -> bool:
    return not (svc.settings.memory_dir / "global" / "knowledge").exists()


@pytest.mark.parametrize("where", ["record", "inside_a_record", "zip_manifest"])
def test_json_nested_past_the_parsers_depth_is_a_typed_refusal(
    svc: MemoryService, tmp_path: Path, where: str
) -> None:
    if where == "zip_manifest":
        source = tmp_path / "deep.zip"
        with zipfile.ZipFile(source, "w") as z:
            z.writestr("manifest.json", DEEP)
        reason = "corrupt"
    else:
        source = tmp_path / "deep.jsonl"
        bad = DEEP if where == "record" else '{"record": "file", "x": ' + DEEP + "}"
        lines = [json.dumps({"record": "manifest", **MANIFEST}), file_line("knowledge/inbox/a.md", FACT), bad]
        source.write_text("\n".join(lines) + "\n")
        reason = "bad_json"
    with pytest.raises(InvalidImport) as caught:
        svc.import_memory(source)
    assert caught.value.details["reason"] == reason
    assert nothing_written(svc)


@pytest.mark.parametrize(
    "rel",
    [
        "knowledge/inbox/" + "a" * 300 + ".md",  # over NAME_MAX: the write raised ENAMETOOLONG
        "knowledge/" + "/".join(["b" * 200] * 6) + "/x.md",  # over the path limit
        "knowledge/inbox/x\n.md",  # a line break in a file name
        "knowledge/inbox/a\u202egnp.md",  # a bidirectional override: reads as "apng.md"
        "knowledge/inbox/tab\there.md",
    ],
)
def test_a_member_name_no_store_should_hold_is_unsafe_path(
    svc: MemoryService, tmp_path: Path, rel: str
) -> None:
    source = export_zip(tmp_path / "names.zip", {"knowledge/inbox/ok.md": FACT, rel: FACT})
    with pytest.raises(InvalidImport) as caught:
        svc.import_memory(source)
    assert caught.value.details["reason"] == "unsafe_path"
    assert nothing_written(svc)
    jsonl = tmp_path / "names.jsonl"
    jsonl.write_text(json.dumps({"record": "manifest", **MANIFEST}) + "\n" + file_line(rel, FACT) + "\n")
    with pytest.raises(InvalidImport) as caught:
        svc.import_memory(jsonl)
    assert caught.value.details["reason"] == "unsafe_path"
    assert nothing_written(svc)


def test_plain_unicode_names_still_import(svc: MemoryService, tmp_path: Path) -> None:
    source = export_zip(
        tmp_path / "ok.zip", {"knowledge/inbox/缓存策略.md": FACT, "knowledge/inbox/café.md": FACT}
    )
    report = svc.import_memory(source)
    assert [e.action for e in report.entries] == ["created", "created"]


def test_the_cli_answers_a_deep_import_with_its_code(cli: CliRunner, tmp_path: Path) -> None:
    source = tmp_path / "deep.jsonl"
    source.write_text(json.dumps({"record": "manifest", **MANIFEST}) + "\n" + DEEP + "\n")
    out = cli("import", str(source), "--json")
    assert out.returncode != 0 and "Traceback" not in out.stderr + out.stdout
    assert "INVALID_INPUT" in out.stdout + out.stderr


@pytest.mark.parametrize("version", [True, 0, -1, 1.0, "1"])
def test_a_format_version_that_is_no_version_is_unknown_format(
    svc: MemoryService, tmp_path: Path, version: object
) -> None:
    """``"format_version": true`` was read as version 1 (a bool is an int), and so were 0 and -1."""
    source = tmp_path / "odd.zip"
    with zipfile.ZipFile(source, "w") as z:
        z.writestr("manifest.json", json.dumps({**MANIFEST, "format_version": version, "files": []}))
    with pytest.raises(InvalidImport) as caught:
        svc.import_memory(source)
    assert caught.value.details["reason"] == "unknown_format"


def test_a_zip_bomb_is_refused_from_its_headers(svc: MemoryService, tmp_path: Path) -> None:
    """Members that unpack to over 100 times their packed size (past 64 MiB) are a zip bomb: refused as
    too_large before anything is unpacked (a ~100 KB archive claimed 80 MB of memory, up to the
    1 GiB total cap, while its members were read and checked). A real export, compressed as
    coffer compresses it, imports."""
    body = FACT + b"\n" * 3_900_000  # each member under the 4 MiB file cap, nearly all newlines
    members = {f"knowledge/inbox/f{i}.md": body for i in range(20)}
    files = [
        {"path": f"stores/global/{rel}", "sha256": hashlib.sha256(d).hexdigest()}
        for rel, d in members.items()
    ]
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr("manifest.json", json.dumps({**MANIFEST, "files": files}))
        for rel, data in members.items():
            z.writestr(f"stores/global/{rel}", data)
    assert bomb.stat().st_size * 100 < 20 * len(body)
    with pytest.raises(InvalidImport) as caught:
        svc.import_memory(bomb)
    assert caught.value.details["reason"] == "too_large" and "zip bomb" in caught.value.message
    assert nothing_written(svc)
    for i in range(3):
        svc.remember(f"fact number {i} about the deploy window", scope="global")
    svc.export_memory(tmp_path / "real.zip")
    with MemoryService(tmp_path / "other") as other:
        report = other.import_memory(tmp_path / "real.zip")
    assert [e.action for e in report.entries].count("created") >= 3
