"""``organize``: file every inbox item into a topic document or the rules, one LLM call each.

Per item: up to N candidate topic documents are found by keyword search (no LLM), one
completion merges the item into a candidate, creates a topic, or classifies it as a rule.
The inbox file is deleted only after what replaces it is durable; a crash between the two
steps leaves the item in the inbox (it may be merged again, never lost). Malformed output
skips the item. Then INDEX.md is regenerated, the index reconciled, and over-long rules
files split by topic (one more call).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from .._errors import CofferError
from .._llm import ChatMessage, LLMOutputInvalid, LLMUnavailable, TokenUsage, extract_json
from .._store import lanes as fmt
from .._store.files import FactParseError, format_time, parse_fact, read_bytes
from .._store.paths import StorePaths, slugify
from .._store.writer import Transaction
from ..plugins.hookspecs import LLM
from .models import OrganizeReport, PlannedChange, add_usage
from .prompts import ORGANIZE_SCHEMA, ORGANIZE_SYSTEM, ORGANIZE_TASK, SPLIT_SCHEMA, SPLIT_TASK
from .tools import OrganizeTools
from .topics import merged_tags, read_or_none, render_topic, unified

log = logging.getLogger("coffer_memory._organize")


class _Skip(Exception):
    """This item stays in the inbox."""


def _candidates(t: OrganizeTools, sp: StorePaths, title: str, body: str) -> list[Path]:
    with t.index.lock:
        t.index.reconciler.reconcile(sp.name)
        hits = t.index.retrieval.keyword(sp, f"{title} {body[:2000]}", 30)
    topics = [h.path for h in hits if h.path is not None and h.path.parent == sp.knowledge]
    return topics[: t.settings.organize.candidates]


def _describe(t: OrganizeTools, sp: StorePaths, paths: list[Path]) -> str:
    limit = t.settings.organize.candidate_chars
    parts = []
    for path in paths:
        record = t.facts.record(sp.name, path)
        body = record.fact.body if len(record.fact.body) <= limit else record.fact.body[:limit] + "\n[…]"
        parts.append(
            f"[{path.name}]\ntitle: {record.fact.title}\ndescription: {record.fact.description}\n---\n{body}\n"
        )
    return "\n".join(parts) or "(none yet)"


def _ask(
    llm: LLM, t: OrganizeTools, prompt: str, schema: dict[str, Any], system: str
) -> tuple[Any, TokenUsage]:
    completion = llm.complete(
        [ChatMessage("system", system), ChatMessage("user", prompt)],
        json_schema=schema,
        max_tokens=max(t.settings.llm.max_tokens, 4000),
    )
    return extract_json(completion.text, expect="object"), completion.usage


def _plan_item(
    t: OrganizeTools, llm: LLM, sp: StorePaths, item: Path
) -> tuple[dict[str, Any], list[Path], bytes, TokenUsage]:
    data, _ = read_bytes(item)
    record = t.facts.record(sp.name, item)
    candidates = _candidates(t, sp, record.fact.title, record.fact.body)
    prompt = ORGANIZE_TASK.format(
        name=item.name,
        title=record.fact.title,
        body=record.fact.body,
        candidates=_describe(t, sp, candidates),
    )
    try:
        answer, usage = _ask(llm, t, prompt, ORGANIZE_SCHEMA, ORGANIZE_SYSTEM)
    except LLMOutputInvalid as exc:
        raise _Skip(f"malformed LLM output ({exc.reason})") from exc
    if not isinstance(answer, dict) or answer.get("action") not in ("merge", "create", "rule"):
        raise _Skip("the LLM chose no valid action")
    return answer, candidates, data, usage


def _target(sp: StorePaths, answer: dict[str, Any], candidates: list[Path]) -> Path:
    action = answer["action"]
    if action == "merge":
        names = {p.name: p for p in candidates}
        target = str(answer.get("target") or "")
        if target not in names:
            raise _Skip(f"merge target {target!r} is not one of the candidates")
        return names[target]
    slug = slugify(str(answer.get("slug") or answer.get("title") or ""), fallback="")
    if not slug or slug.lower() == "index":
        raise _Skip("a new topic needs a slug or a title")
    path = sp.topic_file(slug)
    n = 2
    while path.exists():
        path = sp.topic_file(f"{slug}-{n}")
        n += 1
    return path


def _apply(
    t: OrganizeTools,
    sp: StorePaths,
    item: Path,
    item_bytes: bytes,
    answer: dict[str, Any],
    candidates: list[Path],
    dry_run: bool,
) -> PlannedChange:
    action = answer["action"]
    if action == "rule":
        rule = " ".join(str(answer.get("rule") or "").split())
        if not rule:
            raise _Skip("a rule with no text")
        rules = sp.rules_file()
        before = read_or_none(rules)
        after = (before or (fmt.RULES_HEADER + "\n").encode()) + fmt.rule_line(rule)
        change = PlannedChange("rule", item, rules, unified(before, after, "rules/rules.md"))
        with t.writer.transaction(sp.name, dry_run=dry_run) as tx:
            if tx.read(item) != item_bytes:
                raise _Skip("the inbox item changed while the LLM was thinking")
            t.lanes.add_rule(tx, rule, actor="agent")
            _retire_item(tx, item, f"organize: inbox/{item.name} became a rule")
        return change
    body = str(answer.get("body") or "").strip()
    if not body:
        raise _Skip(f"{action} with an empty body")
    target = _target(sp, answer, candidates)
    before = read_or_none(target)
    extra: dict[str, Any] = {}
    title = str(answer.get("title") or "").strip()
    tags: tuple[str, ...] = ()
    if before is not None:
        parsed = parse_fact(before, store=sp.name, relpath=sp.relative(target), mtime=0)
        title = title or parsed.fact.title
        extra = dict(parsed.extra)
        tags = parsed.fact.tags
        if parsed.has_created_at:  # keeps the document's id stable
            extra["created_at"] = format_time(parsed.fact.created_at)
    item_tags = parse_fact(item_bytes, store=sp.name, relpath=sp.relative(item), mtime=0).fact.tags
    after = render_topic(
        title or target.stem, str(answer.get("description") or ""), body, extra, merged_tags(tags, item_tags)
    )
    verb = "merged" if action == "merge" else "created"
    change = PlannedChange(verb, item, target, unified(before, after, sp.relative(target)))
    planned = [] if dry_run else [(target, after)]  # embedded before the lock (``_ahead``)
    with (
        t.index.embedding_ahead(sp.name, lambda: planned),
        t.writer.transaction(sp.name, dry_run=dry_run) as tx,
    ):
        if tx.read(item) != item_bytes:
            raise _Skip("the inbox item changed while the LLM was thinking")
        if tx.read(target) != before:
            raise _Skip(f"{target.name} changed while the LLM was thinking")
        if before is not None:
            tx.archive(target, replaced_by=sp.relative(target))
            tx.write(target, after)
        else:
            tx.create(target, after)
        _retire_item(tx, item, f"organize: {verb} inbox/{item.name} into {target.name}")
    return change


def _retire_item(tx: Transaction, item: Path, line: str) -> None:
    """Delete the inbox file (its replacement is already durable) and log the change."""
    tx.delete(item)
    action, _, detail = line.partition(": ")
    tx.log(action, detail)


def _split_rules(
    t: OrganizeTools, llm: LLM, sp: StorePaths, dry_run: bool
) -> tuple[list[PlannedChange], TokenUsage]:
    changes: list[PlannedChange] = []
    usage = TokenUsage(0, 0)
    main = sp.rules_file()
    data = read_or_none(main)
    if data is None or len(data.decode("utf-8", errors="replace")) <= t.settings.organize.rules_split_chars:
        return changes, usage
    text = data.decode("utf-8", errors="replace")
    originals = [line[2:].strip() for line in text.splitlines() if line.startswith("- ")]
    try:
        answer, usage = _ask(llm, t, SPLIT_TASK.format(rules=text), SPLIT_SCHEMA, ORGANIZE_SYSTEM)
        groups = answer["groups"]
        kept = {" ".join(str(r).split()) for g in groups for r in g["rules"]}
        if not groups or any(" ".join(o.split()) not in kept for o in originals):
            raise _Skip("the split lost a rule")
    except (CofferError, KeyError, TypeError, _Skip) as exc:
        log.warning("rules of %s not split: %s", sp.name, exc)
        return [PlannedChange("skipped", main, None, error=f"rules split: {exc}")], usage
    writes: list[tuple[Path, bytes | None, bytes]] = []
    for group in groups:
        slug = slugify(str(group.get("slug") or group.get("title") or "rules"), fallback="rules")
        path = sp.rules_file(slug if slug != "rules" else "general")
        before = read_or_none(path)
        body = "".join(fmt.rule_line(str(r)).decode() for r in group["rules"])
        after = (before or f"# {group.get('title') or slug}\n\n".encode()) + body.encode()
        writes.append((path, before, after))
        changes.append(PlannedChange("split", main, path, unified(before, after, sp.relative(path))))
    changes.append(PlannedChange("superseded", main, None, unified(data, None, "rules/rules.md")))
    with t.writer.transaction(sp.name, dry_run=dry_run) as tx:
        if tx.read(main) != data:
            return [PlannedChange("skipped", main, None, error="rules.md changed during the split")], usage
        for path, _, after in writes:
            tx.write(path, after)
        tx.archive(main, replaced_by="rules/")
        tx.delete(main)
        tx.log("organize", f"split rules/rules.md into {', '.join(p.name for p, _, _ in writes)}")
    return changes, usage


def organize_store(t: OrganizeTools, llm: LLM | None, store: str, *, dry_run: bool = False) -> OrganizeReport:
    """Run the organizer over one store's inbox (see the module docstring)."""
    sp = t.writer.paths(store)
    if llm is None or not llm.available():
        return OrganizeReport(store=store, status="no_model", dry_run=dry_run)
    items = (
        sorted(p for p in sp.inbox.glob("*.md") if not p.name.startswith(".")) if sp.inbox.is_dir() else []
    )
    changes: list[PlannedChange] = []
    usage = TokenUsage(0, 0)
    for item in items:
        try:
            answer, candidates, data, used = _plan_item(t, llm, sp, item)
            usage = add_usage(usage, used)
            changes.append(_apply(t, sp, item, data, answer, candidates, dry_run))
        except _Skip as exc:
            changes.append(PlannedChange("skipped", item, None, error=str(exc)))
        except LLMUnavailable as exc:
            # Not reached, or refusing: the next item would meet the same. With nothing done
            # yet the pass fails (a non-zero exit, a failed REST operation), as an error, not an
            # "ok" report of every item skipped; after some work it ends with what it did.
            if all(change.action == "skipped" for change in changes):
                raise
            changes.append(PlannedChange("skipped", item, None, error=f"{exc.code}: {exc.message}"))
            break
        except CofferError as exc:  # the model's answer was unusable: leave the item, try the next
            changes.append(PlannedChange("skipped", item, None, error=f"{exc.code}: {exc.message}"))
        except FactParseError as exc:  # a broken inbox or topic file: leave it for a person
            changes.append(PlannedChange("skipped", item, None, error=f"broken frontmatter: {exc}"))
        except OSError as exc:  # the item vanished (deleted by hand meanwhile)
            changes.append(PlannedChange("skipped", item, None, error=str(exc)))
    split, used = _split_rules(t, llm, sp, dry_run)
    changes += split
    usage = add_usage(usage, used)
    report = OrganizeReport(
        store=store,
        status="ok" if items or split else "empty",
        dry_run=dry_run,
        changes=tuple(changes),
        usage=usage,
    )
    if not dry_run:
        with t.writer.transaction(store) as tx:
            t.lanes.write_index(tx)
            tx.reconcile()
            tx.audit(
                "memory_organized",
                None,
                merged=report.count("merged"),
                created=report.count("created"),
                rules_appended=report.rules_appended,
                rules_split=report.count("split"),
                skipped=report.skipped,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
            )
    return report
