"""A project store's truth file, ``store.json``: who its repository is, beyond the path.

The store name stays ``project-<ULID of the path>``; the file adds what survives a move or a
fresh clone (the root commits and the normalised remote URLs), the last known root, the label,
and the seed's ``merged_identities`` (project ULIDs folded into this store, FR-058). It lives
at the store root, so it is synced with the store; ``index.db`` keeps only a derived copy of the
label and the root. Also here: removing a whole store folder, never through a symbolic link.

Light on purpose (no YAML, no frontmatter): ``coffer-hook`` resolves through it on session start.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

from .._errors import PATH_ECHO_LIMIT, safe_echo
from .._scope import remote_urls, root_commits
from .paths import StorePaths, store_name_for_project

MAX_IDENTITY_BYTES = 1 << 20  # a few remotes and root commits; more is not coffer's file

STORE_FILE = "store.json"
FORMAT = 1


@attrs.frozen
class StoreIdentity:
    """The content of ``store.json``."""

    root_commits: tuple[str, ...] = ()
    remotes: tuple[str, ...] = ()
    project_root: str | None = None
    label: str | None = None
    merged_identities: tuple[str, ...] = ()
    # The store's own MemoryStoreConfig settings (only the keys set for this store; see store_config).
    config: dict[str, Any] = attrs.field(factory=dict, hash=False)

    def shares_repository(self, root_commits: Iterable[str], remotes: Iterable[str]) -> bool:
        """Whether a checkout with these root commits / normalised remotes is the same repository."""
        return bool(set(self.root_commits) & set(root_commits) or set(self.remotes) & set(remotes))

    def to_bytes(self) -> bytes:
        """The file's bytes (sorted keys, one trailing newline: stable diffs when synced)."""
        data = {"format": FORMAT, **attrs.asdict(self)}
        if not self.config:
            del data["config"]  # files of stores without settings stay as they were
        return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> StoreIdentity:
        """Parse ``store.json``; unknown keys are ignored, a malformed file reads as empty."""
        try:
            data: Any = json.loads(raw)
        except ValueError:
            return cls()
        if not isinstance(data, dict):
            return cls()

        def strings(key: str) -> tuple[str, ...]:
            value = data.get(key)
            return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()

        def text(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) and value else None

        return cls(
            root_commits=strings("root_commits"),
            remotes=strings("remotes"),
            project_root=text("project_root"),
            label=text("label"),
            merged_identities=strings("merged_identities"),
            config=dict(data["config"]) if isinstance(data.get("config"), dict) else {},
        )


def identity_path(sp: StorePaths) -> Path:
    """``<store>/store.json``."""
    return sp.root / STORE_FILE


def read_identity(sp: StorePaths) -> StoreIdentity | None:
    """The store's identity, or None when it has no ``store.json`` (never read through a link)."""
    try:
        # Without blocking, a regular file only: a FIFO named store.json hung every recall,
        # resume and session start of the home (each lists the stores' identities). Not
        # ``files.read_bytes``: the session-start hook reads this and must not import the models.
        fd = os.open(identity_path(sp), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return StoreIdentity.from_bytes(fh.read(MAX_IDENTITY_BYTES))


def project_identities(memory_dir: Path) -> dict[str, StoreIdentity]:
    """Every project store that has a ``store.json``, by store name."""
    projects = memory_dir / "projects"
    found: dict[str, StoreIdentity] = {}
    if not projects.is_dir():
        return found
    for entry in sorted(os.listdir(projects)):
        try:
            sp = StorePaths.of(memory_dir, store_name_for_project(entry))
        except Exception:
            continue  # not a project store folder (Stores.names warns about it)
        identity = read_identity(sp)
        if identity is not None:
            found[sp.name] = identity
    return found


def same_repository(
    known: dict[str, StoreIdentity], roots: Iterable[str], remotes: Iterable[str]
) -> list[str]:
    """The stores in ``known`` whose repository shares a root commit or a remote with the given ones."""
    roots, remotes = tuple(roots), tuple(remotes)
    return [store for store, identity in known.items() if identity.shares_repository(roots, remotes)]


@attrs.frozen
class Landing:
    """Where a checkout whose own store does not exist lands instead."""

    store: str
    moved_from: str | None = None  # set: a move to record (the store's old root, now gone)
    root_commits: tuple[str, ...] = ()
    remotes: tuple[str, ...] = ()


def find_landing(memory_dir: Path, project_id: str, toplevel: Path) -> Landing | None:
    """The existing store for a checkout whose path-derived store is missing, if exactly one fits.

    A store listing ``project_id`` in its ``merged_identities`` first (FR-058); then the one store
    of the same repository (fingerprint) whose recorded root is gone: the repository moved. A
    matching store whose checkout still exists is a second clone's: not landed in (it is offered).
    """
    known = project_identities(memory_dir)
    for store, identity in known.items():
        if project_id in identity.merged_identities:
            return Landing(store)
    if not known:
        return None  # nothing to compare with: no subprocess
    roots, remotes = root_commits(toplevel), remote_urls(toplevel)
    # The one store of this repository whose checkout is gone: another clone's store, whose
    # checkout is there, does not make the move ambiguous (two gone ones do).
    gone = [s for s in same_repository(known, roots, remotes) if not _exists(known[s].project_root)]
    if len(gone) != 1:
        return None
    old_root = known[gone[0]].project_root
    return Landing(gone[0], moved_from=old_root or "unknown", root_commits=roots, remotes=remotes)


def repository_matches(memory_dir: Path, store: str, toplevel: Path) -> list[tuple[str, str | None]]:
    """Other stores of the repository checked out at ``toplevel`` (store name, its last known root)."""
    known = project_identities(memory_dir)
    own = known.pop(store, None)
    if not known:
        return []
    roots = own.root_commits if own and own.root_commits else root_commits(toplevel)
    same = same_repository(known, roots, remote_urls(toplevel))
    return [(other, known[other].project_root) for other in same]


def same_repository_offers(memory_dir: Path) -> list[str]:
    """One merge offer per pair of stores of the same repository (into the one whose checkout exists)."""
    known = project_identities(memory_dir)
    names = sorted(known)
    offers = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if not known[b].shares_repository(known[a].root_commits, known[a].remotes):
                continue
            src, dst = (
                (b, a) if _exists(known[a].project_root) and not _exists(known[b].project_root) else (a, b)
            )
            offers.append(merge_offer(src, known[src].project_root, dst))
    return offers


def _exists(root: str | None) -> bool:
    return root is not None and os.path.isdir(root)


# How an offer's command begins: the CLI adds the --home and --cwd its own call had.
MERGE_COMMAND = "coffer stores merge "


def merge_offer(store: str, root: str | None, into: str) -> str:
    """The sentence that offers a second clone's store for merging, with the command.

    ``root`` comes from the other store's store.json, which a synced or shared home may carry from
    elsewhere: shown without control characters, so that it stays inside the sentence (an agent
    reads this in its session context)."""
    shown = safe_echo(root, PATH_ECHO_LIMIT) if root else "unknown"
    return (
        f"Store {store} (checkout {shown}) holds memory of this same repository; "
        f"to merge it into {into}: {MERGE_COMMAND}{store} {into}"
    )


def offer_run_from(offer: str, home: str | os.PathLike[str] | None, cwd: str | None = None) -> str:
    """``offer`` with its command as a call with this ``--home`` and ``--cwd`` would run it
    (quoted for the shell); unchanged without them. A bare ``coffer stores merge`` merged in the
    default home, or (for a checkout whose store is not written yet) failed from elsewhere."""
    sentence, sep, rest = offer.rpartition(MERGE_COMMAND)
    if not sep or (home is None and cwd is None):
        return offer
    flag = f"--home {shlex.quote(os.fspath(home))} " if home is not None else ""
    where = f" --cwd {shlex.quote(os.path.abspath(cwd))}" if cwd else ""
    return f"{sentence}coffer {flag}stores merge {rest}{where}"


def home_unless_default(home: Path) -> Path | None:
    """``home`` when a command run beside this process would not find it by itself (it is not
    ``$COFFER_HOME``, else ``~/.coffer``): an offer's command then names it."""
    from .._home import expand_user

    default = expand_user(os.environ.get("COFFER_HOME") or "~/.coffer")
    return None if os.path.realpath(home) == os.path.realpath(default) else home


def remove_store_tree(root: Path) -> int:
    """Remove a store folder bottom-up; links are unlinked, never followed. Returns files removed."""
    if os.path.islink(root):
        os.unlink(root)
        return 1
    if not os.path.isdir(root):
        return 0
    removed = 0
    for folder, dirs, files, dir_fd in os.fwalk(root, topdown=False, follow_symlinks=False):
        for name in files:
            os.unlink(name, dir_fd=dir_fd)
            removed += 1
        for name in dirs:
            if os.path.islink(os.path.join(folder, name)):
                os.unlink(name, dir_fd=dir_fd)
                removed += 1
            else:
                os.rmdir(name, dir_fd=dir_fd)
    os.rmdir(root)
    return removed
