"""``coffer doctor``: the index compared with the files, broken files, the grep backend."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import apsw

from .indexing import IndexHandle
from .models import BrokenFile, DoctorReport, StoreInfo
from .plugins.builtin.grep import find_ripgrep
from .store.files import FactParseError, parse_fact, read_bytes, scan_markdown
from .store.paths import StorePaths


def run_doctor(
    home: Path, index: IndexHandle, paths: Sequence[StorePaths], infos: Sequence[StoreInfo]
) -> DoctorReport:
    """Check every store (``paths[i]`` belongs to ``infos[i]``, already reconciled as any read does)."""
    broken: list[BrokenFile] = []
    mismatches: list[str] = []
    for info, sp in zip(infos, paths, strict=True):
        files, _ = scan_markdown(sp.root, sp.recall_dirs())
        on_disk: set[str] = set()
        for rel in sorted(files):
            path = sp.root / rel
            if not sp.is_recall_file(path):
                continue
            try:
                data, st = read_bytes(path)
                parse_fact(data, store=info.name, relpath=rel, mtime=st.st_mtime)
            except FactParseError as exc:
                broken.append(BrokenFile(store=info.name, path=path, error=str(exc)))
                continue
            except OSError:
                continue
            on_disk.add(str(path))
        rows = index.db.rows("SELECT path FROM documents WHERE resource_name = ?", (info.name,))
        indexed = {str(r[0]) for r in rows}
        mismatches += [f"{info.name}: not indexed: {p}" for p in sorted(on_disk - indexed)]
        mismatches += [f"{info.name}: indexed but missing on disk: {p}" for p in sorted(indexed - on_disk)]
    return DoctorReport(
        home=home,
        grep_backend=index.retrieval.grep.name,
        ripgrep_path=find_ripgrep(),
        sqlite_version=apsw.sqlite_lib_version(),
        stores=tuple(infos),
        broken=tuple(broken),
        index_mismatches=tuple(mismatches),
        links=tuple(link for sp in paths for link in store_links(sp.root)),
    )


def store_links(root: Path) -> list[Path]:
    """Every symbolic link under a store folder (files and folders; none is ever followed)."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            path = Path(folder) / name
            if path.is_symlink():
                found.append(path)
    return found
