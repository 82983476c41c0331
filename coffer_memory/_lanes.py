"""``Lanes``: the lanes beside the facts: journal, handoff, rules, consolidation log, INDEX.md, tombstones.

A component of ``MemoryService`` (also reachable as ``svc.lanes``); the file formats live in
``store/lanes.py``, every path comes from ``store/paths.py`` and every write goes through the
Writer's transaction.
"""

from __future__ import annotations

import os
from datetime import date, datetime, timedelta
from pathlib import Path

import attrs

from ._agents.context import session_context
from ._branch_names import earlier_names, renamed_branches
from ._config import Settings
from ._core import Facts
from ._errors import InvalidInput, MemoryNotFound, check_limit
from ._fact_input import check_actor, check_session_id, validate_text
from ._indexing import IndexHandle
from ._localtime import local_day, local_text
from ._models import (
    Actor,
    ConsolidationLog,
    HandoffScene,
    JournalFile,
    LaneWrite,
    ResumeResult,
    RulesView,
    Target,
    WriteReceipt,
)
from ._optout import optout_for
from ._scope import commits_since, detached_key, find_git, head_commit
from ._store import lanes as fmt
from ._store.files import now_utc, read_bytes, sha256_bytes
from ._store.identity import read_identity
from ._store.paths import StorePaths
from ._store.rules import read_rules, rules_files
from ._store.writer import Transaction, Writer
from ._store_config import FACT_CHARS_CEILING
from ._targets import PathLike, Targets
from .vocabulary import MAX_HANDOFF_CHARS, MAX_JOURNAL_DAYS, MAX_RULE_CHARS, MemoryScope, Scope

__all__ = ["Lanes"]


def _sha(path: Path) -> str | None:
    try:
        return sha256_bytes(read_bytes(path)[0])
    except OSError:
        return None


def _lane_write(receipt: WriteReceipt, target: Target | None = None) -> LaneWrite:
    return LaneWrite(
        store=receipt.store,
        path=receipt.path,
        before_sha256=receipt.before_sha256,
        after_sha256=receipt.after_sha256,
        target=target,
        receipt=receipt,
    )


# How many other branches' scenes a resume that found none names (newest first).
_OTHER_SCENES = 3


def _scene_at(path: Path) -> HandoffScene | None:
    """The scene saved in ``path``, or None (no file, a symbolic link, not a handoff)."""
    return fmt.read_handoff(path) if path.is_file() and not path.is_symlink() else None


def _renamed_scene(paths: StorePaths, name: str, renamed_at: datetime) -> HandoffScene | None:
    """The scene saved under a branch's earlier ``name`` before it was renamed away: one saved
    after (a new branch given the old name since) is that other branch's. The reflog counts
    whole seconds, so a scene saved within the second of the rename is still the branch's."""
    scene = _scene_at(paths.handoff_file(name))
    return scene if scene is not None and scene.updated_at < renamed_at + timedelta(seconds=1) else None


def _handoff_branch(target: Target) -> str:
    """The branch a handoff of ``target`` is saved under: its branch (mid-rebase, the branch being
    rebased), else one key per checkout for a detached HEAD (``_scope.detached_key``)."""
    if target.branch:
        return target.branch
    assert target.worktree is not None  # resolved from cwd
    git = find_git(target.worktree)
    return detached_key(git.gitdir) if git is not None else "detached HEAD (main checkout)"


class Lanes:
    """Journal, handoff, rules, consolidation log, INDEX.md and tombstones of every store."""

    def __init__(
        self, settings: Settings, index: IndexHandle, writer: Writer, targets: Targets, facts: Facts
    ) -> None:
        self.settings = settings
        self.index = index
        self.writer = writer
        self.targets = targets
        self.facts = facts

    # -- journal ------------------------------------------------------------------------------
    def journal_append(
        self,
        text: str,
        *,
        cwd: PathLike | None = None,
        store: str | None = None,
        actor: Actor = "agent",
        origin_session_id: str | None = None,
        dry_run: bool = False,
    ) -> LaneWrite:
        """Append an entry to today's ``journal/<YYYY-MM-DD>.md`` (the local day, ``_localtime``) and
        index that file at once.

        ``dry_run`` runs the same checks and returns the receipt it would write, writing nothing.
        """
        write = self.journal_append_parts(
            [(None, text)],
            cwd=cwd,
            store=store,
            actor=actor,
            origin_session_id=origin_session_id,
            dry_run=dry_run,
        )
        assert write is not None  # an entry without a part is never left out
        return write

    def journal_append_parts(
        self,
        entries: list[tuple[str | None, str]],
        *,
        cwd: PathLike | None = None,
        store: str | None = None,
        actor: Actor = "agent",
        origin_session_id: str | None = None,
        dry_run: bool = False,
    ) -> LaneWrite | None:
        """Append entries (``(part, text)``) to today's journal file in one write, leaving out each
        whose ``part`` (a name, or None) an entry of the journal already has; None when none is left.

        What a distillation writes: its entries go in together (a kill leaves all or none of
        them) and, named by session and turns, are never written twice when it runs again."""
        texts = [(part, validate_text(text, FACT_CHARS_CEILING, any_store=True)) for part, text in entries]
        check_actor(actor)
        # One token, as for a fact's: a line break in it wrote a forged entry heading of its own
        # (``x\n\n## <time> · user``), a blank broke the heading's session tag, and a lone
        # surrogate was a raw UnicodeEncodeError.
        origin_session_id = check_session_id(origin_session_id)
        target = self.targets.project(store=store, cwd=cwd)
        limit = self.facts.store_settings(target.store).max_fact_chars
        bodies = [(part, validate_text(text, limit)) for part, text in texts]
        at = now_utc()
        period = local_day(at)  # the writer's local day (``_localtime``), as its heading says
        # The content checks run before the lock, each entry's findings kept apart: an entry the
        # journal has already is not written, and what it held is not counted.
        session_findings: dict[str, int] = {}
        if origin_session_id is not None:  # a secret pasted as the session id, as in a fact's
            origin_session_id = self.writer.check(origin_session_id, "origin_session_id", session_findings)
        checked = []
        for part, body in bodies:
            found: dict[str, int] = {}
            entry = fmt.journal_entry(
                self.writer.check(body, "text", found),
                at=at,
                actor=actor,
                origin_session_id=origin_session_id,
                part=part,
            )
            checked.append((part, entry, found))
        sp = self.targets.paths(target.store)
        path = sp.journal_file(period)

        def to_write() -> list[tuple[bytes, dict[str, int]]]:
            # Read under the store's write lock (and once before it, to embed ahead).
            have = self._journal_parts(sp.journal) if any(p for p, _, _ in checked) else set()
            return [(entry, found) for part, entry, found in checked if part is None or part not in have]

        def planned() -> list[tuple[Path, bytes]]:  # the day file as the append will leave it
            if dry_run:
                return []
            data = b"".join(entry for entry, _ in to_write())
            before = read_bytes(path)[0] if os.path.lexists(path) else fmt.journal_header(period)
            return [(path, before + data)] if data else []

        with (
            self.index.embedding_ahead(target.store, planned),
            self.writer.transaction(target.store, dry_run=dry_run) as tx,
        ):
            written = to_write()
            data = b"".join(entry for entry, _ in written)
            if not data:
                return None
            for found in [session_findings, *(f for _, f in written)]:
                for kind, n in found.items():
                    tx.findings[kind] = tx.findings.get(kind, 0) + n
            receipt = tx.append(path, data, header=fmt.journal_header(period))
            if store is None and target.project_root is not None and not dry_run:
                self.index.record_project_root(target.store, target.project_root)
                self.targets.record_checkout(tx, target)
            tx.audit(
                "memory_added", None, lane="journal", path=str(path), origin_session_id=origin_session_id
            )
        return _lane_write(receipt, target)

    def journal_has_parts(self, prefix: str, *, cwd: PathLike | None = None, store: str | None = None) -> int:
        """How many entries of the journal have a ``part`` starting with ``prefix``."""
        sp = self.targets.paths(self.targets.project(store=store, cwd=cwd).store)
        return sum(1 for part in self._journal_parts(sp.journal) if part.startswith(prefix))

    @staticmethod
    def _journal_parts(folder: Path) -> set[str]:
        if folder.is_symlink() or not folder.is_dir():
            return set()
        found: set[str] = set()
        for path in folder.glob("*.md"):
            try:
                data, _ = read_bytes(path)  # never through a symlink
            except OSError:
                continue
            found |= fmt.journal_parts(data.decode("utf-8", errors="replace"))
        return found

    def journal(
        self, *, cwd: PathLike | None = None, store: str | None = None, limit: int = 30
    ) -> list[JournalFile]:
        """The journal's day files, newest period first (at most ``limit``)."""
        check_limit(limit, MAX_JOURNAL_DAYS)
        sp = self.targets.paths(self.targets.project(store=store, cwd=cwd).store)
        if sp.journal.is_symlink() or not sp.journal.is_dir():
            return []
        out = []
        for path in sorted(sp.journal.glob("*.md"), reverse=True):
            try:
                date.fromisoformat(path.stem)
                data, _ = read_bytes(path)  # never through a symlink
            except (ValueError, OSError):
                continue
            text = data.decode("utf-8", errors="replace")
            out.append(
                JournalFile(period=path.stem, text=text, path=path, entries=tuple(fmt.journal_entries(text)))
            )
            if len(out) >= limit:
                break
        return out

    def delete_journal(
        self, period: str, *, cwd: PathLike | None = None, store: str | None = None
    ) -> LaneWrite:
        """Delete one day of the journal (and its index rows); logged and audited."""
        target = self.targets.project(store=store, cwd=cwd)
        path = self.targets.paths(target.store).journal_file(period)
        return self._delete_lane_file(target, path, f"journal/{period}")

    # -- handoff ------------------------------------------------------------------------------
    def save_handoff(self, text: str, *, cwd: PathLike | None = None) -> LaneWrite:
        """Save where work stands on the current branch (one scene per branch; replaces the last)."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("handoff text is empty", field="text")
        if len(text) > MAX_HANDOFF_CHARS:
            raise InvalidInput(f"handoff text is longer than {MAX_HANDOFF_CHARS} characters", field="text")
        resolved = self.targets.project(cwd=cwd, lane="handoff")
        branch = _handoff_branch(resolved)
        target = attrs.evolve(resolved, branch=branch)  # the write says what it was saved under
        assert target.worktree is not None and target.project_root is not None  # resolved from cwd
        with self.writer.transaction(target.store) as tx:
            path = tx.paths.handoff_file(branch)
            head = head_commit(target.worktree)
            data = fmt.render_handoff(branch, tx.check(text), updated_at=now_utc(), head=head)
            receipt = tx.write(path, data)
            self.index.record_project_root(target.store, target.project_root)
            self.targets.record_checkout(tx, target)
            event = "memory_updated" if receipt.before_sha256 else "memory_added"
            tx.audit(event, None, lane="handoff", branch=branch, path=str(path))
        return _lane_write(receipt, target)

    def resume(self, *, cwd: PathLike | None = None) -> ResumeResult:
        """The handoff of this project and branch, and whether HEAD has moved since it was written."""
        target = self.targets.project(cwd=cwd, lane="handoff")
        assert target.worktree is not None  # resolved from cwd
        store, branch = target.store, _handoff_branch(target)
        path = self.targets.paths(store).handoff_file(branch)
        scene = _scene_at(path)
        if scene is None and target.branch:  # renamed since (`git branch -m`): its earlier names
            git = find_git(target.worktree)
            names = earlier_names(git.gitdir, target.branch) if git is not None else []
            sp = self.targets.paths(store)
            scene = next((s for n, at in names if (s := _renamed_scene(sp, n, at))), None)
            if scene is not None:  # listed under the branch's name now, as `handoffs` lists it
                scene = attrs.evolve(scene, branch=target.branch, saved_as=scene.branch)
        head = head_commit(target.worktree)
        notes = tuple(self.targets.offer_lines(target))
        if scene is None:
            notes = (*self._other_scenes(store), *notes)
        # A handoff saved before the repository's first commit has no head: any commit now is a move.
        if not (scene and head and scene.head != head):
            return ResumeResult(store, branch, head, scene, False, (), target=target, notes=notes)
        new = commits_since(target.worktree, scene.head or None)  # None: the saved commit left the history
        return ResumeResult(
            store, branch, head, scene, True, None if new is None else tuple(new), target=target, notes=notes
        )

    def handoffs(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> list[HandoffScene]:
        """Every branch's handoff scene in a store, newest first.

        A scene saved before its branch was renamed (``git branch -m``, read from the repository's
        reflogs as ``resume`` reads them) is listed under the branch's name now, its ``saved_as``
        the name it was saved under; once the renamed branch saved a scene of its own, the old one
        keeps its saved name and says ``renamed_to``. The repository is the one of ``cwd``, or for
        a named project store the checkout it records (``store.json``); the global store, or a
        store whose checkout is gone, lists each scene under its saved name."""
        target = self.targets.resolve(store=store, cwd=cwd, scope=scope)
        scenes = self._scenes(target.store)
        now_named = self._renamed_scenes(target) if scenes else {}
        own = {scene.branch for scene in scenes}
        out: list[HandoffScene] = []
        for scene in scenes:  # newest first: of two scenes renamed into one branch, the newer
            current = now_named.get(scene.branch)
            if current is None:
                out.append(scene)
            elif current in own:
                out.append(attrs.evolve(scene, renamed_to=current))
            else:
                own.add(current)
                out.append(attrs.evolve(scene, branch=current, saved_as=scene.branch))
        return out

    def _scenes(self, store: str) -> list[HandoffScene]:
        sp = self.targets.paths(store)
        if sp.handoff.is_symlink() or not sp.handoff.is_dir():
            return []
        scenes = [s for p in sorted(sp.handoff.glob("*.md")) if (s := _scene_at(p)) is not None]
        return sorted(scenes, key=lambda s: s.updated_at, reverse=True)

    def _gitdir(self, target: Target) -> Path | None:
        """The git dir of the repository of a project store's ``target``: its checkout's, else
        (a store named, no cwd) the one of the checkout its ``store.json`` records, when that
        checkout still writes to this store."""
        if target.worktree is not None:
            git = find_git(target.worktree)
            return git.gitdir if git is not None else None
        if target.scope != MemoryScope.PROJECT:
            return None
        sp = self.targets.paths(target.store)
        identity = read_identity(sp) if sp.linked_store() is None else None
        root = identity.project_root if identity is not None else None
        git = find_git(root) if root is not None and os.path.isdir(root) else None
        if git is None or self.targets.store_of(git) != target.store:
            return None  # moved away, or another repository's checkout there now
        return git.gitdir

    def _renamed_scenes(self, target: Target) -> dict[str, str]:
        """The scenes of ``target``'s store saved under a branch's earlier name before it was
        renamed: each name saved under, and the branch's name now. A scene belongs to the first
        rename after it was saved."""
        gitdir = self._gitdir(target)
        if gitdir is None:
            return {}
        sp = self.targets.paths(target.store)
        first: dict[str, tuple[datetime, str]] = {}
        for branch, names in renamed_branches(gitdir).items():
            for name, at in names:
                held = first.get(name)
                if (held is None or at < held[0]) and _renamed_scene(sp, name, at) is not None:
                    first[name] = (at, branch)
        return {name: branch for name, (_at, branch) in first.items()}

    def _other_scenes(self, store: str) -> list[str]:
        """A note naming the branches that have a scene, for a resume that found none: a handoff
        saved on one branch and resumed on another was otherwise invisible."""
        scenes = self._scenes(store)
        if not scenes:
            return []
        shown = ", ".join(f"{s.branch!r} (saved {local_text(s.updated_at)})" for s in scenes[:_OTHER_SCENES])
        more = f" and {len(scenes) - _OTHER_SCENES} more" if len(scenes) > _OTHER_SCENES else ""
        return [f"Other branches have a handoff: {shown}{more}; `coffer handoff show` prints them."]

    def delete_handoff(
        self, branch: str, *, store: str | None = None, cwd: PathLike | None = None
    ) -> LaneWrite:
        """Delete one branch's handoff; logged and audited."""
        target = self.targets.resolve(store=store, cwd=cwd, scope="project")
        path = self.targets.paths(target.store).handoff_file(branch)
        if not path.exists():  # a renamed branch's scene, listed under its name now
            renamed = [s for s in self.handoffs(store=store, cwd=cwd) if s.saved_as and s.branch == branch]
            path = renamed[0].path if renamed else path
        return self._delete_lane_file(target, path, f"handoff/{branch}")

    # -- rules --------------------------------------------------------------------------------
    def rules(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> RulesView:
        """Every rules file of the store concatenated (``rules/rules.md`` first)."""
        sp = self.targets.paths(self.targets.resolve(store=store, cwd=cwd, scope=scope).store)
        text, files = read_rules(sp)
        return RulesView(store=sp.name, text=text, files=tuple(files), folder=sp.rules)

    def append_rule(
        self,
        text: str,
        *,
        store: str | None = None,
        cwd: PathLike | None = None,
        scope: Scope = "project",
        actor: Actor = "user",
    ) -> LaneWrite:
        """Append a rule to ``rules/rules.md`` (delivered at session start, never through recall)."""
        target = self.targets.resolve(store=store, cwd=cwd, scope=scope)
        with self.writer.transaction(target.store) as tx:
            receipt = self.add_rule(tx, text, actor=actor)
        return _lane_write(receipt, target)

    def add_rule(self, tx: Transaction, text: str, *, actor: Actor) -> WriteReceipt:
        """Append a rule inside an open transaction (what ``append_rule`` and the organizer run)."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("rule text is empty", field="text")
        if len(text) > MAX_RULE_CHARS:
            raise InvalidInput(f"a rule is at most {MAX_RULE_CHARS} characters", field="text")
        path = tx.paths.rules_file()
        receipt = tx.append(path, fmt.rule_line(tx.check(text)), header=(fmt.RULES_HEADER + "\n").encode())
        tx.audit("memory_added", None, lane="rules", actor=actor, path=str(path))
        return receipt

    def delete_rules(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> list[LaneWrite]:
        """Delete every rules file of the store; logged and audited."""
        target = self.targets.resolve(store=store, cwd=cwd, scope=scope)
        files = rules_files(self.targets.paths(target.store))
        if not files:
            raise MemoryNotFound(target.store, "rules")
        return [self._delete_lane_file(target, path, f"rules/{path.name}") for path in files]

    # -- consolidation log, INDEX.md, tombstones ----------------------------------------------
    def consolidation_log(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> ConsolidationLog:
        """The organizer's changelog of a store (``text`` is None when there is none)."""
        name = self.targets.resolve(store=store, cwd=cwd, scope=scope).store
        path = self.targets.paths(name).consolidation_log
        try:
            text: str | None = read_bytes(path)[0].decode("utf-8", errors="replace")  # never through a link
        except OSError:
            text = None
        return ConsolidationLog(store=name, text=text, path=path)

    def log_change(self, store: str, action: str, detail: str, *, at: datetime | None = None) -> None:
        """Append one line to the store's consolidation log."""
        with self.writer.transaction(store) as tx:
            tx.log(action, detail, at=at)

    def delete_consolidation_log(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> LaneWrite:
        """Delete the consolidation log (not logged in itself); audited."""
        target = self.targets.resolve(store=store, cwd=cwd, scope=scope)
        path = self.targets.paths(target.store).consolidation_log
        return self._delete_lane_file(target, path, "consolidation-log", log=False)

    def regenerate_index(self, store: str) -> Path | None:
        """Rewrite ``knowledge/INDEX.md`` from the topic documents (only when it changes)."""
        with self.writer.transaction(self.targets.paths(store).name) as tx:
            return self.write_index(tx)

    def write_index(self, tx: Transaction) -> Path | None:
        """INDEX.md inside an open transaction (the organizer and reorg end with it)."""
        sp = tx.paths
        if not sp.knowledge.is_dir():
            return None
        entries = []
        for path in fmt.topic_files(sp):
            try:
                record = self.facts.record(sp.name, path)
            except Exception:  # a broken topic file is listed by name only
                entries.append((path.name, path.stem, ""))
                continue
            entries.append((path.name, record.fact.title, record.fact.description))
        inbox = len(list(sp.inbox.glob("*.md"))) if sp.inbox.is_dir() else 0
        data = fmt.render_index(entries, inbox)
        if _sha(sp.index_md) != sha256_bytes(data):
            tx.write(sp.index_md, data)
        return sp.index_md

    def archive_version(self, store: str, path: Path, *, replaced_by: str | None) -> Path:
        """Copy a topic document to ``superseded/<slug>-<ts>.md`` before it is overwritten or retired."""
        with self.writer.transaction(store) as tx:
            return tx.archive(path, replaced_by=replaced_by).path

    # -- session start ------------------------------------------------------------------------
    def assemble_session_context(self, cwd: PathLike | None = None) -> str:
        """The bundle an agent gets at session start (<= 10,000 characters; read-only, no audit).

        Project rules, then global rules, then the two seeded rules, which are always there.
        Outside a git repository: global and seeded rules only. In a repository that opted out
        (``coffer_memory._optout``): empty, as the session-start hook prints nothing there.
        """
        where = cwd if cwd is not None else os.getcwd()
        if optout_for(where, self.settings.projects.exclude) is not None:
            return ""
        return session_context(self.settings.memory_dir, where)

    # -- shared -------------------------------------------------------------------------------
    def _delete_lane_file(self, target: Target, path: Path, label: str, *, log: bool = True) -> LaneWrite:
        with self.writer.transaction(target.store) as tx:
            try:
                receipt = tx.delete(path)
            except OSError:
                raise MemoryNotFound(target.store, label) from None
            if log:
                tx.log("deleted", label)
            tx.audit("memory_deleted", None, lane=label.split("/")[0], path=str(path))
        return _lane_write(receipt, target)
