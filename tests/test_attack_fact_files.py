"""Fact files that the faces showing a file whole read differently from the rest of coffer.

The indexer and ``get_fact`` read a fact through ``read_bytes`` (a regular file only, no symlink,
never blocking) and replace bytes that are no UTF-8. The web view's fact page (its frontmatter)
and MCP's ``coffer://{store}/facts/{id}`` resource read the same file again with
``Path.read_text``: a stray ``\\xff`` byte, which every other face shows as U+FFFD, was a raw
``UnicodeDecodeError`` there (a ``500 INTERNAL`` page, an MCP resource error), and a file replaced
by a FIFO after the fact was found blocked the reading thread for ever.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from coffer_memory import MemoryService, read_fact_file
from coffer_memory_mcp import build_server


def _with_a_stray_byte(svc: MemoryService) -> tuple[str, Path]:
    fact = svc.remember("kiwis nest in burrows", title="Kiwis", scope="global")
    data = fact.path.read_bytes().replace(b"title: Kiwis", b"title: Kiwis \xff")
    assert b"\xff" in data
    fact.path.write_bytes(data)
    return fact.fact.id, fact.path


def test_the_web_view_shows_a_fact_whose_file_holds_a_byte_that_is_no_utf8(
    svc: MemoryService, client: Any
) -> None:
    fact_id, _ = _with_a_stray_byte(svc)
    assert client.get(f"/api/v1/memory_stores/global/facts/{fact_id}").status_code == 200  # as the API did
    page = client.get(f"/ui/stores/global/facts/{fact_id}")
    assert page.status_code == 200, page.text[:300]
    assert "text/html" in page.headers["content-type"]
    assert "title: Kiwis \ufffd" in page.text and "kiwis nest in burrows" in page.text


@pytest.mark.anyio
async def test_mcp_reads_such_a_fact_as_every_other_face_does(svc: MemoryService) -> None:
    fact_id, _ = _with_a_stray_byte(svc)
    async with Client(build_server(svc)) as client:
        result = await client.read_resource(f"coffer://global/facts/{fact_id}")
    [content] = result.contents
    assert "title: Kiwis \ufffd" in str(content.text)  # type: ignore[union-attr]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_a_fact_file_replaced_by_a_fifo_is_refused_without_blocking(
    svc: MemoryService, tmp_path: Path
) -> None:
    fifo = tmp_path / "fact.md"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="FIFO"):
        read_fact_file(fifo)  # Path.read_text waited for a writer for ever
    link = tmp_path / "link.md"
    link.symlink_to(tmp_path / "elsewhere.md")
    (tmp_path / "elsewhere.md").write_text("x")
    with pytest.raises(OSError):
        read_fact_file(link)
