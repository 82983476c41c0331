"""The zip-bomb ratio check counts the archive file's size, not its members' compressed bytes
(attack6, session 14): a member stored uncompressed (or bytes zipfile skips) raised the "packed"
side at will. The check now judges each member by its own compressed size."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import zipfile
from pathlib import Path

import pytest

from coffer_memory import InvalidImport
from coffer_memory._porting.archive import read_zip

MANIFEST = {"format": "coffer-export", "format_version": 1}
FACT = b"---\ntitle: plain\n---\na plain fact\n"


def test_a_stored_member_does_not_carry_a_zip_bomb_past_the_ratio_check(tmp_path: Path) -> None:
    body = FACT + b"\n" * 3_900_000
    members = {f"knowledge/inbox/f{i}.md": body for i in range(20)}
    # 800 KB of random text, stored: 78 MB unpack from under 900 KB; 10 MB of it reaches the 1 GiB cap.
    members["knowledge/inbox/padding.md"] = FACT + base64.b64encode(os.urandom(600_000))
    files = [
        {"path": f"stores/global/{rel}", "sha256": hashlib.sha256(d).hexdigest()}
        for rel, d in members.items()
    ]
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr("manifest.json", json.dumps({**MANIFEST, "files": files}))
        for rel, data in members.items():
            kind = zipfile.ZIP_STORED if rel.endswith("padding.md") else zipfile.ZIP_DEFLATED
            z.writestr(f"stores/global/{rel}", data, compress_type=kind)
    assert bomb.stat().st_size < 900_000
    with pytest.raises(InvalidImport) as caught:  # read_zip alone: a dry run of 78 MB of facts takes minutes
        read_zip(bomb, 4 << 20)
    assert caught.value.details["reason"] == "too_large" and "zip bomb" in caught.value.message
