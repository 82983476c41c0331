"""The MCP reference memory server's knowledge graph (``memory.jsonl``, formerly ``memory.json``).

One JSON object per line: ``{"type": "entity", "name", "entityType", "observations": [...]}`` or
``{"type": "relation", "from", "to", "relationType"}`` (modelcontextprotocol/servers,
``src/memory``). Each entity becomes one fact: its observations as a list, its relations (both
ways) as ``[[wiki links]]``, its entity type as a tag. The entity name is the original id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .._errors import InvalidImport
from .._store.files import clean_tag
from .archive import json_lines
from .common import Plan, content_sha
from .models import FactItem, Item, Provenance, Skipped

KIND = "mcp-memory"


def _strings(value: object) -> list[str] | None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return list(value)


def _summary(entity_type: str, observations: list[str]) -> str:
    text = " ".join(f"{entity_type}: {'; '.join(observations)}".split())
    return text if len(text) <= 200 else text[:199].rstrip() + "…"


def plan(path: Path, store: str, max_bytes: int) -> Plan:
    """The facts of a knowledge-graph file, for ``store``."""
    source = str(path)
    entities: dict[str, dict[str, Any]] = {}
    relations: list[tuple[str, str, str]] = []
    for number, record in json_lines(path, max_bytes):
        kind = record.get("type")
        if kind == "entity":
            name, etype, obs = (
                record.get("name"),
                record.get("entityType"),
                _strings(record.get("observations")),
            )
            if not isinstance(name, str) or not isinstance(etype, str) or obs is None:
                raise InvalidImport(
                    "bad_json",
                    f"line {number}: an entity needs name, entityType, observations",
                    source=source,
                    line=number,
                )
            entities.setdefault(
                name, {"entityType": etype, "observations": obs}
            )  # the server keeps the first
        elif kind == "relation":
            ends = (record.get("from"), record.get("to"), record.get("relationType"))
            if not all(isinstance(v, str) for v in ends):
                raise InvalidImport(
                    "bad_json",
                    f"line {number}: a relation needs from, to, relationType",
                    source=source,
                    line=number,
                )
            relations.append((str(ends[0]), str(ends[1]), str(ends[2])))
    if not entities and not relations:
        raise InvalidImport(
            "unknown_format", "no entities or relations: not an MCP memory file", source=source
        )
    items: list[Item] = []
    skipped: list[Skipped] = []
    for name, entity in entities.items():
        outgoing = sorted({(t, r) for f, t, r in relations if f == name})
        incoming = sorted({(f, r) for f, t, r in relations if t == name})
        lines = [f"# {name}", "", f"Type: {entity['entityType']}", ""]
        lines += [f"- {o}" for o in entity["observations"]]
        if outgoing or incoming:
            lines += ["", "## Relations", ""]
            lines += [f"- {r} [[{t}]]" for t, r in outgoing]
            lines += [f"- [[{f}]] {r} this" for f, r in incoming]
        key = json.dumps([name, entity, outgoing, incoming], ensure_ascii=False, sort_keys=True)
        tag = clean_tag(entity["entityType"])
        items.append(
            FactItem(
                store=store,
                title=" ".join(name.split())[:200] or "entity",
                body="\n".join(lines),
                description=_summary(entity["entityType"], entity["observations"]),
                tags=(tag,) if tag else (),
                provenance=Provenance(source=KIND, path=source, original_id=name, sha256=content_sha(key)),
            )
        )
    known = set(entities)
    for f, t, r in relations:
        if f not in known and t not in known:
            skipped.append(
                Skipped(source=f"{source}#{f}->{t}", reason=f"relation {r!r} between unknown entities")
            )
    return items, skipped
