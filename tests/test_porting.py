"""Export and import of coffer's own format: round trip, idempotency, dry run, and bad archives."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import stat
import zipfile
from pathlib import Path

import pytest

from coffer_memory import (
    AsyncMemoryService,
    InvalidImport,
    InvalidInput,
    MemoryRejected,
    MemoryService,
    Settings,
)
from coffer_memory._cli import main
from coffer_memory._store.paths import GLOBAL_STORE

TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"


def tree_hash(root: Path) -> str:
    """sha256 over every path and file under ``root`` (what a write would change)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")) if root.exists() else []:
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def all_facts(svc: MemoryService) -> dict[str, list[tuple[object, str]]]:
    """Every store's facts with their path inside the store (ids, bodies, metadata)."""
    out = {}
    for info in svc.stores():
        root = svc.paths(info.name).root
        page = svc.list_facts(store=info.name, limit=500)
        out[info.name] = sorted(((r.fact, r.path.relative_to(root).as_posix()) for r in page.items), key=str)
    return out


@pytest.fixture
def filled(tmp_path: Path, repo: Path) -> MemoryService:
    """A home with facts in two stores, a journal day, a rule and a handoff."""
    svc = MemoryService(tmp_path / "source-home")
    svc.remember("We deploy with `make ship`.", title="Deploy", store=GLOBAL_STORE, tags=["ops"])
    svc.remember("Ünïcödé body, 日本語のメモ", title="Unicode", store=GLOBAL_STORE)
    svc.remember("The API lives in api/", cwd=repo, origin_session_id="sess-1")
    svc.journal_append("Fixed the flaky test", cwd=repo)
    svc.append_rule("Run the tests before pushing", store=GLOBAL_STORE)
    svc.save_handoff("Halfway through the refactor", cwd=repo)
    yield svc
    svc.close()


@pytest.mark.parametrize("fmt", ["zip", "jsonl"])
def test_round_trip_gives_identical_facts_and_files(filled: MemoryService, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"export.{fmt}"
    report = filled.export_memory(out, format=fmt)  # type: ignore[arg-type]
    assert report.files == 7 and report.path == out
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    with MemoryService(tmp_path / "fresh") as fresh:
        result = fresh.import_memory(out)
        assert result.kind == "coffer" and result.counts == {"created": 7}
        assert all_facts(fresh) == all_facts(filled)
        assert tree_hash(fresh.settings.memory_dir) == tree_hash(filled.settings.memory_dir)
        assert fresh.recall("deploy", stores=[GLOBAL_STORE]).hits[0].title == "Deploy"


def test_zip_manifest_lists_every_file_with_its_sha256(filled: MemoryService, tmp_path: Path) -> None:
    out = tmp_path / "e.zip"
    filled.export_memory(out)
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        assert manifest["format"] == "coffer-export" and manifest["format_version"] == 1
        assert manifest["coffer_version"] and manifest["created_at"]
        assert {s["name"] for s in manifest["stores"]} == {s.name for s in filled.stores()}
        for entry in manifest["files"]:
            assert hashlib.sha256(zf.read(entry["path"])).hexdigest() == entry["sha256"]


def test_jsonl_has_one_record_per_file_with_fact_metadata(filled: MemoryService) -> None:
    buf = io.BytesIO()
    filled.export_memory(buf, stores=[GLOBAL_STORE], format="jsonl")
    records = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert records[0]["record"] == "manifest"
    facts = [r for r in records if r.get("fact")]
    assert {f["fact"]["title"] for f in facts} == {"Deploy", "Unicode"}
    deploy = next(f for f in facts if f["fact"]["title"] == "Deploy")
    assert deploy["lane"] == "knowledge" and deploy["fact"]["tags"] == ["ops"]
    assert {r["lane"] for r in records[1:]} == {"knowledge", "rules"}


def test_second_import_writes_nothing(filled: MemoryService, tmp_path: Path) -> None:
    out = tmp_path / "e.zip"
    filled.export_memory(out)
    with MemoryService(tmp_path / "fresh") as fresh:
        fresh.import_memory(out)
        before = tree_hash(fresh.settings.memory_dir)
        versions = {s.name: fresh.writer.version(s.name) for s in fresh.stores()}
        again = fresh.import_memory(out)
        assert again.written == 0 and again.counts == {"unchanged": 7}
        assert tree_hash(fresh.settings.memory_dir) == before
        assert {s.name: fresh.writer.version(s.name) for s in fresh.stores()} == versions


def test_dry_run_writes_nothing_and_says_what_it_would(filled: MemoryService, tmp_path: Path) -> None:
    out = tmp_path / "e.jsonl"
    filled.export_memory(out, format="jsonl")
    with MemoryService(tmp_path / "fresh") as fresh:
        fresh.remember("already here", store=GLOBAL_STORE)
        before = tree_hash(fresh.settings.memory_dir)
        plan = fresh.import_memory(out, dry_run=True)
        assert plan.dry_run and plan.written == 7
        assert {e.action for e in plan.entries} == {"created"}
        assert all(e.path is not None and not e.path.exists() for e in plan.entries)
        assert tree_hash(fresh.settings.memory_dir) == before


def test_a_changed_file_here_is_a_conflict_and_kept(filled: MemoryService, tmp_path: Path) -> None:
    out = tmp_path / "e.zip"
    filled.export_memory(out, stores=[GLOBAL_STORE])
    with MemoryService(tmp_path / "fresh") as fresh:
        fresh.import_memory(out)
        rules = fresh.paths(GLOBAL_STORE).rules_file()
        rules.write_text("# Rules\n- mine\n")
        again = fresh.import_memory(out)
        assert [e.action for e in again.entries if e.path == rules] == ["conflict"]
        assert rules.read_text() == "# Rules\n- mine\n"


def test_store_option_imports_one_store(filled: MemoryService, tmp_path: Path) -> None:
    out = tmp_path / "e.zip"
    filled.export_memory(out)
    with MemoryService(tmp_path / "fresh") as fresh:
        result = fresh.import_memory(out, store=GLOBAL_STORE)
        assert {e.store for e in result.entries} == {GLOBAL_STORE}
        assert [s.name for s in fresh.stores()] == [GLOBAL_STORE]


def test_secrets_in_an_export_are_redacted_on_import(tmp_path: Path) -> None:
    with MemoryService(
        tmp_path / "a", settings=Settings.load(tmp_path / "a", security={"secrets": "allow"})
    ) as a:
        a.remember(f"the token is {TOKEN}", title="Token", store=GLOBAL_STORE)
        out = tmp_path / "e.zip"
        a.export_memory(out)
    with MemoryService(tmp_path / "b") as b:
        result = b.import_memory(out)
        assert result.entries[0].findings and result.entries[0].action == "created"
        text = b.list_facts(store=GLOBAL_STORE).items[0].fact.body
        assert TOKEN not in text
    settings = Settings.load(tmp_path / "c", security={"secrets": "reject"})
    with MemoryService(tmp_path / "c", settings=settings) as c:
        with pytest.raises(MemoryRejected):
            c.import_memory(out)
        assert not (c.settings.memory_dir / "global").exists()


# -- bad archives: refused whole, nothing written ----------------------------------------------
def _zip(path: Path, members: dict[str, bytes], manifest: dict[str, object] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        if manifest is not None:
            zf.writestr("manifest.json", json.dumps(manifest))
    return path


def _manifest(members: dict[str, bytes]) -> dict[str, object]:
    files = [{"path": n, "sha256": hashlib.sha256(d).hexdigest()} for n, d in members.items()]
    return {"format": "coffer-export", "format_version": 1, "stores": [], "files": files}


def _refused(svc: MemoryService, source: Path, reason: str) -> InvalidImport:
    before = tree_hash(svc.settings.memory_dir)
    with pytest.raises(InvalidImport) as info:
        svc.import_memory(source, kind="coffer")
    assert info.value.reason == reason and info.value.code == "INVALID_INPUT"
    assert tree_hash(svc.settings.memory_dir) == before
    return info.value


GOOD = {"stores/global/knowledge/inbox/ok.md": b"---\ntitle: ok\n---\n\nfine\n"}


@pytest.mark.parametrize(
    "name",
    [
        "../../evil.md",
        "stores/global/../../../evil.md",
        "/etc/evil.md",
        "stores\\global\\evil.md",
        "C:/evil.md",
    ],
)
def test_zip_slip_member_names_are_refused(svc: MemoryService, tmp_path: Path, name: str) -> None:
    members = {**GOOD, name: b"evil"}
    _refused(svc, _zip(tmp_path / "e.zip", members, _manifest(members)), "unsafe_path")
    # refused by its name even when the manifest does not list it
    _refused(svc, _zip(tmp_path / "unlisted.zip", members, _manifest(GOOD)), "unsafe_path")
    assert not (tmp_path / "evil.md").exists()


def test_a_manifest_path_that_climbs_out_of_its_store_is_refused(svc: MemoryService, tmp_path: Path) -> None:
    members = {"stores/global/.hidden/x.md": b"x"}
    _refused(svc, _zip(tmp_path / "e.zip", members, _manifest(members)), "unsafe_path")


def test_symlinks_in_an_archive_are_refused(svc: MemoryService, tmp_path: Path) -> None:
    path = tmp_path / "e.zip"
    with zipfile.ZipFile(path, "w") as zf:
        info = zipfile.ZipInfo("stores/global/knowledge/inbox/link.md")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
        zf.writestr("manifest.json", json.dumps(_manifest({})))
    _refused(svc, path, "symlink")


def test_a_corrupt_zip_is_refused(svc: MemoryService, tmp_path: Path) -> None:
    good = _zip(tmp_path / "good.zip", GOOD, _manifest(GOOD))
    bad = tmp_path / "bad.zip"
    bad.write_bytes(good.read_bytes()[:-40])
    _refused(svc, bad, "corrupt")


def test_a_member_compressed_with_a_method_zipfile_cannot_read_is_refused_by_name(
    svc: MemoryService, tmp_path: Path
) -> None:
    # Method 99 (WinZip AES): the member's method field says it, in its local header and the
    # central directory; the refusal names the member and the method, before anything is written.
    good = _zip(tmp_path / "good.zip", GOOD, _manifest(GOOD)).read_bytes()
    name = next(iter(GOOD)).encode()
    data = bytearray(good)
    for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        at = data.index(signature + b"", 0)
        while data[at + (30 if signature == b"PK\x03\x04" else 46) :].find(name) != 0:
            at = data.index(signature, at + 4)
        data[at + offset : at + offset + 2] = (99).to_bytes(2, "little")
    bad = tmp_path / "aes.zip"
    bad.write_bytes(bytes(data))
    refused = _refused(svc, bad, "corrupt")
    assert "compression method 99" in str(refused) and name.decode() in str(refused)


def test_a_member_that_does_not_match_the_manifest_is_refused(svc: MemoryService, tmp_path: Path) -> None:
    manifest = _manifest(GOOD)
    members = {k: v + b"tampered" for k, v in GOOD.items()}
    _refused(svc, _zip(tmp_path / "e.zip", members, manifest), "checksum")


def test_an_oversize_member_is_refused(tmp_path: Path) -> None:
    settings = Settings.load(tmp_path / "h", memory={"max_file_bytes": 2048})
    members = {"stores/global/knowledge/inbox/big.md": b"x" * 4096}
    with MemoryService(tmp_path / "h", settings=settings) as svc:
        _refused(svc, _zip(tmp_path / "e.zip", members, _manifest(members)), "too_large")


def test_an_export_with_many_files_imports_though_its_manifest_is_over_the_file_cap(tmp_path: Path) -> None:
    # The manifest grows with the number of files (about 200 bytes each): an export of some 20,000
    # facts had a manifest over the default 4 MiB max_file_bytes, and its own import refused it.
    settings = Settings.load(tmp_path / "src", memory={"max_file_bytes": 2048})
    with MemoryService(tmp_path / "src", settings=settings) as src:
        for i in range(30):
            src.remember(f"Fact number {i} of a long-lived store.", store=GLOBAL_STORE)
        report = src.export_memory(tmp_path / "e.zip")
    with zipfile.ZipFile(tmp_path / "e.zip") as zf:
        assert zf.getinfo("manifest.json").file_size > 2048
    settings = Settings.load(tmp_path / "dst", memory={"max_file_bytes": 2048})
    with MemoryService(tmp_path / "dst", settings=settings) as dst:
        assert dst.import_memory(tmp_path / "e.zip").counts == {"created": report.files}
        assert dst.store_info(GLOBAL_STORE).fact_count == 30


def test_an_oversize_manifest_is_still_refused(svc: MemoryService, tmp_path: Path) -> None:
    manifest = {**_manifest(GOOD), "padding": "x" * (65 * 1024 * 1024)}
    _refused(svc, _zip(tmp_path / "e.zip", GOOD, manifest), "too_large")


def test_a_file_that_is_also_a_folder_is_refused(svc: MemoryService, tmp_path: Path) -> None:
    members = {"stores/global/rules": b"a file", "stores/global/rules/rules.md": b"- a rule\n"}
    _refused(svc, _zip(tmp_path / "e.zip", members, _manifest(members)), "corrupt")


def test_a_zip_without_a_manifest_is_an_unknown_format(svc: MemoryService, tmp_path: Path) -> None:
    _refused(svc, _zip(tmp_path / "e.zip", GOOD), "unknown_format")


def test_a_broken_json_line_is_refused_with_its_number(
    filled: MemoryService, svc: MemoryService, tmp_path: Path
) -> None:
    out = tmp_path / "e.jsonl"
    filled.export_memory(out, format="jsonl")
    lines = out.read_bytes().splitlines()
    lines.insert(2, b'{"record": "file", "store": ')
    out.write_bytes(b"\n".join(lines) + b"\n")
    error = _refused(svc, out, "bad_json")
    assert error.line == 3


def test_an_unknown_file_is_refused(svc: MemoryService, tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    with pytest.raises(InvalidImport) as info:
        svc.import_memory(path)
    assert info.value.reason == "unknown_format"
    with pytest.raises(InvalidImport) as info:
        svc.import_memory(tmp_path / "missing.zip")
    assert info.value.reason == "not_found"


# -- the CLI -----------------------------------------------------------------------------------
def test_cli_export_then_import_dry_run_then_import(
    filled: MemoryService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli.zip"
    assert main(["--home", str(filled.home), "export", "--all", "-o", str(out)]) == 0
    assert "exported 7 files" in capsys.readouterr().out
    fresh = tmp_path / "fresh"
    assert main(["--home", str(fresh), "import", str(out), "--dry-run"]) == 0
    assert "would write 7 file(s)" in capsys.readouterr().out
    assert not (fresh / "memory").exists() or not any((fresh / "memory").rglob("*.md"))
    assert main(["--home", str(fresh), "import", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["written"] == 7
    assert main(["--home", str(fresh), "import", str(out)]) == 0
    assert "wrote 0 file(s) (7 unchanged)" in capsys.readouterr().out


def test_cli_reports_a_refused_archive(
    svc: MemoryService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    members = {**GOOD, "../evil.md": b"x"}
    path = _zip(tmp_path / "e.zip", members, _manifest(members))
    assert main(["--home", str(svc.home), "import", str(path)]) == 1
    assert "INVALID_INPUT" in capsys.readouterr().err


def test_export_skips_symlinks_and_temp_files(filled: MemoryService, tmp_path: Path) -> None:
    inbox = filled.paths(GLOBAL_STORE).inbox
    (inbox / ".tmp-123-x.part").write_text("half")
    os.symlink("/etc/hostname", inbox / "link.md")
    out = tmp_path / "e.zip"
    report = filled.export_memory(out, stores=[GLOBAL_STORE])
    with zipfile.ZipFile(out) as zf:
        names = zf.namelist()
    assert report.files == 3
    assert not any("link.md" in n or ".tmp-" in n for n in names)


def test_an_export_into_a_folder_that_does_not_exist_is_refused(
    filled: MemoryService, tmp_path: Path
) -> None:
    # A typo in -o's folder created the whole path (mode 0700) and wrote the export there.
    with pytest.raises(InvalidInput) as info:
        filled.export_memory(tmp_path / "no-such" / "deeper" / "backup.zip")
    assert info.value.field == "dest" and "does not exist" in info.value.message
    assert not (tmp_path / "no-such").exists()


def test_import_progress_covers_the_check_pass_too(filled: MemoryService, tmp_path: Path) -> None:
    # The check pass (every entry's secret scan, before any write) took minutes on a 30,000-file
    # archive with no progress at all: the bar started only with the writes.
    filled.export_memory(tmp_path / "e.zip")
    with MemoryService(tmp_path / "fresh") as fresh:
        calls: list[tuple[int, int, bool]] = []

        def progress(done: int, total: int, entry: object) -> None:
            calls.append((done, total, fresh.settings.memory_dir.exists()))

        report = fresh.import_memory(tmp_path / "e.zip", progress=progress)
        steps = 2 * len(report.entries)
        assert [(d, t) for d, t, _ in calls] == [(n, steps) for n in range(1, steps + 1)]
        assert not any(wrote for _, _, wrote in calls[: steps // 2])  # checked before any write
        dry: list[tuple[int, int]] = []
        fresh.import_memory(tmp_path / "e.zip", dry_run=True, progress=lambda d, t, e: dry.append((d, t)))
        assert dry == [(n, len(report.entries)) for n in range(1, len(report.entries) + 1)]


def test_the_async_facade_exports_and_imports(filled: MemoryService, tmp_path: Path) -> None:
    async def run() -> None:
        out = tmp_path / "async.zip"
        async with AsyncMemoryService(filled) as source:
            assert (await source.export_memory(out)).files == 7
        with MemoryService(tmp_path / "fresh") as fresh:
            async with AsyncMemoryService(fresh) as target:
                assert (await target.import_memory(out)).written == 7
            assert all_facts(fresh) == all_facts(filled)

    asyncio.run(run())
