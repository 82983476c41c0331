"""Resolve a working directory to its git project: toplevel, branch, project ULID.

Git metadata is read from the files directly (no ``git`` subprocess on the hot path):
a ``.git`` folder marks a main checkout; a ``.git`` file points at a worktree's gitdir,
whose ``commondir`` leads back to the main repository, so every worktree of a repository
resolves to the same toplevel, hence the same store. The branch is read per worktree.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import time
from pathlib import Path
from stat import S_ISCHR, S_ISDIR, S_ISREG

import attrs

from ._errors import InvalidInput, ScopeUnresolved
from ._ulid_text import crockford_ulid

GLOBAL_PROJECT_ID = "00000000000000000000000000"


@attrs.frozen
class GitInfo:
    """A checkout as git sees it."""

    toplevel: Path  # canonical toplevel of the MAIN repository (shared by all worktrees)
    worktree: Path  # canonical toplevel of this checkout
    gitdir: Path  # this worktree's git dir (holds its HEAD)
    branch: str | None  # None on a detached HEAD; mid-rebase, the branch being rebased


def project_id_for(toplevel: str | os.PathLike[str]) -> str:
    """ULID made of the first 16 bytes of sha256 of the canonical toplevel path."""
    canonical = os.path.realpath(os.fspath(toplevel))
    digest = hashlib.sha256(canonical.encode("utf-8", "surrogateescape")).digest()
    return crockford_ulid(digest[:16])


# HEAD, commondir and a .git file hold a line; a config a few KiB. A git file larger than this
# is none of git's.
_MAX_GIT_FILE_BYTES = 1 << 20


def _read_text(path: Path) -> str | None:
    """A small regular file's text, else None.

    The folder a ``cwd`` names may be anyone's (an unpacked archive, a shared /tmp): a HEAD that
    is a FIFO blocked the reading thread for ever (and with it every recall queued behind it), a
    link to /dev/zero or a sparse terabyte was read whole. So: opened without blocking, read only
    when it is a regular file, and never past ``_MAX_GIT_FILE_BYTES``.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if not S_ISREG(st.st_mode) or st.st_size > _MAX_GIT_FILE_BYTES:
            return None
        chunks: list[bytes] = []
        size = 0
        while size <= _MAX_GIT_FILE_BYTES:
            chunk = os.read(fd, _MAX_GIT_FILE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > _MAX_GIT_FILE_BYTES:
            return None
        return b"".join(chunks).decode("utf-8", errors="surrogateescape").strip()
    except OSError:
        return None
    finally:
        os.close(fd)


def _gitdir_from_file(dotgit: Path) -> Path | None:
    content = _read_text(dotgit)
    if not content or not content.startswith("gitdir:"):
        return None
    target = Path(content[len("gitdir:") :].strip())
    if not target.is_absolute():
        target = dotgit.parent / target
    return Path(os.path.realpath(target))


def _main_toplevel(gitdir: Path, worktree: Path) -> Path:
    """The main checkout's toplevel for a gitdir (follows ``commondir`` of linked worktrees)."""
    common = _read_text(gitdir / "commondir")
    if common is None:  # a main repository, or a submodule's own gitdir
        return worktree
    common_dir = Path(common)
    if not common_dir.is_absolute():
        common_dir = gitdir / common_dir
    common_dir = Path(os.path.realpath(common_dir))
    # A non-bare repository keeps its common dir at <toplevel>/.git.
    if common_dir.name == ".git":
        return common_dir.parent
    return common_dir


# What HEAD holds in a reftable repository (git >= 2.45): a stub that keeps older gits from
# taking the directory for a repository; the real HEAD lives in the tables.
_REFTABLE_HEAD_STUB = "refs/heads/.invalid"


def _branch(gitdir: Path) -> str | None:
    head = _read_text(gitdir / "HEAD")
    if head and head.startswith("ref:"):
        ref = head[4:].strip()
        if ref == _REFTABLE_HEAD_STUB:
            # Only here a subprocess: parsing reftable files is git's job. None when this git
            # cannot read them (older than 2.45) or HEAD is detached.
            if not configs_readable(gitdir):
                return None
            # Detached in the tables (the stub stays): mid-rebase, the branch being rebased.
            name = _run_git("--git-dir", str(gitdir), "symbolic-ref", "--short", "-q", "HEAD")
            return shown_branch(name) if name else _rebasing(gitdir)
        return shown_branch(ref.removeprefix("refs/heads/"))
    return _rebasing(gitdir)


def shown_branch(name: str) -> str:
    """A branch name as coffer keeps it: each byte that is not UTF-8 (git takes any but a few; the
    git files are read with ``surrogateescape``) as ``\\xNN``. A ref name holds no backslash, so
    no other branch is named so, and the name is text that a file and JSON can hold."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


# Where a rebase keeps the branch it rebases while HEAD is detached (the merge backend, the
# default, and the apply backend), in the worktree's own gitdir.
_REBASE_DIRS = ("rebase-merge", "rebase-apply")


def _rebasing(gitdir: Path) -> str | None:
    """The branch a rebase in progress in this worktree is rebasing, or None.

    A rebase detaches HEAD until it ends: what was saved or resumed then (a handoff written while
    a conflict is resolved) belongs to that branch, as ``git status`` says, not to a detached HEAD.
    ``head-name`` holds ``refs/heads/<branch>`` (``detached HEAD`` when a detached HEAD is rebased).
    """
    for folder in _REBASE_DIRS:
        name = _read_text(gitdir / folder / "head-name")
        if name and name.startswith("refs/heads/") and len(name) > len("refs/heads/"):
            return shown_branch(name.removeprefix("refs/heads/"))
    return None


def detached_key(gitdir: Path) -> str:
    """What a detached HEAD's handoff is saved under: one scene per checkout (never a branch name:
    a ref name holds no space), so the detached HEADs of two worktrees do not share one.

    ``detached HEAD (worktree <name>)`` in a linked worktree (its name under ``.git/worktrees``),
    ``detached HEAD (main checkout)`` otherwise."""
    if _read_text(gitdir / "commondir") is not None:  # a linked worktree's own gitdir
        return f"detached HEAD (worktree {gitdir.name})"
    return "detached HEAD (main checkout)"


def _reftable(gitdir: Path) -> bool:
    """True when HEAD holds the reftable stub: the branch then lives in the reftable list."""
    head = _read_text(gitdir / "HEAD")
    return bool(head and head.startswith("ref:") and head[4:].strip() == _REFTABLE_HEAD_STUB)


# A file or folder changed this recently may change again within the same timestamp tick
# unseen (git's "racily clean"): a cache entry that leans on it is not trusted.
_RACY_NS = 2_000_000_000
_CACHE_MAX = 256
Stamp = tuple[int, int, int, int]
# cwd -> (the answer, the paths it leans on, their stamps when it was read): see ``_watched``.
_cache: dict[str, tuple[GitInfo, tuple[str, ...], tuple[Stamp, ...]]] = {}


def _stamp(st: os.stat_result, now: int) -> Stamp | None:
    """A path's stamp from its stat, or None when it changed too recently to be trusted."""
    if now - st.st_ctime_ns < _RACY_NS:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


_GONE: Stamp = (-1, -1, -1, -1)


def _stamps(paths: tuple[str, ...], first: os.stat_result | None = None) -> tuple[Stamp, ...] | None:
    """The stat of each path, or None when one changed too recently to be trusted. ``first``:
    the stat of ``paths[0]`` taken already (a caller that asked whether it is a folder)."""
    stamps = []
    now = time.time_ns()
    for path in paths:
        if first is not None:
            st, first = first, None
        else:
            try:
                st = os.stat(path)
            except OSError:
                stamps.append(_GONE)
                continue
        stamp = _stamp(st, now)
        if stamp is None:
            return None
        stamps.append(stamp)
    return tuple(stamps)


def _watched(cwd: str, info: GitInfo) -> tuple[str, ...] | None:
    """What must keep its stat for a cached answer to hold.

    ``cwd`` itself (the folder it names), every folder from it up to the worktree (a new
    ``.git`` among them changes the folder), the worktree's ``.git`` entry, and HEAD (plus the
    reftable list, where the branch lives in a reftable repository: HEAD then holds a stub, and
    a repository turned into one rewrites HEAD). Each path once (``cwd`` is often its realpath).
    """
    folders = [os.path.realpath(cwd)]
    worktree = str(info.worktree)
    while folders[-1] != worktree:
        parent = os.path.dirname(folders[-1])
        if parent == folders[-1]:
            return None
        folders.append(parent)
    gitdir = str(info.gitdir)
    head = os.path.join(gitdir, "HEAD")
    tables = (os.path.join(gitdir, "reftable", "tables.list"),) if _reftable(Path(gitdir)) else ()
    # A detached HEAD's branch is a rebase's, while its folder is there.
    rebases = tuple(os.path.join(gitdir, d) for d in _REBASE_DIRS) if _detached(info.gitdir) else ()
    return tuple(dict.fromkeys((cwd, *folders, os.path.join(worktree, ".git"), head, *tables, *rebases)))


def _detached(gitdir: Path) -> bool:
    head = _read_text(gitdir / "HEAD")
    return not (head and head.startswith("ref:"))


def cwd_text(cwd: str | os.PathLike[str]) -> str:
    """``cwd`` as text: a ``str`` as it is, a path-like or bytes path decoded as the OS does;
    anything else (a number a JSON body carried, a list) is ``InvalidInput`` naming ``cwd``, not
    the ``TypeError`` ``os.fspath`` raises deep inside a recall."""
    if type(cwd) is str:
        return cwd
    try:
        return os.fsdecode(cwd)
    except TypeError:
        raise InvalidInput(
            f"cwd must be a path (str or os.PathLike), not {type(cwd).__name__}", field="cwd"
        ) from None


def find_git(cwd: str | os.PathLike[str]) -> GitInfo | None:
    """The git checkout that contains ``cwd``, or ``None`` outside any repository.

    Answers are cached per ``cwd`` while the folders up to the worktree, its ``.git`` and
    HEAD keep their stat (a branch switch rewrites HEAD; ``git init`` below changes a folder).
    """
    key = cwd_text(cwd)
    if "\x00" in key:
        return None
    return _lookup(key, None)


def folder_git(cwd: str | os.PathLike[str]) -> tuple[bool, GitInfo | None]:
    """Whether ``cwd`` is a directory, and ``find_git(cwd)`` when it is: one ``stat`` of ``cwd``
    answers both (every recall from a working directory asks them one after the other)."""
    key = cwd_text(cwd)
    if "\x00" in key:
        return False, None
    try:
        st = os.stat(key)
    except (OSError, ValueError):
        return False, None
    if not S_ISDIR(st.st_mode):
        return False, None
    return True, _lookup(key, st)


def _lookup(key: str, st: os.stat_result | None) -> GitInfo | None:
    """``find_git`` of ``key``; ``st``: its stat, when the caller took it."""
    cached = _cache.get(key)
    if cached is not None and _stamps(cached[1], st) == cached[2]:
        return cached[0]
    info = _find_git(key)
    watched = None if info is None else _watched(key, info)
    stamps = None if watched is None else _stamps(watched)
    if info is not None and watched is not None and stamps is not None:
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        _cache[key] = (info, watched, stamps)
    return info


def _find_git(cwd: str) -> GitInfo | None:
    start = Path(os.path.realpath(os.fspath(cwd)))
    for candidate in (start, *start.parents):
        dotgit = candidate / ".git"
        try:
            is_dir = dotgit.is_dir()
            is_file = not is_dir and dotgit.is_file()
        except OSError:
            continue
        if is_dir:
            if not (dotgit / "HEAD").is_file():
                continue
            return GitInfo(toplevel=candidate, worktree=candidate, gitdir=dotgit, branch=_branch(dotgit))
        if is_file:
            gitdir = _gitdir_from_file(dotgit)
            if gitdir is not None and not gitdir.exists():
                # A worktree whose main checkout moved: git stops here too. Going on up would land
                # in an enclosing repository's store, a different project's memory.
                return None
            # As for a .git folder: a gitdir without a HEAD file (a FIFO, say) is no repository,
            # and git run in it would block on that HEAD.
            if gitdir is None or not (gitdir / "HEAD").is_file():
                continue
            return GitInfo(
                toplevel=_main_toplevel(gitdir, candidate),
                worktree=candidate,
                gitdir=gitdir,
                branch=_branch(gitdir),
            )
    return None


def require_git(cwd: str | os.PathLike[str]) -> GitInfo:
    """Like ``find_git``, but raises ``ScopeUnresolved`` outside a repository."""
    path = cwd_text(cwd)
    if "\x00" in path or not os.path.isdir(path):
        raise ScopeUnresolved(path, "not a directory" if os.path.lexists(path) else "no such directory")
    info = find_git(path)
    if info is None:
        raise (
            broken_checkout(path)
            or _bare_repository(path)
            or ScopeUnresolved(path, folder=os.path.abspath(path))
        )
    return info


def _bare_repository(path: str) -> ScopeUnresolved | None:
    """The error for ``path`` inside a bare repository (``git init --bare``: no working tree),
    saying so and how to get a checkout, or None. Asked once ``find_git`` found no checkout:
    "not inside a git repository" sent the user looking for one they were in. A project's memory
    belongs to a checkout (its store is named by the checkout's path): none for the bare one."""
    start = Path(os.path.realpath(path))
    for git_dir in (start, *start.parents):
        # git tells a git directory by these three
        if not (
            (git_dir / "HEAD").is_file() and (git_dir / "objects").is_dir() and (git_dir / "refs").is_dir()
        ):
            continue
        bare = re.search(r"^\s*bare\s*=\s*true\s*$", _read_text(git_dir / "config") or "", re.I | re.M)
        return ScopeUnresolved(
            path,
            f"{git_dir} is {'a bare git repository' if bare else 'a git directory'}, with no checkout to "
            f"keep a project's memory for: run it in a clone (`git clone {git_dir} <folder>`) or a "
            f"worktree (`git -C {git_dir} worktree add <folder>`) of it",
            folder=os.path.abspath(path),
        )
    return None


def broken_checkout(cwd: str | os.PathLike[str]) -> ScopeUnresolved | None:
    """The error for a ``cwd`` in a linked worktree whose main checkout moved (its ``.git`` file
    points at a gitdir that is gone), saying how to repair it; None when ``cwd`` is not in one.

    Every call that resolves a project from a folder raises it there (``remember``, the lanes,
    ``recall``): searching or writing the global store instead would answer from another store
    without a word."""
    path = os.fspath(cwd)
    if "\x00" in path:
        return None
    broken = _dangling_dotgit(path)
    if broken is None:
        return None
    dotgit, gitdir = broken
    return ScopeUnresolved(
        path,
        f"{dotgit} points to {gitdir}, which does not exist: if the repository's main "
        "checkout was moved, run `git worktree repair <this worktree>` from its new place",
        folder=os.path.abspath(path),
    )


def _dangling_dotgit(cwd: str) -> tuple[Path, Path] | None:
    """The nearest ``.git`` file above ``cwd`` whose gitdir is gone, with that gitdir: a linked
    worktree whose main checkout moved (git itself fails there too). None when the nearest
    ``.git`` is a folder or none is found."""
    start = Path(os.path.realpath(cwd))
    for candidate in (start, *start.parents):
        dotgit = candidate / ".git"
        if dotgit.is_dir():
            return None
        if dotgit.is_file():
            gitdir = _gitdir_from_file(dotgit)
            if gitdir is not None and not gitdir.exists():
                return dotgit, gitdir
    return None


def _git(worktree: Path, *args: str) -> str | None:
    """``git -C worktree args``'s output; None when it fails, or when the repository's config
    would have git read a file that is not a small regular one (``configs_readable``)."""
    dotgit = worktree / ".git"
    gitdir = dotgit if dotgit.is_dir() else _gitdir_from_file(dotgit)
    if gitdir is None or not configs_readable(gitdir):
        return None
    return _run_git("-C", str(worktree), *args)


# git's own bound on nested includes (it refuses a deeper one itself).
_MAX_INCLUDE_DEPTH = 10


def configs_readable(gitdir: Path) -> bool:
    """Whether every config file git reads in this repository is absent or a regular file of at
    most ``_MAX_GIT_FILE_BYTES``: its ``config``, the worktree's ``config.worktree`` and every
    file they include (``[include]`` and ``[includeIf]``, whatever the condition), followed.

    The repository's config is not ours. ``git`` opens an included FIFO and waits for a writer
    (every recall in a new checkout stalled until the 10 s timeout), reads a device or a sparse
    terabyte whole. Such a repository gets no git run at all: its branch still comes from HEAD,
    and what only git can tell (root commits, HEAD's commit) is unknown, as without git.
    """
    common = _read_text(gitdir / "commondir")
    common_dir = gitdir if common is None else Path(os.path.realpath(gitdir / common))
    pending = [(common_dir / "config", 0), (gitdir / "config.worktree", 0)]
    seen: set[Path] = set()
    while pending:
        path, depth = pending.pop()
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            continue  # git skips an include that is not there
        if _empty_for_git(path, st):
            continue
        if not S_ISREG(st.st_mode) or st.st_size > _MAX_GIT_FILE_BYTES:
            return False
        if depth >= _MAX_INCLUDE_DEPTH or path in seen:
            continue
        seen.add(path)
        targets = _include_paths(path)
        if targets is None:
            return False
        pending += [(target, depth + 1) for target in targets]
    return True


def _empty_for_git(path: Path, st: os.stat_result) -> bool:
    """An include git reads as empty: ``/dev/null``, or its stdin (``/dev/stdin``, which
    ``_run_git`` makes ``/dev/null``; stat here saw this process's own stdin)."""
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    if S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev:
        return True
    return os.path.realpath(path) == os.path.realpath("/dev/stdin")


def _include_paths(config: Path) -> list[Path] | None:
    """The files ``config`` includes, as git resolves them (None when git cannot read it).

    git parses the file (``--no-includes``: this file alone), so quoting and continuation lines
    cannot hide an include from this check. Run from ``/``: not inside the repository in question.
    """
    try:
        proc = subprocess.run(
            ["git", "config", "--file", str(config), "--no-includes", "-z", "--get-regexp", _INCLUDE_KEYS],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
            cwd="/",
            env={**os.environ, **_GIT_ENV},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode not in (0, 1):  # 1: no include at all
        return None
    targets = []
    for entry in proc.stdout.split(b"\0"):
        _, newline, raw = entry.partition(b"\n")
        if not newline or not raw:
            continue
        value = os.path.expanduser(raw.decode("utf-8", "surrogateescape"))
        targets.append(Path(value) if os.path.isabs(value) else config.parent / value)
    return targets


_INCLUDE_KEYS = r"^include(if\..*)?\.path$"


# The repository's config is not ours (a cwd may name any folder). In a partial clone git fetches
# a missing object from the "promisor" remote by itself, even for `rev-list`: through an `ext::`
# URL (a shell command) or an ssh remote with core.sshCommand, that ran whatever the config said.
# No transport at all (this overrides every protocol.*.allow), no lazy fetch (git >= 2.44), no prompt.
# And no stdin: a config may include /dev/stdin, which is a terminal or a client's stream here.
_GIT_ENV = {"GIT_ALLOW_PROTOCOL": "", "GIT_NO_LAZY_FETCH": "1", "GIT_TERMINAL_PROMPT": "0"}


def _run_git(*args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="surrogateescape",  # a branch name need not be UTF-8 (``shown_branch``)
            timeout=10,
            check=False,
            env={**os.environ, **_GIT_ENV},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def head_commit(worktree: Path) -> str | None:
    """The full sha of HEAD in ``worktree`` (None in an empty repository or without git)."""
    return _git(worktree, "rev-parse", "--verify", "-q", "HEAD")


def commits_since(worktree: Path, old: str | None, limit: int = 50) -> list[str] | None:
    """``git log --oneline old..HEAD`` (newest first, at most ``limit``); None unless ``old`` is an
    ancestor. ``old`` None is before the repository's first commit: every commit of HEAD."""
    if old is not None and (not old or _git(worktree, "merge-base", "--is-ancestor", old, "HEAD") is None):
        return None  # unknown, or no longer in HEAD's history (amended, rebased, reset)
    # The repository's config is not ours (cwd may name any folder): with log.showSignature set,
    # `git log` runs its gpg.program for every signed commit it lists.
    span = f"{old}..HEAD" if old else "HEAD"
    out = _git(worktree, "log", "--no-show-signature", "--oneline", f"--max-count={limit}", span)
    return None if out is None else [line for line in out.splitlines() if line]


# -- repository fingerprint (what survives a move or a fresh clone) -------------------------------
_root_commits_cache: dict[str, tuple[str, ...]] = {}


def root_commits(worktree: Path) -> tuple[str, ...]:
    """The repository's root commits (``git rev-list --max-parents=0 HEAD``), cached per checkout.

    A subprocess, so callers ask only when a store's record lacks them or a move is checked.
    """
    key = os.fspath(worktree)
    if key not in _root_commits_cache:
        out = _git(worktree, "rev-list", "--max-parents=0", "HEAD")
        found = tuple(sorted(line for line in (out or "").splitlines() if line))
        if not found:
            return ()  # an empty repository (or no git): ask again after the first commit
        _root_commits_cache[key] = found
    return _root_commits_cache[key]


def normalise_remote(url: str) -> str:
    """A remote URL as ``host/path``: scp-style and https agree, credentials and ``.git`` dropped."""
    from urllib.parse import urlsplit

    url = url.strip()
    if "://" in url:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        path = parts.path
        if parts.scheme == "file" or not host:
            host, path = "", parts.path
    elif ":" in url and not url.startswith("/") and "/" not in url.split(":", 1)[0]:
        userhost, path = url.split(":", 1)  # scp-style: [user@]host:path
        host = userhost.rsplit("@", 1)[-1].lower()
    else:
        host, path = "", url  # a local path (a bare repository on this machine)
    path = path.rstrip("/").removesuffix(".git").rstrip("/")
    return f"{host}/{path.lstrip('/')}" if host else path


def remote_urls(toplevel: Path) -> tuple[str, ...]:
    """The normalised URLs of every remote in the main checkout's ``.git/config`` (read from the file)."""
    config = _read_text(toplevel / ".git" / "config") or ""
    urls, in_remote = set(), False
    for line in config.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            in_remote = stripped.lower().startswith("[remote ")
        elif in_remote and "=" in stripped:
            key, value = stripped.split("=", 1)
            if key.strip().lower() in ("url", "pushurl") and value.strip():
                urls.add(normalise_remote(value))
    return tuple(sorted(urls))
