"""The layout of a coffer home in one place: every file and folder coffer keeps under it.

    <home>/
      config.toml            optional settings
      index.db               derived SQLite index (+ -wal, -shm), rebuildable from memory/
      ledger.db              which agent sessions were distilled
      agents.json            coffer's record of agent installs and native-memory toggles
      cursor.key             signs pagination cursors (0600, made on first use; machine-local)
      audit/                 the audit log: events-<start>.jsonl segments (append-only, machine-local)
      cache/                 what the faces record to start faster, what coffer-hook gave each session
      locks/                 per-store flock files (and agents.lock), outside memory/
      logs/                  hook.log (rotated), sweep stamps of coffer-hook, errors.log of the CLI
      memory/                THE TRUTH: global/ and projects/<ULID>/

A light module (no third-party imports): ``coffer-hook`` uses it too. Per-store paths inside
``memory/`` are built by ``store.paths``.
"""

from __future__ import annotations

import os
import pwd
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, NamedTuple

CONFIG_TOML: Final = "config.toml"
INDEX_DB: Final = "index.db"
LEDGER_DB: Final = "ledger.db"
AGENTS_JSON: Final = "agents.json"
LOCKS_DIR: Final = "locks"
LOGS_DIR: Final = "logs"
MEMORY_DIR: Final = "memory"
HOOK_LOG: Final = "hook.log"
ERRORS_LOG: Final = "errors.log"
INDEX_REPAIR_LOCK: Final = "index-repair.lock"
CURSOR_KEY: Final = "cursor.key"
AUDIT_DIR: Final = "audit"
CACHE_DIR: Final = "cache"
AUDIT_LOCK: Final = "audit.lock"
AUDIT_SEGMENT_GLOB: Final = "events-*.jsonl"

ENTRIES: Final = (
    CONFIG_TOML,
    INDEX_DB,
    LEDGER_DB,
    AGENTS_JSON,
    CURSOR_KEY,
    AUDIT_DIR + "/",
    CACHE_DIR + "/",
    LOCKS_DIR + "/",
    LOGS_DIR + "/",
    MEMORY_DIR + "/",
)
"""Every top-level entry of a home, folders with a trailing slash (the docs' home tree lists each)."""


def check_home(home: Path) -> bool:
    """``InvalidInput`` (field ``home``) when coffer cannot keep its files in ``home``: it, or the
    nearest folder above it that exists, must be a folder this process may write to. False (no
    error) for a home that exists with its ``memory`` folder and may be read, not written (a
    read-only mount, another user's home): its memory is read, and writes fail typed.

    Only looks (creates nothing): a home that is a file, or sits on a read-only file system, failed
    later with an ``OSError`` from whichever file came first (the index, a lock, the audit log).
    """
    found = home
    while not found.exists() and found != found.parent:
        found = found.parent
    if not found.is_dir():
        why = f"{found} is not a folder"
    elif found == home and not os.access(home, os.W_OK) and _readable(HomeLayout(home).memory):
        return False
    elif not os.access(found, os.W_OK | os.X_OK):
        read_only = os.statvfs(found).f_flag & os.ST_RDONLY
        why = (
            f"{found} is on a read-only file system" if read_only else f"{found} is not writable by this user"
        )
    else:
        return True
    from ._errors import InvalidInput

    raise InvalidInput(f"coffer home {home} cannot be used: {why}", field="home", home=str(home))


def errors_log_for(home: Path) -> Path:
    """Where a process appends the lines it keeps off the terminal for ``home`` (the CLI's
    tracebacks of unexpected errors, psycopg_pool's lines): ``logs/errors.log``, or
    ``coffer-errors-<uid>.log`` in the temporary folder for a home this process may read, not
    write (``check_home``), or not use at all. A read-only home gets nothing written, even where
    its ``logs/`` was left writable; its private index is in the temporary folder too."""
    try:
        writable = check_home(home)
    except Exception:  # InvalidInput: a home coffer cannot use
        writable = False
    return HomeLayout(home).errors_log if writable else temp_errors_log()


def temp_errors_log() -> Path:
    """``coffer-errors-<uid>.log`` in the temporary folder: the errors log of no home."""
    import tempfile

    return Path(tempfile.gettempdir()) / f"coffer-errors-{os.getuid()}.log"


def append_log(path: Path, text: str) -> None:
    """Append ``text`` to the log file ``path``: made 0600 with its folder, never through a
    symbolic link, and only to a regular file of this user's own (``OSError`` otherwise).

    ``temp_errors_log`` names a file in a folder every user may write (``/tmp``): a link or a
    file someone else put there first would have received every traceback appended after it,
    and those name what was asked. Linux refuses some of that on its own (``protected_symlinks``,
    ``protected_regular``), macOS and a non-sticky ``$TMPDIR`` do not."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise PermissionError(f"{path} is not a file of this user's own: nothing was appended to it")
        handle.write(text)


def user_home() -> Path:
    """The user's own folder, which ``~`` names: ``$HOME`` when it is set and not empty, else the
    home of this user's passwd entry (as ``os.path.expanduser`` does when ``HOME`` is unset).

    ``os.path.expanduser`` took an empty ``HOME`` as the root, so the home became ``/.coffer``,
    and a user with no passwd entry got a relative ``~/.coffer`` under the current folder.
    ``InvalidInput`` (field ``home``) naming ``COFFER_HOME`` when neither says where it is.
    """
    if os.environ.get("HOME"):
        return Path(os.environ["HOME"])
    try:
        found = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        found = ""
    if found:
        return Path(found)
    from ._errors import InvalidInput

    raise InvalidInput(
        "cannot tell the user's home folder: HOME is unset or empty and this user has no passwd "
        "entry with one; set COFFER_HOME (or pass --home) to the folder coffer should use",
        field="home",
    )


def expand_user(path: str | os.PathLike[str]) -> Path:
    """``path`` with a leading ``~`` (alone or followed by ``/``) replaced by ``user_home()``;
    ``~name`` forms are left to ``os.path.expanduser``."""
    text = os.fspath(path)
    if text == "~" or text.startswith("~/"):
        return user_home() / text[2:]
    return Path(os.path.expanduser(text))


class ConfigNotReadable(ValueError):
    """``config.toml`` is there but is no file to read (a FIFO, a folder, a link to nothing), or
    cannot be read; the message names it. A ``ValueError``, as TOML that does not parse is:
    ``Settings`` says it as ``InvalidInput``, ``coffer-hook`` stays silent."""


def read_config_text(path: Path) -> str | None:
    """The text of the ``config.toml`` at ``path`` (followed if a link), None when there is none.

    Opened without blocking and checked to be a regular file before it is read: ``is_file()``
    then a read skipped a FIFO, a folder or a dangling link without a word (the home ran on
    defaults), and a FIFO put in its place between the two held the read for good.
    ``ConfigNotReadable`` for those; invalid UTF-8 is ``UnicodeDecodeError``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):  # the home is not there, or a file (said elsewhere)
        if not os.path.islink(path):
            return None
        raise ConfigNotReadable(
            f"{path} is a symbolic link to {os.readlink(path)}, which is not there, not a file"
        ) from None
    except OSError as exc:
        raise ConfigNotReadable(f"cannot read {path}: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device"
            raise ConfigNotReadable(f"{path} is {kind}, not a file; coffer reads its settings from a file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read()
    except OSError as exc:
        raise ConfigNotReadable(f"cannot read {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    return data.decode("utf-8")


def _readable(folder: Path) -> bool:
    return folder.is_dir() and os.access(folder, os.R_OK | os.X_OK)


def audit_segment_stamp(at: datetime) -> str:
    """The part of an audit segment's name that says when it starts (sorts by time)."""
    return at.astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")


class HomeLayout(NamedTuple):
    """The paths of one home."""

    home: Path

    @property
    def config(self) -> Path:
        """``config.toml``."""
        return self.home / CONFIG_TOML

    @property
    def index_db(self) -> Path:
        """``index.db``: the derived index."""
        return self.home / INDEX_DB

    @property
    def ledger_db(self) -> Path:
        """``ledger.db``: the distilled-sessions ledger."""
        return self.home / LEDGER_DB

    @property
    def agents_json(self) -> Path:
        """``agents.json``: the agent install registry."""
        return self.home / AGENTS_JSON

    @property
    def cursor_key(self) -> Path:
        """``cursor.key``: the HMAC key that signs pagination cursors (0600)."""
        return self.home / CURSOR_KEY

    @property
    def audit(self) -> Path:
        """``audit/``: the append-only audit log (machine-local; never rebuilt, never synced)."""
        return self.home / AUDIT_DIR

    def audit_segment(self, stamp: str) -> Path:
        """``audit/events-<stamp>.jsonl``: one segment of the audit log, starting at ``stamp``."""
        return self.audit / AUDIT_SEGMENT_GLOB.replace("*", stamp)

    @property
    def audit_lock(self) -> Path:
        """``locks/audit.lock``: one appender at a time, across threads and processes."""
        return self.locks / AUDIT_LOCK

    def store_version(self, store: str) -> Path:
        """``locks/<store>.version``: a counter every write transaction on ``store`` advances."""
        return self.locks / f"{store}.version"

    @property
    def locks(self) -> Path:
        """``locks/``: inter-process lock files."""
        return self.home / LOCKS_DIR

    @property
    def agents_lock(self) -> Path:
        """``locks/agents.lock``: one agent install at a time."""
        return self.locks / "agents.lock"

    def store_lock(self, store: str) -> Path:
        """``locks/<store>.lock`` (the store name is validated by the caller)."""
        return self.locks / f"{store}.lock"

    @property
    def logs(self) -> Path:
        """``logs/``: coffer-hook's log and stamps."""
        return self.home / LOGS_DIR

    @property
    def hook_log(self) -> Path:
        """``logs/hook.log``."""
        return self.logs / HOOK_LOG

    @property
    def errors_log(self) -> Path:
        """``logs/errors.log``: tracebacks of unexpected CLI errors (the command's name, never its arguments)."""
        return self.logs / ERRORS_LOG

    @property
    def index_repair_lock(self) -> Path:
        """``locks/index-repair.lock``: one process at a time moves a damaged index aside."""
        return self.locks / INDEX_REPAIR_LOCK

    def sweep_stamp(self, agent: str) -> Path:
        """``logs/sweep-<agent>.stamp``: when coffer-hook last started a sweep for ``agent``."""
        return self.logs / f"sweep-{agent}.stamp"

    def left_mark(self, agent: str) -> Path:
        """``logs/left-<agent>.mark``: ``agent`` has session ends left in ``ledger.db`` (a hint, so that
        coffer-hook's session start looks for them without opening the ledger)."""
        return self.logs / f"left-{agent}.mark"

    @property
    def memory(self) -> Path:
        """``memory/``: the truth."""
        return self.home / MEMORY_DIR
