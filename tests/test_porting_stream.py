"""Export and import of many files: the export writes each member once, the import reads one
member at a time, names the file a check refuses, and refuses a member that is, on macOS or
Windows, a file already in the store under another case or normalisation."""

from __future__ import annotations

import io
import zipfile
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import test_porting

from coffer_memory import MemoryService
from coffer_memory._porting import export
from coffer_memory._store.paths import GLOBAL_STORE

filled = test_porting.filled  # a home with facts in two stores (7 files)


class _Seeks(io.BytesIO):
    """A seekable file that counts the seeks made while it is written."""

    def __init__(self) -> None:
        super().__init__()
        self.seeks = 0

    def seek(self, *args: Any) -> int:
        self.seeks += 1
        return super().seek(*args)


# -- 1. export: each member written once --------------------------------------------------------
def test_a_zip_export_writes_each_member_once_without_seeking_back(
    filled: MemoryService, tmp_path: Path
) -> None:
    # Streamed to a file, zipfile wrote a member's header, its data, then sought back to rewrite
    # the header (each seek a flush and a system call): the 10k export's regression of session 14.
    out = _Seeks()
    paths = [filled.paths(name) for name in filled.porting.stores.names()]
    written = export.write_zip(out, paths, lambda name: nullcontext(), 1 << 20)
    assert written.files == 7
    assert out.seeks == 0
    (tmp_path / "e.zip").write_bytes(out.getvalue())
    with zipfile.ZipFile(tmp_path / "e.zip") as zf:
        assert zf.testzip() is None and len(zf.namelist()) == 8
    with MemoryService(tmp_path / "fresh") as fresh:
        assert fresh.import_memory(tmp_path / "e.zip").written == 7
    assert GLOBAL_STORE in written.stores
