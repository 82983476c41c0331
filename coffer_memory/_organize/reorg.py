"""``reorganize``: a bounded tool loop in which the LLM merges, splits and retitles topic documents.

Our own loop, no agent framework: each step the model answers one JSON tool call
(list_topics, read_topic, write_topic, supersede_topic, done); the result goes back as the
next user message. Every overwrite or retirement archives the old version to superseded/
first. ``dry_run`` runs the same loop against an in-memory copy and returns diffs.
"""

from __future__ import annotations

import json
import logging
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from .._errors import CofferError, InvalidInput
from .._llm import ChatMessage, LLMOutputInvalid, LLMUnavailable, TokenUsage, extract_json
from .._store import lanes as fmt
from .._store.files import FactParseError, parse_fact
from .._store.paths import StorePaths
from .._store.writer import Transaction
from ..plugins.hookspecs import LLM
from .models import PlannedChange, ReorgReport, add_usage
from .prompts import REORG_SCHEMA, REORG_SYSTEM
from .tools import OrganizeTools
from .topics import read_or_none, render_topic, unified

log = logging.getLogger("coffer_memory.reorg")
RESULT_CHARS = 12_000


class _Workspace:
    """Topic documents as the loop sees them; a dry run keeps one preview transaction for the whole loop."""

    def __init__(self, t: OrganizeTools, sp: StorePaths, dry_run: bool) -> None:
        self.t, self.sp, self.dry_run = t, sp, dry_run
        self.preview = t.writer.dry_run(sp.name) if dry_run else None
        self.original: dict[str, bytes | None] = {}
        self.changes: list[PlannedChange] = []

    def _tx(self) -> AbstractContextManager[Transaction]:
        if self.preview is not None:
            return nullcontext(self.preview)
        return self.t.writer.transaction(self.sp.name)

    def names(self) -> list[str]:
        on_disk = {p.name for p in fmt.topic_files(self.sp)}
        pending = self.preview.pending if self.preview is not None else {}
        topics = {p.name: d for p, d in pending.items() if p.parent == self.sp.knowledge}
        return sorted(
            (on_disk | {n for n, d in topics.items() if d is not None})
            - {n for n, d in topics.items() if d is None}
        )

    def path(self, name: str) -> Path:
        if not name.endswith(".md"):
            name += ".md"
        return self.sp.topic_file(name.removesuffix(".md"))

    def read(self, name: str) -> bytes | None:
        path = self.path(name)
        return self.preview.read(path) if self.preview is not None else read_or_none(path)

    def _remember_original(self, path: Path) -> None:
        self.original.setdefault(path.name, read_or_none(path))

    def write(self, name: str, data: bytes) -> None:
        path = self.path(name)
        self._remember_original(path)
        planned = [] if self.preview is not None else [(path, data)]  # embedded before the lock
        with self.t.index.embedding_ahead(self.sp.name, lambda: planned), self._tx() as tx:
            if tx.read(path) is not None:
                tx.archive(path, replaced_by=self.sp.relative(path))
            tx.write(path, data)
            tx.log("reorg", f"wrote {path.name}")

    def supersede(self, name: str, replaced_by: str) -> None:
        path = self.path(name)
        if self.read(name) is None:
            raise InvalidInput(f"{path.name} does not exist")
        self._remember_original(path)
        with self._tx() as tx:
            tx.archive(path, replaced_by=replaced_by)
            tx.delete(path)
            tx.log("reorg", f"superseded {path.name} by {replaced_by}")

    def diffs(self) -> list[PlannedChange]:
        out = []
        for name, before in sorted(self.original.items()):
            path = self.sp.knowledge / name
            after = self.preview.read(path) if self.preview is not None else read_or_none(path)
            if after == before:
                continue
            action = "superseded" if after is None else "wrote"
            out.append(PlannedChange(action, None, path, unified(before, after, f"knowledge/{name}")))
        return out


def _run_tool(ws: _Workspace, call: dict[str, Any]) -> str:
    tool = call.get("tool")
    if tool == "list_topics":
        rows = []
        for name in ws.names():
            data: bytes = ws.read(name) or b""
            fact = parse_fact(data, store=ws.sp.name, relpath=f"knowledge/{name}", mtime=0).fact
            rows.append(
                {"name": name, "title": fact.title, "description": fact.description, "chars": len(fact.body)}
            )
        return json.dumps(rows, ensure_ascii=False)
    name = str(call.get("name") or "")
    if tool == "read_topic":
        found = ws.read(name)
        if found is None:
            return f"error: {name} does not exist"
        body = parse_fact(found, store=ws.sp.name, relpath=f"knowledge/{name}", mtime=0).fact.body
        return body if len(body) <= RESULT_CHARS else body[:RESULT_CHARS] + "\n[… truncated]"
    if tool == "write_topic":
        body = str(call.get("body") or "").strip()
        if not body:
            return "error: body is empty"
        ws.write(name, render_topic(str(call.get("title") or name), str(call.get("description") or ""), body))
        return f"ok: wrote {ws.path(name).name}"
    if tool == "supersede_topic":
        ws.supersede(name, str(call.get("replaced_by") or ""))
        return f"ok: {ws.path(name).name} retired"
    return f"error: unknown tool {tool!r}"


def reorganize_store(t: OrganizeTools, llm: LLM | None, store: str, *, dry_run: bool = False) -> ReorgReport:
    """Run the bounded reorg loop over one store's topic documents."""
    sp = t.writer.paths(store)
    if llm is None or not llm.available():
        return ReorgReport(store=store, status="no_model", dry_run=dry_run)
    if not fmt.topic_files(sp):
        return ReorgReport(store=store, status="empty", dry_run=dry_run)
    budget = t.settings.organize.reorg_max_steps
    ws = _Workspace(t, sp, dry_run)
    messages = [ChatMessage("system", REORG_SYSTEM.format(steps=budget)), ChatMessage("user", "Begin.")]
    usage = TokenUsage(0, 0)
    summary = "step budget exhausted"
    steps = 0
    for steps in range(1, budget + 1):  # steps is reported after the loop
        try:
            completion = llm.complete(
                messages, json_schema=REORG_SCHEMA, max_tokens=max(t.settings.llm.max_tokens, 4000)
            )
        except CofferError as exc:
            if steps == 1 and isinstance(exc, LLMUnavailable):  # not reached: an error, not an "ok"
                raise
            summary = f"stopped: {exc.code}: {exc.message}"
            break
        usage = add_usage(usage, completion.usage)
        messages.append(ChatMessage("assistant", completion.text))
        try:
            call = extract_json(completion.text, expect="object")
            if call.get("tool") == "done":
                summary = str(call.get("summary") or "done")
                break
            result = _run_tool(ws, call)
        except (LLMOutputInvalid, InvalidInput, AttributeError, FactParseError) as exc:
            result = f"error: {exc}"
        messages.append(ChatMessage("user", result))
    changes = ws.diffs()
    if not dry_run:
        with t.writer.transaction(store) as tx:
            t.lanes.write_index(tx)
            tx.reconcile()
            tx.audit(
                "memory_reorganized",
                None,
                steps=steps,
                changes=len(changes),
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
            )
    return ReorgReport(
        store=store,
        status="ok",
        dry_run=dry_run,
        steps=steps,
        changes=tuple(changes),
        summary=summary,
        usage=usage,
    )
