"""Merging one project store into another: the seed's consolidate (FR-058), for one pair of stores.

Every lane file of the source moves into the destination through the destination's write
transaction, add-only:

- a file the destination lacks is created with the source's bytes;
- a file it has with the same bytes is left alone;
- a journal day both have gets the source's entries it lacks (an entry is the same when its
  timestamped heading and its text are), in timestamp order;
- any other file of the same name is kept beside the destination's as
  ``<stem>--from-<source ULID><suffix>`` (``-2``, ``-3``... if that name holds other bytes);
- links, temp files and ``knowledge/INDEX.md`` (derived) are not moved.

The caller (``Stores.merge``) then records the source's identity in the destination's
``store.json`` and retires the source. Run again, every file is found in place: nothing changes.
Moved files keep their bytes (no secret scrubbing: they were truth in this home already).
"""

from __future__ import annotations

import os
import re
import stat
from datetime import datetime
from pathlib import Path

import attrs

from ._models import WriteReceipt
from ._store.files import read_bytes
from ._store.identity import STORE_FILE, StoreIdentity
from ._store.paths import INDEX_MD, StorePaths
from ._store.scan import TEMP_PREFIX
from ._store.writer import Transaction

__all__ = ["StoreMerge", "merged_identity", "move_lanes"]

_HEADING = re.compile(r"^## ", re.MULTILINE)
_PERIOD = re.compile(r"\d{4}-\d{2}-\d{2}\.md")


@attrs.frozen
class StoreMerge:
    """What merging ``source`` into ``into`` did (or, with ``dry_run``, would do).

    Paths are relative to the store roots. ``moved``: files created in ``into`` with the source's
    bytes; ``siblings``: (source path, path written) for same-name files kept side by side;
    ``journal_entries``: entries added to day files both stores had; ``unchanged``: files already
    in place; ``skipped``: what is never moved, with the reason. ``already_merged``: the source
    was merged before and is gone (nothing to do). ``retired``: the source store was removed.
    """

    source: str
    into: str
    dry_run: bool
    moved: tuple[str, ...] = ()
    siblings: tuple[tuple[str, str], ...] = ()
    journal_entries: int = 0
    unchanged: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    identity_changed: bool = False
    already_merged: bool = False
    retired: bool = False
    receipts: tuple[WriteReceipt, ...] = ()

    @property
    def changed(self) -> bool:
        """Whether the merge wrote (or would write) anything."""
        return bool(self.receipts) or self.retired


@attrs.define
class _Moves:
    moved: list[str] = attrs.Factory(list)
    siblings: list[tuple[str, str]] = attrs.Factory(list)
    journal_entries: int = 0
    unchanged: list[str] = attrs.Factory(list)
    skipped: list[str] = attrs.Factory(list)


def move_lanes(tx: Transaction, source: StorePaths) -> StoreMerge:
    """Bring every lane file of ``source`` into the transaction's store (see the module docstring)."""
    suffix = f"--from-{source.root.name}"
    moves = _Moves()
    for rel in _files(source.root, moves.skipped):
        if rel == STORE_FILE:
            continue  # the identity is merged by the caller
        if rel == f"knowledge/{INDEX_MD}":
            moves.skipped.append(f"{rel} (derived: regenerated from the topic documents)")
            continue
        try:
            data, _ = read_bytes(source.root / rel)
        except OSError as exc:
            moves.skipped.append(f"{rel} (unreadable: {exc.strerror or exc})")
            continue
        _move_one(tx, rel, data, suffix, moves)
    return StoreMerge(
        source=source.name,
        into=tx.store,
        dry_run=tx.dry_run,
        moved=tuple(moves.moved),
        siblings=tuple(moves.siblings),
        journal_entries=moves.journal_entries,
        unchanged=tuple(moves.unchanged),
        skipped=tuple(moves.skipped),
    )


def _files(root: Path, skipped: list[str]) -> list[str]:
    """Store-relative paths of the regular files under ``root`` (links listed in ``skipped``)."""
    found = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        base = Path(folder)
        for name in sorted(dirs):
            if (base / name).is_symlink():  # os.walk lists it but never enters it
                skipped.append(
                    f"{(base / name).relative_to(root).as_posix()} (symbolic link, never followed)"
                )
        dirs.sort()
        for name in sorted(files):
            rel = (base / name).relative_to(root).as_posix()
            try:
                mode = os.lstat(base / name).st_mode
            except FileNotFoundError:  # removed while we walked
                continue
            if stat.S_ISLNK(mode):
                skipped.append(f"{rel} (symbolic link, never followed)")
            elif not stat.S_ISREG(mode):
                skipped.append(f"{rel} (not a regular file)")
            elif name.startswith(TEMP_PREFIX):
                skipped.append(f"{rel} (a temp file of an unfinished write)")
            else:
                found.append(rel)
    return found


def _held(tx: Transaction, path: Path) -> bytes | None:
    """What the destination holds at ``path`` (None for nothing, a folder or anything unreadable)."""
    try:
        return tx.read(path)
    except OSError:
        return None


def _move_one(tx: Transaction, rel: str, data: bytes, suffix: str, moves: _Moves) -> None:
    target = tx.paths.root / rel
    there = _held(tx, target)
    if there is None and not os.path.lexists(target):
        moves.moved.append(rel)
        tx.create(target, data)
        return
    if there == data:
        moves.unchanged.append(rel)
        return
    if there is not None and rel.startswith("journal/") and _PERIOD.fullmatch(target.name):
        merged = merge_journal(there, data)
        if merged is not None:
            text, added = merged
            if added:
                tx.write(target, text)
                moves.journal_entries += added
            else:
                moves.unchanged.append(rel)
            return
    stem, ext = os.path.splitext(target.name)
    n = 1
    while True:
        sibling = target.with_name(f"{stem}{suffix}{'' if n == 1 else f'-{n}'}{ext}")
        held = _held(tx, sibling)
        if held == data:
            moves.unchanged.append(rel)
            return
        if held is None and not os.path.lexists(sibling):
            moves.siblings.append((rel, tx.paths.relative(sibling)))
            tx.create(sibling, data)
            return
        n += 1


def _split(text: str) -> tuple[str, list[str]]:
    """A journal file's text before the first entry, and each entry (``## `` heading to the next)."""
    starts = [m.start() for m in _HEADING.finditer(text)]
    if not starts:
        return text, []
    ends = [*starts[1:], len(text)]
    return text[: starts[0]], [text[a:b].rstrip("\n") + "\n" for a, b in zip(starts, ends, strict=True)]


def _when(entry: str) -> datetime | None:
    """The timestamp an entry's heading starts with (``## <ISO time> · actor``)."""
    first = entry.split("\n", 1)[0].removeprefix("## ").split(" · ", 1)[0]
    try:
        when = datetime.fromisoformat(first)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


def _body(preamble: str) -> str:
    """The text of a preamble outside its frontmatter block."""
    if preamble.startswith("---\n"):
        end = preamble.find("\n---\n", 4)
        if end != -1:
            return preamble[end + 5 :].strip()
    return preamble.strip()


def merge_journal(ours: bytes, theirs: bytes) -> tuple[bytes, int] | None:
    """``ours`` with the entries of ``theirs`` it lacks, in timestamp order, and how many were added.

    None when the two cannot be merged entry by entry (a heading without a timestamp, text
    before the first entry that only ``theirs`` has, or not UTF-8): the caller keeps a sibling.
    """
    try:
        mine, other = ours.decode("utf-8"), theirs.decode("utf-8")
    except UnicodeDecodeError:
        return None
    head, entries = _split(mine)
    their_head, their_entries = _split(other)
    if _body(their_head) not in ("", _body(head)):
        return None
    seen = set(entries)
    new = [e for e in their_entries if e not in seen]
    new = list(dict.fromkeys(new))  # an entry twice in the source is added once
    if not new:
        return ours, 0
    stamps = [_when(e) for e in (*entries, *new)]
    if any(s is None for s in stamps):
        return None
    order = sorted(range(len(stamps)), key=lambda i: (stamps[i], i))  # ours first on a tie
    everything = [*entries, *new]
    text = head.rstrip("\n") + "\n" + "".join("\n" + everything[i] for i in order)
    return text.encode("utf-8"), len(new)


def merged_identity(into: StoreIdentity, source: StoreIdentity | None, source_id: str) -> StoreIdentity:
    """The destination's identity once ``source`` is folded in (FR-058).

    The source's ULID and its own ``merged_identities`` join the destination's, so a checkout
    that resolves to any of them lands in the destination; fingerprints are united; the
    destination keeps its root, settings and label (it takes the source's label if it had none).
    """
    source = source or StoreIdentity()
    merged = tuple(dict.fromkeys((*into.merged_identities, source_id, *source.merged_identities)))
    return attrs.evolve(
        into,
        merged_identities=merged,
        root_commits=tuple(sorted({*into.root_commits, *source.root_commits})),
        remotes=tuple(sorted({*into.remotes, *source.remotes})),
        label=into.label or source.label,
    )
