"""A bounded property run over every write path (issue #12, "Show it").

Whatever text arrives (lone surrogates, NUL, control characters, CJK, Markdown that looks like
frontmatter, FTS syntax, secrets, text at and past the limits), each write either succeeds and
leaves a 0600 file that parses back to what the receipt says, or fails with a typed
``CofferError`` and leaves the store exactly as it was. No temp file survives either way, and
recall over any query text answers without an untyped error.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coffer_memory import CofferError, MemoryService
from coffer_memory._store.scan import TEMP_PREFIX

# Codes a write may answer bad input with; anything else (or an untyped exception) is a bug.
INPUT_CODES = {"INVALID_INPUT", "MEMORY_REJECTED"}

PROPERTY_RUN = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,  # the same examples every run: CI never flakes on a new draw
)

_any_char = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=())
_pieces = st.sampled_from(
    [
        "---\ntitle: x\n---\n",
        "部署前必须先运行数据库迁移，然后清空缓存。",
        "デプロイ",
        "배포 전에",
        '"quoted" AND (NEAR OR) * ^ -',
        "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
        "\x00",
        "\ud800",
        "\r\n",
        "```\n# not a heading\n```",
        "../../etc/passwd",
    ]
)
TEXTS = st.one_of(
    st.text(max_size=300),
    st.text(alphabet=_any_char, max_size=200),
    st.lists(st.one_of(_pieces, st.text(max_size=20)), max_size=8).map("".join),
    st.integers(min_value=0, max_value=3).map(lambda n: "x" * (5_000 * n + 1)),
)
TITLES = st.one_of(st.none(), st.text(max_size=60), st.text(alphabet=_any_char, max_size=30), _pieces)


def _snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` with its sha256 (links are listed, never followed)."""
    found: dict[str, str] = {}
    if not root.exists():
        return found
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            rel = str(path.relative_to(root))
            found[rel] = "link" if path.is_symlink() else hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _temp_files(root: Path) -> list[str]:
    return [name for _f, _d, files in os.walk(root) for name in files if name.startswith(TEMP_PREFIX)]


def _attempt(memory: Path, write: Callable[[], object]) -> object | None:
    """Run one write: a typed refusal leaves ``memory`` untouched; either way no temp file is left."""
    before = _snapshot(memory)
    try:
        result = write()
    except CofferError as exc:
        assert exc.code in INPUT_CODES, f"{exc.code}: {exc.message}"
        assert _snapshot(memory) == before, "a refused write changed the store"
        result = None
    assert _temp_files(memory) == []
    return result


def _private_file(path: Path) -> None:
    mode = os.lstat(path).st_mode
    assert stat.S_ISREG(mode) and stat.S_IMODE(mode) == 0o600


@PROPERTY_RUN
@given(text=TEXTS, title=TITLES, description=TITLES)
def test_remember_and_edit_either_write_a_fact_that_reads_back_or_change_nothing(
    svc: MemoryService, text: str, title: str | None, description: str | None
) -> None:
    memory = svc.settings.memory_dir
    r = _attempt(memory, lambda: svc.remember(text, title=title, description=description, store="global"))
    if r is None:
        return
    path = r.path  # type: ignore[attr-defined]
    _private_file(path)
    got = svc.get_fact(r.fact.id, store="global")  # type: ignore[attr-defined]
    assert got.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert got.fact.body == r.fact.body and got.fact.title == r.fact.title  # type: ignore[attr-defined]
    edited = _attempt(memory, lambda: svc.edit_fact(got.fact.id, body=text[::-1] or "x", store="global"))
    if edited is not None:
        _private_file(path)
        again = svc.get_fact(got.fact.id, store="global")
        assert again.fact.body == edited.fact.body  # type: ignore[attr-defined]


@PROPERTY_RUN
@given(text=TEXTS)
def test_lane_writes_either_land_whole_or_change_nothing(svc: MemoryService, repo: Path, text: str) -> None:
    memory = svc.settings.memory_dir
    for write in (
        lambda: svc.journal_append(text, cwd=repo),
        lambda: svc.append_rule(text, store="global"),
        lambda: svc.save_handoff(text, cwd=repo),
    ):
        lane = _attempt(memory, write)
        if lane is not None:
            path = lane.path  # type: ignore[attr-defined]
            _private_file(path)
            assert lane.after_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()  # type: ignore[attr-defined]
    svc.rules(store="global")
    svc.journal(cwd=repo)
    svc.resume(cwd=repo)


@pytest.fixture
def seeded(svc: MemoryService) -> MemoryService:
    svc.remember("部署前必须先运行数据库迁移，然后清空缓存。", title="deploy", store="global")
    svc.remember("Run the tests with make test before pushing.", title="tests", store="global")
    return svc


@PROPERTY_RUN
@given(query=TEXTS)
def test_recall_of_any_text_answers_or_refuses_with_a_code(seeded: MemoryService, query: str) -> None:
    for mode in ("keyword", "grep"):
        try:
            result = seeded.recall(query, stores=["global"], mode=mode, limit=5)
        except CofferError as exc:
            assert exc.code in INPUT_CODES, f"{mode}: {exc.code}: {exc.message}"
            continue
        assert len(result.hits) <= 5
