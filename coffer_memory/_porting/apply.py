"""Writing planned import items through the Writer's transaction, one transaction per store.

Every text passes the transaction's content checks (secrets redacted or rejected). An entry seen
before (same source kind and original id, same content sha256) writes nothing; one whose source
changed is rewritten only while the copy here is as it was imported, else it is a conflict and
the copy is kept. A dry run is the same code in the Writer's dry-run mode.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

import attrs

from .._errors import InvalidImport, InvalidInput, MemoryRejected
from .._jsontext import loads as json_loads
from .._models import MemoryFact
from .._store.files import FactParseError, fact_id_for, now_utc, parse_fact, render_fact, sha256_bytes
from .._store.identity import STORE_FILE, StoreIdentity
from .._store.paths import MAX_SLUG_CHARS, slugify
from .._store.rules import IMPORT_MARK
from .._store.scan import scan_markdown
from .._store.writer import Transaction, Writer
from ..vocabulary import MAX_TAGS
from .archive import STORES_DIR, fold
from .models import PROVENANCE_KEY, FactItem, FileItem, ImportEntry, Item, Provenance, RuleItem

Progress = Callable[[int, int, ImportEntry], None]
# What the content checks answered for one text of one store: the text to write (None: as it
# was; bytes: changed, and not kept, so checked again) and what they found.
_AGAIN = b""
_Checked = tuple[str | bytes | None, dict[str, int]]
# The planned files of one item: each path, and what reads the bytes the write will hold.
_Planned = list[tuple[Path, Callable[[], bytes]]]
_RULE_HEAD = re.compile(r"\A" + re.escape(IMPORT_MARK) + r"(\{.*?\}) -->\n")


def _body_sha(body: str) -> str:
    return sha256_bytes(body.strip("\n").encode("utf-8"))


@attrs.frozen
class _Imported:
    path: Path
    meta: dict[str, Any]
    body_sha: str
    fact: MemoryFact
    extra: dict[str, Any]
    has_created: bool


# Items a run that writes applies under one hold of the store's lock (see ``Applier.run``), and
# the bytes of a coffer export's files (a dry run holds them, and so does embedding ahead).
TRANSACTION_ITEMS = 128
TRANSACTION_BYTES = 4 << 20


class CheckMemo:
    """The content checks' answers within one import, by store, field and text.

    An import runs its writes twice, as a dry run (every check raises there, before any write)
    and then for real: the secret scan of the second pass repeated the first's, half of a large
    import's time. With one memo for both passes each text is scanned once.
    """

    def __init__(self) -> None:
        self._done: dict[tuple[str, str, str], _Checked] = {}

    @staticmethod
    def _key(value: str | bytes) -> str:
        # A file's bytes by their sha256: the memo of a large archive would hold all of them.
        return "b:" + sha256_bytes(value) if isinstance(value, bytes) else "s:" + value

    def get(self, store: str, field: str, value: str | bytes) -> _Checked | None:
        """What the checks answered for ``value``, or None when it was not checked yet (or changed
        bytes, which are not kept: checked again)."""
        done = self._done.get((store, field, self._key(value)))
        return None if done is None or isinstance(done[0], bytes) else done

    def put(
        self, store: str, field: str, value: str | bytes, result: str | bytes, found: dict[str, int]
    ) -> None:
        """Keep the checks' answer (a text itself only when they changed it; bytes never)."""
        changed = None if result == value else (_AGAIN if isinstance(value, bytes) else result)
        self._done[(store, field, self._key(value))] = (changed, found)


class Applier:
    """Applies a plan to the stores of one home (``dry_run``: plans only, writes nothing).

    ``source`` names the import in errors; ``memo`` carries the checks' answers from a dry run
    to the real run of the same plan.
    """

    def __init__(
        self,
        writer: Writer,
        *,
        dry_run: bool,
        progress: Progress | None = None,
        ahead: Callable[[str, Callable[[], list[tuple[Path, bytes]]]], AbstractContextManager[None]]
        | None = None,
        source: str = "",
        memo: CheckMemo | None = None,
    ) -> None:
        self.writer = writer
        self.dry_run = dry_run
        self.progress = progress
        # ``ahead(store, files)`` is entered before each transaction that writes: it embeds the
        # files a dry run planned for its items before the lock (``_ahead``), read by ``files()``
        # only when it embeds.
        self.ahead = ahead
        # A dry run's planned files, by store, one list per item (what ``ahead`` reads); a coffer
        # file's bytes are read again from the archive, not held.
        self.planned: dict[str, list[_Planned]] = {}
        self.source = source
        self.memo = memo if memo is not None else CheckMemo()
        self._seen: dict[str, dict[tuple[str, str], _Imported]] = {}
        self._folded: dict[str, dict[str, list[str]]] = {}

    def run(self, items: Iterable[Item], plan: Applier | None = None) -> list[ImportEntry]:
        """Apply ``items`` (grouped by store, in order); one entry per item. ``plan``: the dry
        run of the same items before this one, whose files are embedded ahead of each write.

        A dry run plans each store in one transaction (an item sees what those before it planned),
        but a coffer export's files (distinct paths, checked so already) as a run that writes
        does: that run takes its lock for ``TRANSACTION_ITEMS`` items (and at most
        ``TRANSACTION_BYTES`` of coffer files) at a time, so reads go on between them and what is
        planned or embedded ahead is held for that many items, not for the import.
        """
        by_store: dict[str, list[Item]] = {}
        for item in items:
            by_store.setdefault(item.store, []).append(item)
        total = sum(len(v) for v in by_store.values())
        entries: list[ImportEntry] = []
        for store, group in by_store.items():
            # Held for the whole store, a coffer export's planned bytes were the archive in memory.
            whole = self.dry_run and not all(isinstance(i, FileItem) for i in group)
            expected: int | None = None  # the store's version after this run's last hold of its lock
            for start, part in [(0, group)] if whole else _chunks(group):
                planned = plan.planned.get(store, []) if plan is not None else []
                files = [f for per_item in planned[start : start + len(part)] for f in per_item]
                ahead = (
                    self.ahead(store, partial(_read_planned, files))
                    if self.ahead is not None and files
                    else nullcontext()
                )
                with ahead, self.writer.transaction(store, dry_run=self.dry_run, bulk=True) as tx:
                    if expected is not None and self.writer.version(store) != expected:
                        # Another writer changed the store between two holds of its lock (another
                        # import of the same source, say): what was imported is read again.
                        self._seen.pop(store, None)
                    for item in part:
                        entries.append(self._apply_counted(tx, item))
                        if self.progress is not None:
                            self.progress(len(entries), total, entries[-1])
                    if not self.dry_run:  # the transaction's end advances the version once if it wrote
                        expected = self.writer.version(store) + (1 if tx.receipts else 0)
        return entries

    def _apply_counted(self, tx: Transaction, item: Item) -> ImportEntry:
        """``_apply`` with the findings of this item on its entry (and, in a dry run, its files
        noted in ``planned``)."""
        before, receipts = dict(tx.findings), len(tx.receipts)
        entry = self._apply(tx, item)
        found = {k: n - before.get(k, 0) for k, n in tx.findings.items() if n > before.get(k, 0)}
        if self.dry_run:
            written = [r.path for r in tx.receipts[receipts:]]
            if isinstance(item, FileItem):  # read again from the source when embedded
                self.planned.setdefault(tx.store, []).append(
                    [(path, partial(self._file_bytes, tx.store, item)) for path in written]
                )
            else:
                self.planned.setdefault(tx.store, []).append(
                    [(path, _held(d)) for path in written if (d := tx.read(path)) is not None]
                )
        return attrs.evolve(entry, findings=tuple(sorted(found.items())))

    def _file_bytes(self, store: str, item: FileItem) -> bytes:
        """The bytes a coffer file is written with (its own, or as the checks changed them)."""
        data = item.data
        if self.memo.get(store, "text", data) is not None:  # the checks left it as it is
            return data
        changed: bytes = self.writer.check_bytes(data, "text", {})
        return changed

    def _check(self, tx: Transaction, value: str | bytes, field: str, where: str) -> Any:
        """``value`` through the content checks (once per import); text that is not text a store
        can hold (a NUL, a lone surrogate) is ``InvalidImport`` naming ``where``."""
        done = self.memo.get(tx.store, field, value)
        if done is None:
            found: dict[str, int] = {}
            try:
                if isinstance(value, bytes):
                    result: str | bytes = self.writer.check_bytes(value, field, found)
                else:
                    result = self.writer.check(value, field, found)
            except InvalidImport:
                raise
            except MemoryRejected as exc:  # a secret refused: which of thousands of entries holds it
                raise MemoryRejected(
                    exc.reason,
                    length=exc.details.get("length"),
                    limit=exc.limit,
                    kinds=exc.details.get("kinds"),
                    member=where,
                ) from None
            except InvalidInput as exc:
                raise InvalidImport(
                    "not_text", f"{where}: {exc.message}", source=self.source, member=where
                ) from None
            self.memo.put(tx.store, field, value, result, found)
            done = (result, found)
        changed, found = done
        for kind, n in found.items():
            tx.findings[kind] = tx.findings.get(kind, 0) + n
        return value if changed is None else changed

    def _apply(self, tx: Transaction, item: Item) -> ImportEntry:
        if isinstance(item, FileItem):
            return self._file(tx, item)
        if isinstance(item, RuleItem):
            return self._rule(tx, item)
        return self._fact(tx, item)

    # -- a coffer export: whole files, byte for byte -------------------------------------------
    def _file(self, tx: Transaction, item: FileItem) -> ImportEntry:
        path = tx.paths.resolve_relative(item.relpath)
        source = f"{item.store}/{item.relpath}"
        self._refuse_folded(tx, item)
        here = None if os.path.isdir(path) else tx.read(path)
        if here is not None and sha256_bytes(here) == item.sha256:  # restored before: nothing to read
            return ImportEntry("unchanged", source, item.store, path, item.relpath)
        # Bytes that are not UTF-8 are restored as they are (the export carries them): a round trip.
        data: bytes = self._check(tx, item.data, "text", f"{STORES_DIR}/{source}")
        if os.path.isdir(path):
            return ImportEntry("conflict", source, item.store, path, item.relpath, reason="a folder is here")
        existing = tx.read(path)
        if existing == data:
            return ImportEntry("unchanged", source, item.store, path, item.relpath)
        merged = _merged_identity(existing, data) if item.relpath == STORE_FILE else None
        if merged is not None:  # the same repository: this machine's checkout and settings kept
            entry = ImportEntry("unchanged", source, item.store, path, item.relpath)
            if merged == existing:
                return entry
            tx.write(path, merged)
            tx.audit("memory_updated", None, path=str(path), imported_from="coffer")
            return attrs.evolve(entry, action="updated")
        if existing is not None or os.path.lexists(path):
            return ImportEntry(
                "conflict", source, item.store, path, item.relpath, reason="a different file is here"
            )
        tx.create(path, data)
        tx.audit("memory_added", None, path=str(path), imported_from="coffer")
        return ImportEntry("created", source, item.store, path, item.relpath)

    def _refuse_folded(self, tx: Transaction, item: FileItem) -> None:
        """``collision`` when the store holds a file or folder whose path differs from the item's
        only by case or Unicode normalisation: one file on macOS and Windows (where the import
        overwrote it or failed half-way), two on Linux (where it made a second copy). Refused,
        as two such members of one archive are: keeping either would drop the other unseen."""
        folded = self._folded.get(tx.store)
        if folded is None:
            folded = self._folded[tx.store] = _folded_names(tx.paths.root)
        parts = item.relpath.split("/")
        for n in range(1, len(parts) + 1):
            mine = "/".join(parts[:n])
            here = folded.get(fold(mine), [mine])
            if mine not in here:
                member = f"{STORES_DIR}/{item.store}/{item.relpath}"
                other = f"{STORES_DIR}/{item.store}/{here[0]}"
                raise InvalidImport(
                    "collision",
                    f"{member} and {other}, already in the store, differ only by case or Unicode "
                    "normalisation: they would be one file on macOS or Windows; rename one of them",
                    source=self.source,
                    member=member,
                    other=other,
                )

    # -- rules files ---------------------------------------------------------------------------
    def _rule(self, tx: Transaction, item: RuleItem) -> ImportEntry:
        prov = item.provenance
        path = tx.paths.rules_file(item.slug)
        text = self._check(tx, item.text.strip(), "text", prov.path) + "\n"
        head = json.dumps(prov.to_meta(_body_sha(text)), ensure_ascii=False, sort_keys=True)
        data = f"{IMPORT_MARK}{head} -->\n{text}".encode()
        existing = tx.read(path)
        entry = ImportEntry("created", prov.path, item.store, path, prov.original_id)
        if existing is not None:
            old = self._rule_meta(existing)
            if old is None:
                return attrs.evolve(entry, action="conflict", reason="a rules file of that name is here")
            meta, body = old
            if meta.get("path") != prov.path:
                return attrs.evolve(entry, action="conflict", reason=f"imported from {meta.get('path')}")
            if meta.get("sha256") == prov.sha256:
                return attrs.evolve(entry, action="unchanged")
            if meta.get("body_sha256") != _body_sha(body):
                return attrs.evolve(entry, action="conflict", reason="edited here since it was imported")
            tx.write(path, data)
            tx.audit("memory_updated", None, lane="rules", path=str(path), imported_from=prov.source)
            return attrs.evolve(entry, action="updated")
        tx.create(path, data)
        tx.audit("memory_added", None, lane="rules", path=str(path), imported_from=prov.source)
        return entry

    @staticmethod
    def _rule_meta(data: bytes) -> tuple[dict[str, Any], str] | None:
        text = data.decode("utf-8", "replace")
        match = _RULE_HEAD.match(text)
        if match is None:
            return None
        try:
            meta = json_loads(match.group(1))
        except ValueError:
            return None
        return (meta, text[match.end() :]) if isinstance(meta, dict) else None

    # -- facts ---------------------------------------------------------------------------------
    def _imported(self, tx: Transaction) -> dict[tuple[str, str], _Imported]:
        """The facts of the store that came from an import, by (source kind, original id)."""
        store = tx.store
        if store in self._seen:
            return self._seen[store]
        found: dict[tuple[str, str], _Imported] = {}
        sp = tx.paths
        files, _ = scan_markdown(sp.root, (sp.knowledge,)) if sp.knowledge.is_dir() else ({}, {})
        for rel in sorted(files):
            path = sp.root / rel
            data = tx.read(path)
            # Only imported facts carry the key; the others are not worth a YAML parse.
            if (
                data is None
                or b"\n" + PROVENANCE_KEY.encode() + b":" not in data
                or not sp.is_knowledge_file(path)
            ):
                continue
            try:
                parsed = parse_fact(data, store=store, relpath=rel, mtime=0)
            except FactParseError:
                continue
            meta = parsed.extra.get(PROVENANCE_KEY)
            if isinstance(meta, dict) and isinstance(meta.get("source"), str):
                key = (str(meta["source"]), str(meta.get("original_id")))
                found[key] = _Imported(
                    path,
                    meta,
                    _body_sha(parsed.fact.body),
                    parsed.fact,
                    dict(parsed.extra),
                    parsed.has_created_at,
                )
        self._seen[store] = found
        return found

    def _fact(self, tx: Transaction, item: FactItem) -> ImportEntry:
        prov = item.provenance
        entry = ImportEntry("created", prov.path, item.store, None, prov.original_id)
        known = self._imported(tx)
        key = (prov.source, prov.original_id)
        old = known.get(key)
        if old is not None and old.meta.get("sha256") == prov.sha256:  # before the checks: the common case
            return attrs.evolve(entry, action="unchanged", path=old.path)
        where = f"{prov.path} ({prov.original_id})"
        body = self._check(tx, item.body.strip("\n"), "text", where)
        title = self._check(tx, " ".join(item.title.split()) or "memory", "title", where)
        description = self._check(tx, item.description, "description", where) if item.description else None
        if not body.strip():
            return attrs.evolve(entry, action="skipped", reason="empty")
        meta = prov.to_meta(_body_sha(body))
        if old is not None:
            entry = attrs.evolve(entry, path=old.path)
            if old.meta.get("body_sha256") != old.body_sha:
                return attrs.evolve(entry, action="conflict", reason="edited here since it was imported")
            fact = attrs.evolve(
                old.fact,
                title=title,
                body=body,
                description=description or _description(body),
                tags=_tags(item.tags),
                updated_at=now_utc(),
            )
            tx.write(
                old.path, render_fact(fact, {**old.extra, PROVENANCE_KEY: meta}, with_created=old.has_created)
            )
            tx.audit("memory_updated", fact.id, path=str(old.path), imported_from=prov.source)
            known[key] = attrs.evolve(old, meta=meta, body_sha=_body_sha(body), fact=fact)
            return attrs.evolve(entry, action="updated")
        stamp = (item.created_at or now_utc()).replace(microsecond=0)
        slug = slugify(title)
        for attempt in range(1000):
            tail = f"-{attempt + 1}" if attempt else ""
            path = tx.paths.inbox_file(slug[: MAX_SLUG_CHARS - len(tail)].rstrip("-_") + tail)
            if tx.read(path) is None and not os.path.lexists(path):
                break
        fact = MemoryFact(
            id=fact_id_for(tx.store, tx.paths.relative(path), stamp),
            title=title,
            description=description or _description(body),
            body=body,
            actor=item.actor,
            origin_session_id=None,
            created_at=stamp,
            updated_at=stamp,
            tags=_tags(item.tags),
        )
        tx.create(path, render_fact(fact, {PROVENANCE_KEY: meta}))
        tx.audit("memory_added", fact.id, path=str(path), imported_from=prov.source)
        known[key] = _Imported(path, meta, _body_sha(body), fact, {PROVENANCE_KEY: meta}, True)
        return attrs.evolve(entry, path=path)


def _chunks(group: list[Item]) -> Iterator[tuple[int, list[Item]]]:
    """``(start, items)``: at most ``TRANSACTION_ITEMS`` items, and of coffer files at most
    ``TRANSACTION_BYTES`` (but one)."""
    start, size = 0, 0
    for n, item in enumerate(group):
        grown = size + (item.size if isinstance(item, FileItem) else 0)
        if n > start and (n - start >= TRANSACTION_ITEMS or grown > TRANSACTION_BYTES):
            yield start, group[start:n]
            start, grown = n, grown - size
        size = grown
    if start < len(group):
        yield start, group[start:]


def _merged_identity(here: bytes | None, imported: bytes) -> bytes | None:
    """A project store's ``store.json`` here with what an export's adds (its repository's other
    root commits, remotes and merged identities), or None when they are not of one repository.

    An export restored on another machine, whose checkout then found the store (it moved), has
    another ``project_root`` here: importing the export again was a ``conflict`` on it each time.
    The checkout, label and settings of this machine are kept."""
    if here is None:
        return None
    mine, theirs = StoreIdentity.from_bytes(here), StoreIdentity.from_bytes(imported)
    if not mine.shares_repository(theirs.root_commits, theirs.remotes):
        return None
    merged = attrs.evolve(
        mine,
        root_commits=tuple(dict.fromkeys((*mine.root_commits, *theirs.root_commits))),
        remotes=tuple(dict.fromkeys((*mine.remotes, *theirs.remotes))),
        merged_identities=tuple(dict.fromkeys((*mine.merged_identities, *theirs.merged_identities))),
    )
    return here if merged == mine else merged.to_bytes()


def _held(data: bytes) -> Callable[[], bytes]:
    return lambda: data


def _read_planned(files: _Planned) -> list[tuple[Path, bytes]]:
    return [(path, read()) for path, read in files]


def _folded_names(root: Path) -> dict[str, list[str]]:
    """Every visible file and folder under ``root``, by its path's ``fold``."""
    found: dict[str, list[str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        folder = os.path.relpath(dirpath, root).replace(os.sep, "/")
        for name in [*dirnames, *filenames]:
            if not name.startswith("."):
                rel = name if folder == "." else f"{folder}/{name}"
                found.setdefault(fold(rel), []).append(rel)
    return found


def _description(body: str) -> str:
    """The body in one line, headings left out (they repeat the title), at most 200 characters."""
    kept = [line for line in body.splitlines() if not line.lstrip().startswith("#")]
    flat = " ".join(" ".join(kept).split()) or " ".join(body.split())
    return flat if len(flat) <= 200 else flat[:199].rstrip() + "…"


def _tags(tags: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(tags))[:MAX_TAGS]


__all__ = ["Applier", "CheckMemo", "Progress", "Provenance"]
