"""``coffer doctor``: the index compared with the files, broken files, the grep backend."""

from __future__ import annotations

from typing import TYPE_CHECKING

import apsw

from .models import BrokenFile, DoctorReport
from .plugins.builtin.grep import find_ripgrep
from .store.files import FactParseError, parse_fact, read_bytes, scan_markdown

if TYPE_CHECKING:
    from .stores import StoresMixin


def run_doctor(svc: StoresMixin) -> DoctorReport:
    """Check every store of ``svc``'s home (reconciling it first, as any read does)."""
    broken: list[BrokenFile] = []
    mismatches: list[str] = []
    infos = svc.stores()
    for info in infos:
        sp = svc.paths(info.name)
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
        rows = svc.db.rows("SELECT path FROM documents WHERE resource_name = ?", (info.name,))
        indexed = {str(r[0]) for r in rows}
        mismatches += [f"{info.name}: not indexed: {p}" for p in sorted(on_disk - indexed)]
        mismatches += [f"{info.name}: indexed but missing on disk: {p}" for p in sorted(indexed - on_disk)]
    return DoctorReport(
        home=svc.home,
        grep_backend=svc.retrieval.grep.name,
        ripgrep_path=find_ripgrep(),
        sqlite_version=apsw.sqlite_lib_version(),
        stores=tuple(infos),
        broken=tuple(broken),
        index_mismatches=tuple(mismatches),
    )
