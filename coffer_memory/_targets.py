"""Resolve a target once: (``store=`` | ``cwd`` + ``scope``) -> ``Target``.

Every store-addressed call of the service goes through ``Targets.resolve``; results carry the
``Target`` they landed on, so a face never resolves a second time.

Repository identity is the path-derived ULID first. When that store does not exist, a store that
lists the ULID in its ``merged_identities`` is used (the seed's FR-058); failing that, the one
store whose fingerprint (root commits, normalised remotes) matches and whose recorded root is
gone is the same repository moved: it is used, the new ULID is recorded in its
``merged_identities`` and the move audited (``store_moved``). A matching store whose checkout
still exists is a second clone: never merged by itself, only offered (``offer_lines``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path

import attrs

from ._errors import PATH_ECHO_LIMIT, InvalidInput, safe_echo
from ._models import MemoryScope, ResolvedScope, Target
from ._scope import (
    GitInfo,
    broken_checkout,
    find_git,
    folder_git,
    project_id_for,
    remote_urls,
    require_git,
    root_commits,
)
from ._store.identity import (
    STORE_FILE,
    StoreIdentity,
    find_landing,
    identity_path,
    merge_offer,
    read_identity,
    repository_matches,
)
from ._store.looks import Looks
from ._store.paths import GLOBAL_STORE, StorePaths, scope_of, store_name_for_project
from ._store.paths import project_id_of as _project_id_of
from ._store.writer import Transaction, Writer
from .vocabulary import SCOPES, Scope

PathLike = str | os.PathLike[str]

log = logging.getLogger("coffer_memory")
_PATHS_KEPT = 1024
# A file changed more recently than this is not vouched for by its stat (``_scope._RACY_NS``: a
# write within the clock's granularity may leave every stat field as it was).
_RACY_NS = 2_000_000_000
# What an identity file's stat is compared by; None: no such file.
_Stamp = tuple[int, int, int, int, int] | None


def store_list(stores: Iterable[str]) -> list[str]:
    """The store names of ``stores``; one name given as a string is refused, not read letter by letter."""
    if isinstance(stores, str | bytes):
        raise InvalidInput(
            f"stores must be a list of store names, not a string: stores=[{safe_echo(stores)!r}]",
            field="stores",
        )
    return list(stores)


class Targets:
    """The target resolver of one home's ``memory/`` folder.

    With a ``writer``, a moved repository folds into its store (see the module docstring).
    """

    def __init__(self, memory_dir: Path, writer: Writer | None = None) -> None:
        self.memory_dir = memory_dir
        self.writer = writer
        # Every read asks for its stores' paths: one StorePaths per name (its folders cached).
        self._paths: dict[str, StorePaths] = {}
        # Every recall resolves its targets: the target of each store name, and of each answer of
        # ``find_git`` (one GitInfo per folder while the folder, its .git and HEAD keep their stat),
        # whose project id costs a realpath and a sha256 (a fifth of a recall's fixed costs).
        self._of_name: dict[str, Target] = {}
        self._of_checkout: dict[int, tuple[GitInfo, Target]] = {}
        # A moved checkout's store by the name of its own (missing) store, with the paths whose
        # stat vouches for it (``_landing``): reading every project store's identity was ~60-100 us
        # of each of its recalls.
        self._landed: dict[str, tuple[str | None, tuple[str, ...], tuple[_Stamp, ...]]] = {}
        # The name of each checkout's own store, by its ``find_git`` answer (as ``_of_checkout``):
        # asked on every recall of a checkout whose store is not there (moved, or none yet).
        self._names: dict[int, tuple[GitInfo, str]] = {}

    def paths(self, store: str) -> StorePaths:
        """The on-disk paths of a store (validates the name)."""
        found = self._paths.get(store) if isinstance(store, str) else None
        if found is None:
            found = StorePaths.of(self.memory_dir, store)
            if len(self._paths) >= _PATHS_KEPT:
                self._paths.clear()
            self._paths[store] = found
        return found

    def of_store(self, store: str, looks: Looks | None = None) -> Target:
        """The target of an explicit store name (no project root or branch is known).
        ``InvalidInput`` when its folder is a link to another store's (``StorePaths.refuse_linked``;
        ``looks``: see ``_of_git``)."""
        sp = self.paths(store)
        sp.refuse_linked(looks=looks)
        found = self._of_name.get(store)
        if found is None:
            found = Target(
                store=sp.name, scope=scope_of(sp.name), project_id=_project_id_of(sp.name), store_dir=sp.root
            )
            if len(self._of_name) >= _PATHS_KEPT:
                self._of_name.clear()
            self._of_name[store] = found
        return found

    def resolve(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> Target:
        """``store`` when given, else the store ``scope`` maps to from ``cwd`` (default: the process's)."""
        if store is not None:
            return self.of_store(store)
        if scope == "global":
            return self.of_store(GLOBAL_STORE)
        if scope not in SCOPES:
            raise InvalidInput(
                f"scope must be 'global' or 'project', not {safe_echo(scope)!r}", field="scope"
            )
        return self._of_git(require_git(cwd if cwd is not None else os.getcwd()))

    def _of_git(self, git: GitInfo, looks: Looks | None = None) -> Target:
        """The target of a checkout; ``looks``: the call's ``Looks``, which keeps its one look at the
        store folder (is it there, is it a link) for the steps after (the recall's "present" check,
        the reconcile's link check, the feed)."""
        held = self._of_checkout.get(id(git))
        if held is not None and held[0] is git:
            there = (
                held[1].store_dir.is_dir()
                if looks is None
                else looks.is_dir(held[1].store, held[1].store_dir)
            )
            if there:
                self.paths(held[1].store).refuse_linked(looks=looks)
                return held[1]  # the checkout's own store, still there
        named = self._names.get(id(git))
        if named is not None and named[0] is git:
            name = named[1]
        else:
            name = store_name_for_project(project_id_for(git.toplevel))
            if len(self._names) >= _PATHS_KEPT:
                self._names.clear()
            self._names[id(git)] = (git, name)
        root = self.paths(name).root
        own = root.is_dir() if looks is None else looks.is_dir(name, root)
        if not own:
            name = self._landing(name, git) or name
        # Its folder a link to another store's: refused, as a write through it is; answering with
        # the other store's facts as this repository's own would be worse than no answer.
        self.paths(name).refuse_linked(looks=looks)
        target = Target(
            store=name,
            scope=MemoryScope.PROJECT,
            project_id=_project_id_of(name),
            store_dir=self.paths(name).root,
            project_root=git.toplevel,
            branch=git.branch,
            worktree=git.worktree,
        )
        if own:
            if len(self._of_checkout) >= _PATHS_KEPT:
                self._of_checkout.clear()
            self._of_checkout[id(git)] = (git, target)
        return target

    def project(
        self, *, store: str | None = None, cwd: PathLike | None = None, lane: str = "journal"
    ) -> Target:
        """A project store's target (the journal lane belongs to project stores).

        The global store has no journal: every face (Python, CLI, REST) answers ``InvalidInput``
        there, with what to do instead, rather than an empty journal that reads as "nothing
        happened"."""
        target = self.resolve(store=store, cwd=cwd, scope="project")
        if target.store == GLOBAL_STORE:
            raise InvalidInput(
                f"the global store has no {lane}: the {lane} lane belongs to project stores; name a "
                "project store (`coffer stores list` lists them) or give a cwd inside the project's "
                "git repository",
                field="store",
            )
        return target

    def store_of(self, git: GitInfo) -> str:
        """The name of the store a checkout's writes go to, read only: its own store, else the one
        it lands in (``merged_identities``, a moved repository), else its own name, not yet made.

        Unlike ``_of_git`` this records no move: a distillation names its store before it knows
        whether it writes anything (an opted-out project, no model)."""
        name = store_name_for_project(project_id_for(git.toplevel))
        if self.paths(name).root.is_dir():
            return name
        landing = find_landing(self.memory_dir, _project_id_of(name), git.toplevel)
        return landing.store if landing is not None else name

    def find_project(self, cwd: PathLike | None = None) -> list[Target]:
        """The project target of ``cwd`` as a one-item list, or an empty list outside a git repository."""
        git = find_git(cwd if cwd is not None else os.getcwd())
        return [self._of_git(git)] if git is not None else []

    def recall(self, cwd: PathLike | None = None, looks: Looks | None = None) -> list[Target]:
        """The targets recall searches from ``cwd``: the project's (inside a git repo), then global
        (``looks``: see ``_of_git``).

        A ``cwd`` that is not a directory is ``InvalidInput``, and one in a worktree whose main
        checkout moved ``ScopeUnresolved`` (as for ``remember``): searching only the global store
        would answer as if the project had no memory."""
        folder = cwd if cwd is not None else os.getcwd()
        is_dir, git = folder_git(folder)  # one stat of the folder answers both
        if not is_dir:
            if cwd is not None:
                raise InvalidInput(
                    f"cwd is not a directory: {safe_echo(os.fspath(cwd), PATH_ECHO_LIMIT)!r}", field="cwd"
                )
            git = find_git(folder)
        if git is None and (broken := broken_checkout(folder)) is not None:
            raise broken
        found = [self._of_git(git, looks)] if git is not None else []
        return [*found, self.of_store(GLOBAL_STORE, looks)]

    # -- repository identity ------------------------------------------------------------------
    def _landing(self, name: str, git: GitInfo) -> str | None:
        """The existing store a checkout whose own store ``name`` does not exist lands in, if any.

        A store that lists the checkout in its ``merged_identities`` (a move recorded), or none
        when no project store has a ``store.json``, is kept as the answer while the ``projects``
        folder (no store made, removed or renamed) and every store's ``store.json`` (none
        written, rewritten or listing it first) keep their stat, taken before they were read.
        Any other answer depends on more (root commits, whether another checkout is still
        there) and is worked out every time."""
        held = self._landed.get(name)
        if held is not None and _stamps(held[1]) == held[2]:
            return held[0]
        watched, stamps = _identity_files(self.memory_dir)
        project_id = _project_id_of(name)
        landing = find_landing(self.memory_dir, project_id, git.toplevel)
        # Kept: a recorded move, or no answer because no store has an identity to compare with.
        kept = (
            landing.moved_from is None if landing is not None else stamps is not None and not any(stamps[1:])
        )
        if kept and watched is not None and stamps is not None:
            if len(self._landed) >= _PATHS_KEPT:
                self._landed.clear()
            self._landed[name] = (landing.store if landing is not None else None, watched, stamps)
        if landing is None or landing.moved_from is None or self.writer is None:
            return landing.store if landing is not None else None
        with self.writer.transaction(landing.store) as tx:
            identity = read_identity(tx.paths) or StoreIdentity()
            if project_id not in identity.merged_identities:  # another process may have folded it
                moved = attrs.evolve(
                    identity,
                    merged_identities=(*identity.merged_identities, project_id),
                    project_root=str(git.toplevel),
                    root_commits=tuple(sorted({*identity.root_commits, *landing.root_commits})),
                    remotes=tuple(sorted({*identity.remotes, *landing.remotes})),
                )
                tx.write(identity_path(tx.paths), moved.to_bytes())
                tx.audit(
                    "store_moved",
                    None,
                    from_root=landing.moved_from,
                    to_root=str(git.toplevel),
                    identity=project_id,
                )
                log.info("%s moved from %s to %s", landing.store, landing.moved_from, git.toplevel)
        return landing.store

    def record_checkout(self, tx: Transaction, target: Target) -> None:
        """Keep the store's ``store.json`` in line with the checkout a write came from.

        Root commits are read once (a subprocess) and kept; remotes are re-read from the
        config file (cheap); the file is written only when something changed.
        """
        if tx.dry_run or target.project_root is None or target.scope != MemoryScope.PROJECT:
            return
        old = read_identity(tx.paths)
        identity = old or StoreIdentity()
        new = attrs.evolve(
            identity,
            project_root=str(target.project_root),
            root_commits=identity.root_commits or root_commits(target.project_root),
            remotes=tuple(sorted({*identity.remotes, *remote_urls(target.project_root)})),
        )
        if new != old:
            tx.write(identity_path(tx.paths), new.to_bytes())

    def offer_lines(self, target: Target) -> list[str]:
        """One sentence per other store of this repository, with the command that merges it here."""
        if target.project_root is None:
            return []
        found = repository_matches(self.memory_dir, target.store, target.project_root)
        return [merge_offer(store, root, target.store) for store, root in found]


def _identity_files(memory_dir: Path) -> tuple[tuple[str, ...] | None, tuple[_Stamp, ...] | None]:
    """The ``projects`` folder and the ``store.json`` of each entry in it (``project_identities``
    reads those), with their ``_stamps``; the folder's taken before it is listed, so a store made
    meanwhile changes it."""
    projects = os.path.join(memory_dir, "projects")
    folder = _stamps((projects,))
    try:
        names = sorted(os.listdir(projects))
    except OSError:
        return None, None
    files = tuple(os.path.join(projects, entry, STORE_FILE) for entry in names)
    stamps = _stamps(files, first=1)
    if folder is None or stamps is None:
        return None, None
    return (projects, *files), (*folder, *stamps)


def _stamps(paths: tuple[str, ...], first: int = 0) -> tuple[_Stamp, ...] | None:
    """The stat of each path, None for one not there; None for all when one changed too recently
    to vouch for its content. ``first``: the index ``paths[0]`` has in ``_identity_files``'s
    paths: the ``projects`` folder (index 0) is stat'ed through a link, as it is listed; a
    ``store.json`` not through its last link, as ``read_identity`` opens it."""
    now = time.time_ns()
    out: list[_Stamp] = []
    for i, path in enumerate(paths, first):
        try:
            st = os.lstat(path) if i else os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            out.append(None)
            continue
        except OSError:
            return None
        if now - st.st_ctime_ns < _RACY_NS:
            return None
        out.append((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode))
    return tuple(out)


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
