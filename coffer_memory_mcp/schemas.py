"""The tools' structured outputs and their readable text renderings.

Each output is a ``JsonShape`` over a core value object (``coffer_memory._wire``): its fields'
types and descriptions come from the core, ``SHAPE.model`` is the tool's output schema and
``SHAPE.dump(obj)`` its structured content. ``render_*`` turn that content into the text the
model reads.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from coffer_memory import (
    FactRecord,
    JsonExtra,
    JsonShape,
    LaneWrite,
    MemoryHit,
    MutationResult,
    Page,
    RecallResult,
    ResumeResult,
)

__all__ = [
    "FACT",
    "HANDOFF",
    "HIT",
    "LIST_MEMORY",
    "RECALL",
    "REMEMBER",
    "RESUME",
    "handoff_out",
    "recall_out",
    "render_handoff",
    "render_list",
    "render_recall",
    "render_remember",
    "resume_out",
]

Out = dict[str, Any]


def _untitled(schema: dict[str, Any]) -> None:
    # Every tool schema is sent to the model each session: pydantic's titles ("Created At",
    # "RecallOut") repeat the key or the name and cost context for nothing.
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)


class _Out(BaseModel):
    model_config = ConfigDict(json_schema_extra=_untitled)


HIT = JsonShape(
    "HitOut",
    MemoryHit,
    "One recall hit.",
    ("id", "title", "text", "score", "source", "store", "path", "time"),
    base=_Out,
)
RECALL = JsonShape(
    "RecallOut",
    RecallResult,
    "What ``coffer__recall`` found.",
    ("query", "mode", "fallback", "stores", "cwd", "hits"),
    nested={"hits": HIT},
    extra={
        "query": JsonExtra(str, "The query, as asked."),
        "cwd": JsonExtra(str, "The directory the project was resolved from."),
    },
    base=_Out,
)
REMEMBER = JsonShape(
    "RememberOut",
    MutationResult,
    "The fact ``coffer__remember`` wrote.",
    (
        "id=fact.id",
        "title=fact.title",
        "description=fact.description",
        "store",
        "path",
        "sha256=after_sha256",
        "created_at=fact.created_at",
        "tags=fact.tags",
        "created",
        "redacted=receipt.findings",
    ),
    base=_Out,
)
FACT = JsonShape(
    "FactOut",
    FactRecord,
    "One fact as listed.",
    (
        "id=fact.id",
        "title=fact.title",
        "description=fact.description",
        "text=fact.body",
        "path",
        "sha256",
        "created_at=fact.created_at",
        "updated_at=fact.updated_at",
        "tags=fact.tags",
    ),
    base=_Out,
)
LIST_MEMORY = JsonShape(
    "ListMemoryOut",
    Page,
    "One page of a store's facts, newest first.",
    ("store=target.store", "items", "next_cursor"),
    nested={"items": FACT},
    present=("store",),  # list_facts always says where it listed
    base=_Out,
)
RESUME = JsonShape(
    "ResumeOut",
    ResumeResult,
    "The handoff of the current project and branch.",
    (
        "store",
        "branch",
        "head",
        "found",
        "text=scene.text",
        "saved_at=scene.updated_at",
        "saved_head=scene.head",
        "head_moved",
        "new_commits",
        "summary",
    ),
    extra={"found": JsonExtra(bool, "Whether a handoff was saved for this branch.")},
    base=_Out,
)
HANDOFF = JsonShape(
    "HandoffOut",
    LaneWrite,
    "The handoff ``coffer__handoff`` saved.",
    ("store", "branch", "path", "replaced", "sha256=after_sha256"),
    extra={
        # Short: the five tools' schemas are held under 14,000 characters (tests/test_mcp.py).
        "branch": JsonExtra(str, "Its branch (mid-rebase the rebased one, else 'detached HEAD (...)')"),
        "replaced": JsonExtra(bool, "True when an earlier handoff of this branch was replaced."),
    },
    base=_Out,
)


def recall_out(query: str, cwd: str, res: RecallResult) -> Out:
    """``coffer__recall``'s structured content."""
    return RECALL.dump(res, query=query, cwd=cwd)


def resume_out(res: ResumeResult) -> Out:
    """``coffer__resume``'s structured content."""
    return RESUME.dump(res, found=res.scene is not None)


def handoff_out(res: LaneWrite) -> Out:
    """``coffer__handoff``'s structured content (the write's target says which branch)."""
    branch = res.target.branch if res.target is not None else None  # save_handoff sets it
    return HANDOFF.dump(res, branch=branch, replaced=res.before_sha256 is not None)


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def render_recall(out: Out) -> str:
    """A readable account of a recall for the model."""
    mode = f"mode {out['mode']}" + (", degraded from the mode asked for" if out["fallback"] else "")
    hits = out["hits"]
    if not hits:
        return (
            f"Nothing in memory matches {out['query']!r} ({mode}). If the user tells you, "
            "remember the answer when it will still matter later."
        )
    lines = [f"{_count(len(hits), 'memory', 'memories')} for {out['query']!r}, best first ({mode}):"]
    for n, hit in enumerate(hits, 1):
        lines += ["", f"{n}. {hit['title'] or hit['id']}  [{hit['store']}, id {hit['id']}]"]
        lines += [f"   {line}" for line in hit["text"].strip().splitlines()]
    return "\n".join(lines)


def render_remember(out: Out) -> str:
    """A readable account of a remember for the model."""
    verb = "Remembered" if out["created"] else "Already remembered"
    text = f"{verb} {out['title']!r} in {out['store']} (id {out['id']}).\nFile: {out['path']}"
    if out["redacted"]:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(out["redacted"].items()))
        text += f"\nSecrets redacted before writing: {kinds}."
    return text


def render_list(out: Out, *, first_page: bool = True) -> str:
    """A readable account of a page of facts for the model (``first_page``: no cursor was given).

    Only a first page that is the last too holds every fact of the store; any other says it is
    one page ("1 fact in global" for a page of a store of 500 read as the whole store)."""
    items = out["items"]
    if not items:
        return f"No facts in {out['store']}." if first_page else f"No more facts in {out['store']}."
    count = _count(len(items), "fact", "facts")
    if out["next_cursor"]:
        head = f"A page of {count} from {out['store']}, newest first; more follow (cursor at the end):"
    elif not first_page:
        head = f"The last page of {out['store']}: {count}, newest first:"
    else:
        head = f"{count} in {out['store']}, newest first (all of them):"
    lines = [head]
    for fact in items:
        updated: datetime = fact["updated_at"]
        lines.append(
            f"- {fact['title']} (id {fact['id']}, updated {updated:%Y-%m-%d}): {fact['description']}"
        )
    if out["next_cursor"]:
        lines += ["", f"More: call again with cursor={out['next_cursor']!r}."]
    return "\n".join(lines)


def render_handoff(out: Out) -> str:
    """A readable account of a saved handoff for the model."""
    verb = "Replaced the" if out["replaced"] else "Saved a"
    return f"{verb} handoff for branch {out['branch']!r} in {out['store']}.\nFile: {out['path']}"
