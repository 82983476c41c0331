"""Resolve a target once: (``store=`` | ``cwd`` + ``scope``) -> ``Target``.

Every store-addressed call of the service goes through ``Targets.resolve``; results carry the
``Target`` they landed on, so a face never resolves a second time.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import InvalidInput
from .models import MemoryScope, ResolvedScope, Target
from .scope import GitInfo, find_git, project_id_for, require_git
from .store.paths import GLOBAL_STORE, StorePaths, scope_of, store_name_for_project
from .store.paths import project_id_of as _project_id_of
from .vocabulary import SCOPES, Scope

PathLike = str | os.PathLike[str]


class Targets:
    """The target resolver of one home's ``memory/`` folder."""

    def __init__(self, memory_dir: Path) -> None:
        self.memory_dir = memory_dir

    def paths(self, store: str) -> StorePaths:
        """The on-disk paths of a store (validates the name)."""
        return StorePaths.of(self.memory_dir, store)

    def of_store(self, store: str) -> Target:
        """The target of an explicit store name (no project root or branch is known)."""
        sp = self.paths(store)
        return Target(
            store=sp.name, scope=scope_of(sp.name), project_id=_project_id_of(sp.name), store_dir=sp.root
        )

    def resolve(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> Target:
        """``store`` when given, else the store ``scope`` maps to from ``cwd`` (default: the process's)."""
        if store is not None:
            return self.of_store(store)
        if scope == "global":
            return self.of_store(GLOBAL_STORE)
        if scope not in SCOPES:
            raise InvalidInput(f"scope must be 'global' or 'project', not {scope!r}", field="scope")
        return self._of_git(require_git(cwd if cwd is not None else os.getcwd()))

    def _of_git(self, git: GitInfo) -> Target:
        project_id = project_id_for(git.toplevel)
        name = store_name_for_project(project_id)
        return Target(
            store=name,
            scope=MemoryScope.PROJECT,
            project_id=project_id,
            store_dir=self.paths(name).root,
            project_root=git.toplevel,
            branch=git.branch,
            worktree=git.worktree,
        )

    def project(
        self, *, store: str | None = None, cwd: PathLike | None = None, lane: str = "journal"
    ) -> Target:
        """A project store's target (the journal lane belongs to project stores)."""
        target = self.resolve(store=store, cwd=cwd, scope="project")
        if target.store == GLOBAL_STORE:
            raise InvalidInput(f"the {lane} lane belongs to project stores", field="store")
        return target

    def find_project(self, cwd: PathLike | None = None) -> list[Target]:
        """The project target of ``cwd`` as a one-item list, or an empty list outside a git repository."""
        git = find_git(cwd if cwd is not None else os.getcwd())
        return [self._of_git(git)] if git is not None else []

    def recall(self, cwd: PathLike | None = None) -> list[Target]:
        """The targets recall searches from ``cwd``: the project's (inside a git repo), then global."""
        found = self.find_project(cwd)
        return [*found, self.of_store(GLOBAL_STORE)]


def resolved_scope(target: Target) -> ResolvedScope:
    """The older ``ResolvedScope`` view of a target."""
    return ResolvedScope(
        scope=target.scope,
        project_id=target.project_id,
        store_name=target.store,
        store_dir=target.store_dir,
        project_root=target.project_root,
        branch=target.branch,
    )
