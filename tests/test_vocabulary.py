"""One vocabulary: the faces derive their limits and names from ``coffer_memory.vocabulary``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import coffer_memory_fastapi
import coffer_memory_mcp
from coffer_memory import vocabulary
from coffer_memory.vocabulary import RETRIEVAL_MODES

FACES = [Path(coffer_memory_fastapi.__file__).parent, Path(coffer_memory_mcp.__file__).parent]
BOUND_KEYWORDS = {"le", "lt", "ge", "gt", "max_length", "min_length"}
RANGE_IN_TEXT = re.compile(r"\b1\s*(?:-|to|…|\.\.)\s*(\d{2,})\b")


def restated_limits(source: str, name: str) -> list[str]:
    """Limits written as literals: ``le=500`` and the like (0 and 1 are bounds, not limits),
    ``"1-500"`` in a description, and the retrieval modes spelled out in a ``Literal``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.keyword) and node.arg in BOUND_KEYWORDS:
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, int) and value.value > 1:
                found.append(f"{name}:{node.value.lineno} {node.arg}={value.value}")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and RANGE_IN_TEXT.search(node.value)
        ):
            found.append(f"{name}:{node.lineno} {node.value!r}")
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == "Literal"
        ):
            names = {e.value for e in ast.walk(node.slice) if isinstance(e, ast.Constant)}
            if set(RETRIEVAL_MODES) <= names:
                found.append(f"{name}:{node.lineno} Literal of the retrieval modes")
    return found


def test_no_face_restates_a_limit() -> None:
    offenders = []
    for root in FACES:
        for path in sorted(root.rglob("*.py")):
            offenders += restated_limits(path.read_text(encoding="utf-8"), str(path.relative_to(root.parent)))
    assert offenders == []


def test_the_check_catches_each_kind_of_restatement() -> None:
    planted = (
        "limit: Annotated[int, Query(ge=1, le=500)] = 50\n"
        "title: str = Field(max_length=200)\n"
        "x = Field(description='Facts per page (1-500).')\n"
        "Mode = Literal['grep', 'keyword', 'vector', 'hybrid']\n"
        "ok = Query(ge=0, min_length=1, le=MAX_LIST_LIMIT)\n"
    )
    assert len(restated_limits(planted, "planted")) == 4


def test_the_rest_schema_carries_the_core_limits() -> None:
    from fastapi.testclient import TestClient

    from coffer_memory import MemoryService
    from coffer_memory_fastapi import create_app

    with MemoryService() as svc, TestClient(create_app(svc)) as client:
        spec = client.get("/openapi.json").json()
    fact_in = spec["components"]["schemas"]["FactIn"]["properties"]
    assert fact_in["title"]["anyOf"][0]["maxLength"] == vocabulary.MAX_TITLE_CHARS
    listing = spec["paths"]["/api/v1/agents/{name}/transcripts"]["get"]["parameters"]
    limit = next(p for p in listing if p["name"] == "limit")
    assert limit["schema"]["maximum"] == vocabulary.MAX_TRANSCRIPT_LIST_LIMIT
