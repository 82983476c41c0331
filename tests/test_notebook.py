"""Notebook displays: escaped HTML and Markdown, and records for pandas."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from coffer_memory import MemoryService

EVIL = "<script>alert('x')</script> & <b>bold</b> | pipe"


@pytest.fixture
def filled(svc: MemoryService) -> MemoryService:
    svc.remember(f"Deploy notes: {EVIL}", title="<img src=x onerror=alert(1)>", scope="global", tags=["ops"])
    svc.remember("Deploy with make ship.", title="How to deploy", scope="global")
    return svc


def test_recall_result_records_have_one_column_per_hit_field(filled: MemoryService) -> None:
    res = filled.recall("deploy", stores=["global"], limit=5)
    rows = res.to_records()
    assert len(rows) == 2
    assert list(rows[0]) == ["id", "text", "score", "source", "time", "store", "path", "title"]
    assert all(isinstance(r["path"], str) for r in rows)


def test_page_and_fact_records_flatten_the_fact(filled: MemoryService) -> None:
    page = filled.list_facts(store="global")
    rows = page.to_records()
    assert list(rows[0]) == [
        "id",
        "title",
        "description",
        "body",
        "actor",
        "origin_session_id",
        "created_at",
        "updated_at",
        "tags",
        "store",
        "path",
        "sha256",
    ]
    tagged = next(r for r in rows if r["tags"])
    assert tagged["tags"] == ["ops"] and Path(tagged["path"]).is_file()
    assert page.items[0].to_record() == rows[0]
    assert page.items[0].fact.to_record()["id"] == rows[0]["id"]


def test_html_is_escaped_everywhere(filled: MemoryService) -> None:
    res = filled.recall("deploy", stores=["global"], limit=5)
    page = filled.list_facts(store="global")
    record = next(r for r in page.items if r.fact.tags)
    for shown in (res._repr_html_(), page._repr_html_(), record._repr_html_(), record.fact._repr_html_()):
        assert "<script" not in shown and "<img" not in shown and "<b>" not in shown
        assert "&lt;script&gt;" in shown or "&lt;img" in shown
    assert "<table>" in res._repr_html_() and "mode keyword" in res._repr_html_()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in record._repr_html_()


def test_markdown_is_escaped_and_tables_keep_their_shape(filled: MemoryService) -> None:
    res = filled.recall("deploy", stores=["global"], limit=5)
    page = filled.list_facts(store="global")
    record = next(r for r in page.items if r.fact.tags)
    for shown in (res._repr_markdown_(), page._repr_markdown_(), record._repr_markdown_()):
        assert "<script" not in shown and "<img" not in shown
    table = res._repr_markdown_().splitlines()
    header = next(line for line in table if line.startswith("| title"))
    rows = [line for line in table if line.startswith("| ") and line != header]
    assert len(rows) == 2
    assert all(line.replace("\\|", "").count("|") == header.count("|") for line in rows)  # pipes escaped
    assert "tags" in page._repr_markdown_().splitlines()[2]
    assert "ops" in record._repr_markdown_()


def test_empty_results_still_display(svc: MemoryService) -> None:
    page = svc.list_facts(store="global")
    assert page.to_records() == [] and "0 items" in page._repr_html_()
    svc.remember("something", scope="global")
    res = svc.recall("nothing-like-it", stores=["global"])
    assert res.to_records() == [] and "0 hits, mode" in res._repr_markdown_()


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas is not installed")
def test_pandas_dataframe_has_one_column_per_field(filled: MemoryService) -> None:
    import pandas as pd

    frame = pd.DataFrame(filled.recall("deploy", stores=["global"]).to_records())
    assert frame.shape == (2, 8) and "score" in frame.columns
    facts = pd.DataFrame(filled.list_facts(store="global").to_records())
    assert facts.shape == (2, 12) and set(facts["title"]) >= {"How to deploy"}


def test_an_empty_page_is_a_caption_not_a_broken_table(svc: MemoryService) -> None:
    """An empty page showed ``|  |`` and ``|`` under its caption: a Markdown table with no column
    (and an HTML table with an empty header row); one item was captioned "1 items"."""
    empty = svc.list_facts(store="global")
    assert empty._repr_markdown_() == "**0 items**"
    assert empty._repr_html_() == "<p><strong>0 items</strong></p>"
    svc.remember("Deploy with make ship.", scope="global")
    one = svc.list_facts(store="global")
    assert one._repr_markdown_().startswith("**1 item**\n\n| id |")
    assert "<caption>1 item</caption>" in one._repr_html_()


def test_a_service_shows_the_home_it_works_on(tmp_path: Path) -> None:
    """``svc`` as a cell's last expression showed ``<coffer_memory._service.MemoryService object at
    0x7f...>``: which home a notebook was writing to could not be told from it."""
    from coffer_memory import AsyncMemoryService

    with MemoryService(tmp_path / "home") as svc:
        assert repr(svc) == f"MemoryService(home={str(tmp_path / 'home')!r})"
        assert (
            repr(AsyncMemoryService(svc))
            == f"AsyncMemoryService(MemoryService(home={str(tmp_path / 'home')!r}))"
        )
