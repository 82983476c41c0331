"""Export and import at their edges: import's limits kept by export, bytes that are not UTF-8,
names one file system folds into one, sources that are not files, binary members, one scan."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import pytest
import test_porting
from test_porting import _refused

from coffer_memory import InvalidExport, InvalidImport, MemoryService, Settings
from coffer_memory._cli import main
from coffer_memory._porting import archive
from coffer_memory._store.paths import GLOBAL_STORE

filled = test_porting.filled  # a home with facts in two stores (7 files)
TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
INBOX = "stores/global/knowledge/inbox"


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    files = [{"path": n, "sha256": hashlib.sha256(d).hexdigest()} for n, d in members.items()]
    manifest = {"format": "coffer-export", "format_version": 1, "stores": [], "files": files}
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.writestr("manifest.json", json.dumps(manifest))
    return path


def _jsonl(path: Path, members: dict[str, bytes]) -> Path:
    lines = [{"record": "manifest", "format": "coffer-export", "format_version": 1, "stores": []}]
    for name, data in members.items():
        _, store, rel = name.split("/", 2)
        lines.append(
            {
                "record": "file",
                "store": store,
                "path": rel,
                "content": data.decode(),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _export_refused(svc: MemoryService, dest: Path, reason: str, **kw: Any) -> InvalidExport:
    """The export is refused with ``reason``; the destination and its folder are as they were."""
    folder = sorted(os.listdir(dest.parent))
    old = dest.read_bytes() if dest.exists() else None
    with pytest.raises(InvalidExport) as info:
        svc.export_memory(dest, **kw)
    assert info.value.reason == reason and info.value.code == "INVALID_INPUT"
    assert sorted(os.listdir(dest.parent)) == folder  # no temp file left, no half-written export
    assert (dest.read_bytes() if dest.exists() else None) == old
    return info.value


# -- 1. one secret scan per text ---------------------------------------------------------------
def test_each_text_is_scanned_for_secrets_once(
    filled: MemoryService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The check pass and the write pass both scanned every text: 12 minutes for 30,006 files.
    from coffer_memory._transcripts import secrets

    scanned: list[str] = []
    real = secrets.redact_secrets

    def counting(text: str, counts: Any = None) -> str:
        scanned.append(text)
        return real(text, counts)

    monkeypatch.setattr(secrets, "redact_secrets", counting)
    filled.export_memory(tmp_path / "e.zip")
    with MemoryService(tmp_path / "fresh") as fresh:
        report = fresh.import_memory(tmp_path / "e.zip")
    assert report.written == 7
    assert len(scanned) == 7


# -- 2. export keeps within what import accepts, streamed --------------------------------------
def test_a_file_over_max_file_bytes_refuses_the_export_by_name(tmp_path: Path) -> None:
    # It was left out of the export without a word.
    settings = Settings.load(tmp_path / "h", memory={"max_file_bytes": 2048})
    with MemoryService(tmp_path / "h", settings=settings) as svc:
        svc.remember("a small fact", store=GLOBAL_STORE)
        big = svc.paths(GLOBAL_STORE).root / "knowledge" / "big.md"
        big.write_text("x" * 4096)
        error = _export_refused(svc, tmp_path / "e.zip", "too_large")
        assert error.member == "stores/global/knowledge/big.md" and error.limit == 2048
        assert "stores/global/knowledge/big.md" in error.message and "2048" in error.message
        _export_refused(svc, tmp_path / "e.jsonl", "too_large", format="jsonl")


@pytest.mark.parametrize(
    ("limit", "value", "expected"),
    [
        ("MAX_MEMBERS", 5, 5),
        ("MAX_TOTAL_BYTES", 3000, 3000),
        ("MAX_MANIFEST_BYTES", 600, 600),
    ],
)
def test_an_export_over_an_import_limit_is_refused_naming_it(
    filled: MemoryService,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    limit: str,
    value: int,
    expected: int,
) -> None:
    # Export wrote archives its own import then refused.
    monkeypatch.setattr(archive, limit, value)
    dest = tmp_path / "e.zip"
    dest.write_bytes(b"an older export")
    error = _export_refused(filled, dest, "too_large")
    assert error.limit == expected and str(expected) in error.message


def test_whatever_export_writes_import_accepts(
    filled: MemoryService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # JSONL has no member count to keep: under a member cap a zip is refused, JSONL is not.
    monkeypatch.setattr(archive, "MAX_MEMBERS", 5)
    _export_refused(filled, tmp_path / "e.zip", "too_large")
    report = filled.export_memory(tmp_path / "e.jsonl", format="jsonl")
    with MemoryService(tmp_path / "fresh") as fresh:
        assert fresh.import_memory(tmp_path / "e.jsonl").written == report.files == 7


def test_an_export_import_would_take_for_a_zip_bomb_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archive, "BOMB_FLOOR_BYTES", 10_000)
    with MemoryService(tmp_path / "h") as svc:
        svc.remember("a small fact", store=GLOBAL_STORE)
        (svc.paths(GLOBAL_STORE).root / "knowledge" / "same.md").write_text("a" * 1_000_000)
        error = _export_refused(svc, tmp_path / "e.zip", "too_large")
        assert error.limit == archive.MAX_UNPACK_RATIO and "jsonl" in error.message
        svc.export_memory(tmp_path / "e.jsonl", format="jsonl")  # not packed: no ratio
        with MemoryService(tmp_path / "fresh") as fresh:
            assert fresh.import_memory(tmp_path / "e.jsonl").written == 2


def test_export_streams_instead_of_holding_the_archive_in_memory(tmp_path: Path) -> None:
    with MemoryService(tmp_path / "h") as svc:
        svc.remember("a small fact", store=GLOBAL_STORE)
        folder = svc.paths(GLOBAL_STORE).root / "knowledge" / "big"
        folder.mkdir()
        import base64

        size = 0
        for i in range(10):  # 10 files of 3 MiB of text that does not compress much
            data = base64.b64encode(os.urandom(3 * 1024 * 1024 // 4 * 3))
            (folder / f"f{i}.md").write_bytes(data)
            size += len(data)
        tracemalloc.start()
        try:
            report = svc.export_memory(tmp_path / "e.zip")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert report.files == 11 and report.size > size // 2
    assert peak < size // 2  # about two files at a time; before: every file, then the archive
    assert (tmp_path / "e.zip").stat().st_mode & 0o777 == 0o600
    assert sorted(os.listdir(tmp_path)) == ["e.zip", "h"]
    assert hashlib.sha256((tmp_path / "e.zip").read_bytes()).hexdigest() == report.sha256


def test_the_cli_names_the_limit_an_export_would_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with MemoryService(tmp_path / "h") as svc:
        cap = svc.settings.memory.max_file_bytes
        (svc.paths(GLOBAL_STORE).root / "knowledge").mkdir(parents=True)
        (svc.paths(GLOBAL_STORE).root / "knowledge" / "big.md").write_bytes(b"x" * (cap + 1))
    assert main(["--home", str(tmp_path / "h"), "export", "-o", str(tmp_path / "e.zip")]) == 1
    err = capsys.readouterr().err
    assert "INVALID_INPUT" in err and "big.md" in err and str(cap) in err and "Traceback" not in err
    assert not (tmp_path / "e.zip").exists()


# -- 3. bytes that are not UTF-8 round-trip ----------------------------------------------------
@pytest.mark.parametrize("fmt", ["zip", "jsonl"])
def test_a_file_that_is_not_utf8_round_trips(filled: MemoryService, tmp_path: Path, fmt: str) -> None:
    # It was exported, then skipped by import ("not UTF-8 text").
    latin = b"---\ntitle: caf\xe9\n---\n\nna\xefve caf\xe9 notes\n"
    rel = Path("knowledge/inbox/latin.md")
    (filled.paths(GLOBAL_STORE).root / rel).write_bytes(latin)
    filled.export_memory(tmp_path / f"e.{fmt}", format=fmt)  # type: ignore[arg-type]
    with MemoryService(tmp_path / "fresh") as fresh:
        report = fresh.import_memory(tmp_path / f"e.{fmt}")
        assert report.counts == {"created": 8}
        assert (fresh.paths(GLOBAL_STORE).root / rel).read_bytes() == latin
        assert fresh.import_memory(tmp_path / f"e.{fmt}").counts == {"unchanged": 8}


def test_a_secret_in_a_file_that_is_not_utf8_is_redacted_and_its_bytes_kept(tmp_path: Path) -> None:
    data = b"caf\xe9 " + TOKEN.encode() + b" na\xefve\n"
    source = _zip(tmp_path / "e.zip", {f"{INBOX}/latin.md": data})
    with MemoryService(tmp_path / "h") as svc:
        report = svc.import_memory(source)
        written = (svc.paths(GLOBAL_STORE).root / "knowledge/inbox/latin.md").read_bytes()
    assert report.entries[0].findings and TOKEN.encode() not in written
    assert written.startswith(b"caf\xe9 ") and written.endswith(b" na\xefve\n")


# -- 4. names one file system folds into one ---------------------------------------------------
@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Deploy.md", "deploy.md"),
        ("caf\u00e9.md", "cafe\u0301.md"),  # NFC and NFD
        ("Notes/a.md", "notes/a.md"),
    ],
)
@pytest.mark.parametrize("build", [_zip, _jsonl])
def test_member_names_that_are_one_file_on_macos_or_windows_are_refused(
    svc: MemoryService, tmp_path: Path, first: str, second: str, build: Any
) -> None:
    # They were imported as two files; on a case- or normalisation-insensitive disk, one.
    members = {f"{INBOX}/{first}": b"one\n", f"{INBOX}/{second}": b"two\n"}
    error = _refused(svc, build(tmp_path / "e.x", members), "collision")
    assert error.member == f"{INBOX}/{second}" and error.other == f"{INBOX}/{first}"
    assert first in error.message and second in error.message


def test_an_export_of_two_names_one_file_system_folds_is_refused(svc: MemoryService, tmp_path: Path) -> None:
    svc.remember("a small fact", store=GLOBAL_STORE)
    inbox = svc.paths(GLOBAL_STORE).inbox
    (inbox / "Deploy.md").write_text("one\n")
    (inbox / "deploy.md").write_text("two\n")
    error = _export_refused(svc, tmp_path / "e.zip", "collision")
    assert "Deploy.md" in error.message and "deploy.md" in error.message


@pytest.mark.parametrize(("first", "second"), [("stra\u00dfe.md", "strasse.md"), ("\ufb01le.md", "file.md")])
@pytest.mark.parametrize("build", [_zip, _jsonl])
def test_names_only_full_case_folding_joins_are_two_files(
    svc: MemoryService, tmp_path: Path, first: str, second: str, build: Any
) -> None:
    # APFS and NTFS fold case one character to one character: stra\u00dfe and strasse, the
    # \ufb01 ligature and fi, are two files there; str.casefold's full folding made them one.
    members = {f"{INBOX}/{first}": b"one\n", f"{INBOX}/{second}": b"two\n"}
    svc.import_memory(build(tmp_path / "e.x", members))
    inbox = svc.paths(GLOBAL_STORE).inbox
    assert (inbox / first).read_bytes() == b"one\n" and (inbox / second).read_bytes() == b"two\n"
    svc.export_memory(tmp_path / "again.zip")  # and an export of both is not refused either


# -- 5. sources that are not regular files -----------------------------------------------------
@pytest.mark.parametrize("kind", [None, "coffer", "mcp-memory", "rules", "basic-memory"])
def test_a_fifo_is_refused_not_waited_on(svc: MemoryService, tmp_path: Path, kind: str | None) -> None:
    fifo = tmp_path / "export.zip"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            svc.import_memory(fifo, kind=kind)  # type: ignore[arg-type]
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():  # it opened the FIFO and waits for a writer: give it one, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(5)
        pytest.fail("the import blocked on a FIFO")
    error = outcome[0]
    assert isinstance(error, InvalidImport) and error.reason == "not_regular"
    assert "FIFO" in error.message


def test_a_device_is_refused(svc: MemoryService) -> None:
    with pytest.raises(InvalidImport) as info:
        svc.import_memory("/dev/null", kind="coffer")
    assert info.value.reason == "not_regular" and "character device" in info.value.message


# -- 6. a NUL byte names its file --------------------------------------------------------------
@pytest.mark.parametrize("build", [_zip, _jsonl])
def test_a_nul_byte_refuses_the_import_naming_the_file(
    svc: MemoryService, tmp_path: Path, build: Any
) -> None:
    members = {f"{INBOX}/ok.md": b"fine\n", f"{INBOX}/binary.md": b"half\x00binary\n"}
    error = _refused(svc, build(tmp_path / "e.x", members), "not_text")
    assert error.member == f"{INBOX}/binary.md" and f"{INBOX}/binary.md" in error.message


def test_a_nul_byte_refuses_the_export_naming_the_file(svc: MemoryService, tmp_path: Path) -> None:
    svc.remember("a small fact", store=GLOBAL_STORE)
    (svc.paths(GLOBAL_STORE).inbox / "binary.md").write_bytes(b"half\x00binary\n")
    error = _export_refused(svc, tmp_path / "e.zip", "not_text")
    assert error.member == f"{INBOX}/binary.md"


# -- 1b. an import syncs each folder once, audits in one write ---------------------------------
def test_an_import_fsyncs_each_file_once_and_audits_every_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each file cost three fsyncs (the file, its folder, one audit line): 25 s for 1,000 files.
    members = {f"{INBOX}/fact-{i}.md": f"fact {i}\n".encode() for i in range(40)}
    source = _zip(tmp_path / "e.zip", members)
    with MemoryService(tmp_path / "h") as svc:
        svc.remember("warm up: the store and its folders exist", store=GLOBAL_STORE)
        synced: list[int] = []
        real = os.fsync

        def counting(fd: int) -> None:
            synced.append(fd)
            real(fd)

        monkeypatch.setattr(os, "fsync", counting)
        report = svc.import_memory(source)
        monkeypatch.setattr(os, "fsync", real)
        assert report.counts == {"created": 40}
        assert len(synced) <= 40 + 5  # one per file, one per folder, the audit, the version
        added = svc.audit_events(event="memory_added", limit=100)
        paths = {e["details"]["path"] for e in added if e["details"].get("imported_from") == "coffer"}
        assert paths == {str(svc.paths(GLOBAL_STORE).inbox / f"fact-{i}.md") for i in range(40)}
