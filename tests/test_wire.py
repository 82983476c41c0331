"""The faces' models derive from the core's value objects: a face cannot restate or drift from a
field's type, description or limit that the core owns (``coffer_memory._wire``)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import coffer_memory_fastapi.schemas as rest_schemas
import coffer_memory_mcp.schemas as mcp_schemas
from coffer_memory import JsonShape, MemoryFact, MemoryHit, MemoryService, StoreInfo
from coffer_memory._wire import core_field
from coffer_memory_fastapi import create_app
from coffer_memory_mcp import build_server

# Response models still written by hand: no core value object (errors, operations), or value
# objects whose fields carry no descriptions yet (agents, organize, transcripts). A new response
# model over a core value object must be a JsonShape, not join this list.
HAND_WRITTEN = {
    "AgentChangeOut",
    "AgentListOut",
    "AgentOut",
    "OperationListOut",
    "OperationOut",
    "ScrubbedTranscriptOut",
    "SessionContextOut",
    "TranscriptPageOut",
    # Routes built beside the shapes (store merge and settings, resources, audit, import): their
    # value objects carry no ``about`` metadata yet, so their models are still written by hand.
    "AuditPageOut",
    "ImportReportOut",
    "MemoryStoreConfigOut",
    "ResourceListOut",
    "ResourceOut",
    "StoreMergeOut",
}


def shapes(module: Any) -> list[JsonShape]:
    return [v for v in vars(module).values() if isinstance(v, JsonShape)]


def drift(shape: JsonShape, schema: dict[str, Any]) -> list[str]:
    """Where the JSON schema ``schema`` of ``shape`` differs from what the core says: a property
    missing or extra, or a description that is not the core's (or the declared face-only one's)."""
    props = schema.get("properties", {})
    found = []
    expected = {s.name for s in shape.slots}
    if set(props) != expected:
        found.append(f"{shape.name}: properties {sorted(set(props) ^ expected)} differ from the shape")
    for slot in shape.slots:
        want = slot.core.description if slot.core is not None else shape.extra[slot.name].description
        got = props.get(slot.name, {}).get("description")
        if got != want:
            found.append(f"{shape.name}.{slot.name}: {got!r} is not the core's {want!r}")
    return found


@pytest.fixture(scope="module")
def openapi(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    with MemoryService(tmp_path_factory.mktemp("home")) as svc, TestClient(create_app(svc)) as client:
        spec: dict[str, Any] = client.get("/openapi.json").json()
    return spec


@pytest.fixture(scope="module")
def mcp_tools(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    with MemoryService(tmp_path_factory.mktemp("home")) as svc:
        tools = asyncio.run(build_server(svc).list_tools())
    return {t.name: t for t in tools}


def test_every_rest_shape_in_the_document_carries_the_core_descriptions(openapi: dict[str, Any]) -> None:
    components = openapi["components"]["schemas"]
    offenders = [f for shape in shapes(rest_schemas) for f in drift(shape, components[shape.name])]
    assert offenders == []


def test_every_rest_response_is_a_shape_or_known_hand_written(openapi: dict[str, Any]) -> None:
    derived = {s.name for s in shapes(rest_schemas)}
    responses = set()
    for path in openapi["paths"].values():
        for op in path.values():
            for status, answer in op["responses"].items():
                ref = answer.get("content", {}).get("application/json", {}).get("schema", {}).get("$ref")
                if status.startswith("2") and ref:
                    responses.add(ref.rsplit("/", 1)[1])
    assert responses - derived == HAND_WRITTEN


def test_every_mcp_output_is_a_shape_with_the_core_descriptions(mcp_tools: dict[str, Any]) -> None:
    by_name = {s.name: s for s in shapes(mcp_schemas)}
    outputs = {
        "coffer__recall": mcp_schemas.RECALL,
        "coffer__remember": mcp_schemas.REMEMBER,
        "coffer__list_memory": mcp_schemas.LIST_MEMORY,
        "coffer__resume": mcp_schemas.RESUME,
        "coffer__handoff": mcp_schemas.HANDOFF,
    }
    assert set(mcp_tools) == set(outputs)
    offenders = []
    for name, tool in mcp_tools.items():
        schema = tool.output_schema
        assert schema is not None, name
        offenders += drift(outputs[name], schema)
        for name, sub in schema.get("$defs", {}).items():
            offenders += drift(by_name[name], sub)
    assert offenders == []


def test_the_drift_check_catches_a_restated_description() -> None:
    schema = rest_schemas.HIT.model.model_json_schema()
    schema["properties"]["source"]["description"] = "Which retrieval path found it (grep, keyword...)."
    del schema["properties"]["title"]
    assert len(drift(rest_schemas.HIT, schema)) == 3  # a property missing, its description, source's


def test_every_field_a_face_sends_is_described_in_the_core() -> None:
    undescribed = [
        f"{shape.name}.{slot.name} ({slot.core.owner.__name__}.{slot.core.name})"
        for module in (rest_schemas, mcp_schemas)
        for shape in shapes(module)
        for slot in shape.slots
        if slot.core is not None and not slot.core.description
    ]
    assert undescribed == []


def _limits(schema: dict[str, Any]) -> dict[str, Any]:
    """A property's own limits, and its items', whether or not it is nullable."""
    branch = next((s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"), schema)
    keys = ("maxLength", "minLength", "maxItems")
    out = {k: branch[k] for k in keys if k in branch}
    out |= {f"items.{k}": v for k, v in branch.get("items", {}).items() if k in keys}
    return out


def _core_limits(cls: type, name: str) -> dict[str, Any]:
    meta = core_field(cls, name).metadata
    names = {"max_length": "maxLength", "min_length": "minLength"}
    is_list = name == "tags"
    out = {
        ("maxItems" if is_list and k == "max_length" else names[k]): v for k, v in meta.items() if k in names
    }
    out |= {f"items.{names[k[5:]]}": v for k, v in meta.items() if k.startswith("item_")}
    return out


def test_input_limits_are_the_core_limits_in_both_faces(
    openapi: dict[str, Any], mcp_tools: dict[str, Any]
) -> None:
    components = openapi["components"]["schemas"]
    remember = mcp_tools["coffer__remember"].input_schema["properties"]
    for field in ("title", "description", "tags"):
        want = _core_limits(MemoryFact, field)
        assert want, field
        assert _limits(components["FactIn"]["properties"][field]) == want, field
        assert _limits(components["FactPatch"]["properties"][field]) == want, field
        assert _limits(remember[field]) == want, field
        assert remember[field]["description"] == core_field(MemoryFact, field).description
    label = components["LabelIn"]["properties"]["label"]
    assert label["maxLength"] == core_field(StoreInfo, "label").metadata["max_length"]


def test_a_changed_core_limit_shows_up_in_both_faces(tmp_path: Path) -> None:
    code = """
import asyncio, json, sys
from coffer_memory import vocabulary
vocabulary.MAX_TITLE_CHARS = 123
vocabulary.MAX_TAG_CHARS = 7
from fastapi.testclient import TestClient
from coffer_memory import MemoryService
from coffer_memory_fastapi import create_app
from coffer_memory_mcp import build_server
with MemoryService(sys.argv[1]) as svc:
    with TestClient(create_app(svc)) as client:
        fact_in = client.get("/openapi.json").json()["components"]["schemas"]["FactIn"]["properties"]
    tool = next(t for t in asyncio.run(build_server(svc).list_tools()) if t.name == "coffer__remember")
args = tool.input_schema["properties"]
print(json.dumps([fact_in["title"]["anyOf"][0]["maxLength"], fact_in["tags"]["items"]["maxLength"],
                  args["title"]["anyOf"][0]["maxLength"], args["tags"]["anyOf"][0]["items"]["maxLength"]]))
"""
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == [123, 7, 123, 7]


def test_source_is_described_as_what_recall_puts_there(
    svc: MemoryService, repo: Path, mcp_tools: dict[str, Any]
) -> None:
    svc.remember("deploys go through the release branch", cwd=repo)
    svc.remember("the release branch is cut on Mondays", store="global")
    hits = svc.recall("release branch", cwd=repo).hits
    assert {h.store.split("-")[0] for h in hits} == {"global", "project"}
    for hit in hits:
        scope, _, path = hit.source.partition(":")
        assert scope == ("global" if hit.store == "global" else "project")
        assert Path(path).is_absolute() and Path(path) == hit.path and Path(path).is_file()
    described = core_field(MemoryHit, "source").description
    assert described is not None and "<scope>:<absolute path of the file>" in described
    recall = mcp_tools["coffer__recall"].output_schema
    assert recall["$defs"]["HitOut"]["properties"]["source"]["description"] == described


def test_a_reply_is_byte_for_byte_what_its_model_would_send(svc: MemoryService, repo: Path) -> None:
    from coffer_memory_fastapi.reply import reply

    written = svc.remember("the release branch is cut on Mondays", cwd=repo, tags=["release"])
    found = svc.recall("release branch", cwd=repo)
    page = svc.list_facts(cwd=repo)
    for shape, obj in (
        (rest_schemas.FACT_MUTATION, written),
        (rest_schemas.RECALL, found),
        (rest_schemas.FACT_PAGE, page),
    ):
        validated = shape.model.model_validate(shape.dump(obj))  # also: the dump fits the model
        assert reply(shape, obj).body == validated.model_dump_json().encode(), shape.name
