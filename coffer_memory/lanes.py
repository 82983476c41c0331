"""The lanes beside the facts: journal, handoff, rules, consolidation log, INDEX.md, tombstones.

``LanesMixin`` gives ``MemoryService`` its lane methods; the
file formats live in ``store/lanes.py`` and every path comes from ``store/paths.py``.
"""

from __future__ import annotations

import os
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from .agents.context import session_context
from .core import ServiceCore
from .errors import InvalidInput, MemoryNotFound
from .models import Actor, ConsolidationLog, HandoffScene, JournalFile, LaneWrite, ResumeResult, RulesView
from .scope import commits_since, head_commit, project_id_for, require_git
from .store import lanes as fmt
from .store.files import atomic_write, ensure_dir, now_utc, read_bytes, remove_file, sha256_bytes
from .store.paths import GLOBAL_STORE, slugify, store_name_for_project
from .store.rules import read_rules, rules_files

if TYPE_CHECKING:
    from .core import Scope

PathLike = str | os.PathLike[str]
MAX_HANDOFF_CHARS = 64_000
MAX_RULE_CHARS = 4_000


def _sha(path: Path) -> str | None:
    try:
        return sha256_bytes(read_bytes(path)[0])
    except OSError:
        return None


class LanesMixin(ServiceCore):
    """Lane methods of MemoryService (journal, handoff, rules, log, INDEX.md, tombstones)."""

    # -- journal ------------------------------------------------------------------------------
    def _project_store(self, store: str | None, cwd: PathLike | None) -> str:
        name = self.resolve_store(store=store, cwd=cwd, scope="project")
        if name == GLOBAL_STORE:
            raise InvalidInput("the journal lane belongs to project stores", field="store")
        return name

    def journal_append(
        self,
        text: str,
        *,
        cwd: PathLike | None = None,
        store: str | None = None,
        actor: Actor = "agent",
        origin_session_id: str | None = None,
    ) -> LaneWrite:
        """Append an entry to today's ``journal/<YYYY-MM-DD>.md`` (UTC) and index that file at once."""
        body = self._validate_text(text)
        if actor not in ("agent", "user"):
            raise InvalidInput("actor must be 'agent' or 'user'", field="actor")
        name = self._project_store(store, cwd)
        sp = self.paths(name)
        at = now_utc()
        period = at.date().isoformat()
        path = sp.journal_file(period)
        entry = fmt.journal_entry(body, at=at, actor=actor, origin_session_id=origin_session_id)
        with self.writing(name):
            before = _sha(path)
            ensure_dir(path.parent)
            folder_before = os.stat(path.parent).st_mtime_ns
            created = fmt.append_bytes(path, entry, header=fmt.journal_header(period))
            if store is None:
                self._record_project_root(name, require_git(cwd if cwd is not None else os.getcwd()).toplevel)
            data, st = read_bytes(path)
            self.reindexer.index_file(name, path, data=data, st=st)
            if created:
                self.reconciler.note_write(
                    name, path.parent, folder_before, os.stat(path.parent).st_mtime_ns, 1
                )
            self._audit(
                "memory_added",
                name,
                None,
                lane="journal",
                path=str(path),
                origin_session_id=origin_session_id,
            )
        return LaneWrite(store=name, path=path, before_sha256=before, after_sha256=sha256_bytes(data))

    def journal(
        self, *, cwd: PathLike | None = None, store: str | None = None, limit: int = 30
    ) -> list[JournalFile]:
        """The journal's day files, newest period first (at most ``limit``)."""
        if not isinstance(limit, int) or not 1 <= limit <= 3660:
            raise InvalidInput("limit must be between 1 and 3660", field="limit")
        sp = self.paths(self._project_store(store, cwd))
        if not sp.journal.is_dir():
            return []
        out = []
        for path in sorted(sp.journal.glob("*.md"), reverse=True):
            try:
                date.fromisoformat(path.stem)
                text = path.read_text(encoding="utf-8", errors="replace")
            except (ValueError, OSError):
                continue
            out.append(JournalFile(period=path.stem, text=text, path=path))
            if len(out) >= limit:
                break
        return out

    def delete_journal(
        self, period: str, *, cwd: PathLike | None = None, store: str | None = None
    ) -> LaneWrite:
        """Delete one day of the journal (and its index rows); logged and audited."""
        name = self._project_store(store, cwd)
        path = self.paths(name).journal_file(period)
        return self._delete_lane_file(name, path, f"journal/{period}", reindexed=True)

    # -- handoff ------------------------------------------------------------------------------
    def save_handoff(self, text: str, *, cwd: PathLike | None = None) -> LaneWrite:
        """Save where work stands on the current branch (one scene per branch; replaces the last)."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("handoff text is empty", field="text")
        if len(text) > MAX_HANDOFF_CHARS:
            raise InvalidInput(f"handoff text is longer than {MAX_HANDOFF_CHARS} characters", field="text")
        git = require_git(cwd if cwd is not None else os.getcwd())
        store = store_name_for_project(project_id_for(git.toplevel))
        branch = git.branch or "HEAD"
        path = self.paths(store).handoff_file(branch)
        data = fmt.render_handoff(branch, text, updated_at=now_utc(), head=head_commit(git.worktree))
        with self.writing(store):
            before = _sha(path)
            atomic_write(path, data)
            self._record_project_root(store, git.toplevel)
            event = "memory_updated" if before else "memory_added"
            self._audit(event, store, None, lane="handoff", branch=branch, path=str(path))
        return LaneWrite(store=store, path=path, before_sha256=before, after_sha256=sha256_bytes(data))

    def resume(self, *, cwd: PathLike | None = None) -> ResumeResult:
        """The handoff of this project and branch, and whether HEAD has moved since it was written."""
        git = require_git(cwd if cwd is not None else os.getcwd())
        store = store_name_for_project(project_id_for(git.toplevel))
        branch = git.branch or "HEAD"
        path = self.paths(store).handoff_file(branch)
        scene = fmt.read_handoff(path) if path.is_file() else None
        head = head_commit(git.worktree)
        if not (scene and scene.head and head and scene.head != head):
            return ResumeResult(store, branch, head, scene, False, ())
        new = commits_since(git.worktree, scene.head)  # None: the saved commit left HEAD's history
        return ResumeResult(store, branch, head, scene, True, None if new is None else tuple(new))

    def handoffs(
        self,
        *,
        store: str | None = None,
        cwd: PathLike | None = None,
        scope: Scope = "project",
    ) -> list[HandoffScene]:
        """Every branch's handoff scene in a store, newest first."""
        sp = self.paths(self.resolve_store(store=store, cwd=cwd, scope=scope))
        if not sp.handoff.is_dir():
            return []
        scenes = [s for p in sorted(sp.handoff.glob("*.md")) if (s := fmt.read_handoff(p)) is not None]
        return sorted(scenes, key=lambda s: s.updated_at, reverse=True)

    def delete_handoff(
        self, branch: str, *, store: str | None = None, cwd: PathLike | None = None
    ) -> LaneWrite:
        """Delete one branch's handoff; logged and audited."""
        name = self.resolve_store(store=store, cwd=cwd, scope="project")
        return self._delete_lane_file(name, self.paths(name).handoff_file(branch), f"handoff/{branch}")

    # -- rules --------------------------------------------------------------------------------
    def rules(
        self,
        *,
        store: str | None = None,
        cwd: PathLike | None = None,
        scope: Scope = "project",
    ) -> RulesView:
        """Every rules file of the store concatenated (``rules/rules.md`` first)."""
        name = self.resolve_store(store=store, cwd=cwd, scope=scope)
        text, files = read_rules(self.paths(name))
        return RulesView(store=name, text=text, files=tuple(files))

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
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("rule text is empty", field="text")
        if len(text) > MAX_RULE_CHARS:
            raise InvalidInput(f"a rule is at most {MAX_RULE_CHARS} characters", field="text")
        name = self.resolve_store(store=store, cwd=cwd, scope=scope)
        path = self.paths(name).rules_file()
        with self.writing(name):
            before = _sha(path)
            fmt.append_bytes(path, fmt.rule_line(text), header=(fmt.RULES_HEADER + "\n").encode())
            self._audit("memory_added", name, None, lane="rules", actor=actor, path=str(path))
        return LaneWrite(store=name, path=path, before_sha256=before, after_sha256=_sha(path))

    def delete_rules(
        self,
        *,
        store: str | None = None,
        cwd: PathLike | None = None,
        scope: Scope = "project",
    ) -> list[LaneWrite]:
        """Delete every rules file of the store; logged and audited."""
        name = self.resolve_store(store=store, cwd=cwd, scope=scope)
        files = rules_files(self.paths(name))
        if not files:
            raise MemoryNotFound(name, "rules")
        return [self._delete_lane_file(name, path, f"rules/{path.name}") for path in files]

    # -- consolidation log, INDEX.md, tombstones ----------------------------------------------
    def consolidation_log(
        self,
        *,
        store: str | None = None,
        cwd: PathLike | None = None,
        scope: Scope = "project",
    ) -> ConsolidationLog:
        """The organizer's changelog of a store (``text`` is None when there is none)."""
        name = self.resolve_store(store=store, cwd=cwd, scope=scope)
        path = self.paths(name).consolidation_log
        try:
            text: str | None = path.read_text(encoding="utf-8", errors="replace")
        except (FileNotFoundError, NotADirectoryError):
            text = None
        return ConsolidationLog(store=name, text=text, path=path)

    def log_change(self, store: str, action: str, detail: str, *, at: datetime | None = None) -> None:
        """Append one line to the store's consolidation log (caller holds the store lock)."""
        path = self.paths(store).consolidation_log
        fmt.append_bytes(path, fmt.log_line(at or now_utc(), action, detail), header=fmt.LOG_HEADER.encode())

    def delete_consolidation_log(
        self,
        *,
        store: str | None = None,
        cwd: PathLike | None = None,
        scope: Scope = "project",
    ) -> LaneWrite:
        """Delete the consolidation log (not logged in itself); audited."""
        name = self.resolve_store(store=store, cwd=cwd, scope=scope)
        return self._delete_lane_file(
            name, self.paths(name).consolidation_log, "consolidation-log", log=False
        )

    def regenerate_index(self, store: str) -> Path | None:
        """Rewrite ``knowledge/INDEX.md`` from the topic documents (only when it changes)."""
        sp = self.paths(store)
        if not sp.knowledge.is_dir():
            return None
        entries = []
        for path in fmt.topic_files(sp):
            try:
                record = self._record(store, path)
            except Exception:  # a broken topic file is listed by name only
                entries.append((path.name, path.stem, ""))
                continue
            entries.append((path.name, record.fact.title, record.fact.description))
        inbox = len(list(sp.inbox.glob("*.md"))) if sp.inbox.is_dir() else 0
        data = fmt.render_index(entries, inbox)
        if _sha(sp.index_md) != sha256_bytes(data):
            atomic_write(sp.index_md, data)
        return sp.index_md

    def archive_version(self, store: str, path: Path, *, replaced_by: str | None) -> Path:
        """Copy a topic document to ``superseded/<slug>-<ts>.md`` before it is overwritten or retired."""
        sp = self.paths(store)
        at = now_utc()
        stamp = at.strftime("%Y%m%dT%H%M%S%fZ")
        target = sp.superseded_file(slugify(path.stem), stamp)
        atomic_write(
            target, fmt.tombstone(read_bytes(path)[0], replaced_by=replaced_by, at=at), overwrite=False
        )
        return target

    # -- session start ------------------------------------------------------------------------
    def assemble_session_context(self, cwd: PathLike | None = None) -> str:
        """The bundle an agent gets at session start (<= 10,000 characters; read-only, no audit).

        Project rules, then global rules, then the two seeded rules, which are always there.
        Outside a git repository: global and seeded rules only.
        """
        return session_context(self.settings.memory_dir, cwd if cwd is not None else os.getcwd())

    # -- shared -------------------------------------------------------------------------------
    def _delete_lane_file(
        self, store: str, path: Path, label: str, *, reindexed: bool = False, log: bool = True
    ) -> LaneWrite:
        with self.writing(store):
            before = _sha(path)
            if before is None:
                raise MemoryNotFound(store, label)
            remove_file(path)
            if reindexed:
                self.reindexer.remove_path(store, path)
            if log:
                self.log_change(store, "deleted", label)
            self._audit("memory_deleted", store, None, lane=label.split("/")[0], path=str(path))
        return LaneWrite(store=store, path=path, before_sha256=before, after_sha256=None)
