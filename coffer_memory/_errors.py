"""The coffer-memory exception tree.

Every error a caller can see derives from ``CofferError`` and carries a stable
``code`` string (the seed's names) plus context attributes. HTTP statuses and MCP tool
errors are mapped from ``code`` by the adapters, never here::

    CofferError
    ├── MemoryStoreNotFound   MEMORY_STORE_NOT_FOUND   (.store)
    ├── MemoryNotFound        MEMORY_NOT_FOUND         (.store, .fact_id)
    ├── SessionNotFound       SESSION_NOT_FOUND        (.agent, .session_id)
    ├── MemoryRejected        MEMORY_REJECTED          (.reason: "empty" | "too_long" | "secret", .limit, .member)
    ├── MemoryConflict        MEMORY_CONFLICT          (.expected_sha256, .actual_sha256)
    ├── ScopeUnresolved       SCOPE_UNRESOLVED         (.cwd)
    ├── InvalidInput          INVALID_INPUT            (.field)
    │   ├── InvalidCursor     INVALID_CURSOR           (.reason: malformed | forged | other_query | stale)
    │   ├── StoreNotDeletable INVALID_INPUT            (.store: the global store)
    │   ├── StoreNotMergeable INVALID_INPUT            (.reason: same_store | global | link)
    │   ├── InvalidImport     INVALID_INPUT            (.reason, .source, .member: a file coffer will not import)
    │   └── InvalidExport     INVALID_INPUT            (.reason, .member, .limit: an export import would refuse)
    ├── AgentConfigInvalid    AGENT_CONFIG_INVALID     (.path, .reason)
    ├── IndexUnavailable      INDEX_UNAVAILABLE        (.backend, .reason: a shared index backend is down, no room to open index.db, or it is busy)
    │   ├── IndexFolderMismatch INDEX_UNAVAILABLE      (.bound_to, .folder_id: it follows another memory folder)
    │   ├── ServiceClosed     INDEX_UNAVAILABLE        (a call on a MemoryService after close(), or cut off by it)
    │   └── LedgerUnavailable INDEX_UNAVAILABLE        (.path: ledger.db busy past the busy timeout, or unopenable)
    ├── StorageFull           STORAGE_FULL             (.path: the disk or file size limit; nothing half-written)
    ├── StorageNotWritable    STORAGE_NOT_WRITABLE     (.path: permissions or a read-only file system; nothing written)
    └── EmbeddingUnavailable  EMBEDDING_UNAVAILABLE    (internal: recall degrades, never raised to callers)
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, ClassVar

ECHO_LIMIT = 64
"""The most characters of a caller's id or name an error message repeats (``safe_echo``)."""
PATH_ECHO_LIMIT = 512
"""The most characters of a caller's path an error message repeats (a real path fits whole)."""

# Terminal escape sequences whole (CSI ``ESC [ … m``, OSC ``ESC ] … BEL``, two-character ``ESC x``).
_TERMINAL_ESCAPE = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-_]?)|\x9b[0-?]*[ -/]*[@-~]?"
)


def safe_echo(value: object, limit: int = ECHO_LIMIT) -> str:
    """``value`` as an error message may repeat it: terminal escapes and other control or format
    characters (bidi overrides, zero-width) removed, a lone surrogate (a byte that was not UTF-8)
    written as ``\\xff``, and cut to ``limit`` characters (``…`` last).

    An id or a name a caller sent is echoed so that they can see which one was meant; it may be
    a terminal escape or a megabyte, and every face (a terminal, a log, an agent's context) shows
    it. (Secrets are not looked for here: the patterns live above this layer.)
    """
    head = str(value)[: limit * 4 + 1]
    text = _TERMINAL_ESCAPE.sub("", head)
    text = "".join(_shown(c) for c in text if not unicodedata.category(c).startswith("C") or _surrogate(c))
    return text if len(text) <= limit and len(head) <= limit * 4 else text[: limit - 1] + "…"


def _undecoded(c: str) -> bool:
    """A byte that was not UTF-8 in a command-line argument or a file name (Python's
    ``surrogateescape``): shown as ``\\xNN``, as a branch name's are, not dropped (an id of such bytes
    only would read as ``''``)."""
    return "\udc80" <= c <= "\udcff"


def _surrogate(c: str) -> bool:
    return "\ud800" <= c <= "\udfff"


def _shown(c: str) -> str:
    """A lone surrogate written out (``\\xNN`` for an undecoded byte, else ``\\uNNNN``): as text it
    cannot be printed or encoded, and dropped it would name nothing."""
    if _undecoded(c):
        return f"\\x{ord(c) - 0xDC00:02x}"
    return f"\\u{ord(c):04x}" if _surrogate(c) else c


MEMBER_ECHO_LIMIT = 200
"""The most characters of an import's file name an error repeats: a store's path in an archive
(``stores/project-<26 characters>/knowledge/...``) is longer than ``ECHO_LIMIT`` before its name."""


def _tail_echo(value: str, limit: int) -> str:
    """``safe_echo`` for a path, whose end says which file: cut at the front (``…`` first)."""
    tail = value[-4 * limit :]
    text = safe_echo(tail, 4 * limit)
    if len(text) <= limit and tail == value:
        return text
    return "…" + text.rstrip("…")[-(limit - 1) :]


MESSAGE_LIMIT = 1000
"""The most characters of an error's message (``CofferError`` cuts a longer one)."""
DETAIL_LIMIT = 1024
"""The most characters of one text in an error's details (a path fits whole)."""


def _bounded(text: str, limit: int) -> str:
    """``text`` without terminal escapes or control and format characters (a tab and a line break
    are kept), cut to ``limit`` characters: the backstop under every message and detail."""
    if len(text) <= limit and text.isprintable():
        return text
    head = _TERMINAL_ESCAPE.sub("", text[: limit * 4 + 1])
    head = "".join(c for c in head if c in "\t\n" or not unicodedata.category(c).startswith("C"))
    return head if len(head) <= limit and len(text) <= limit * 4 else head[: limit - 1] + "…"


def _bounded_detail(value: Any) -> Any:
    if isinstance(value, str):
        return _bounded(value, DETAIL_LIMIT)
    if isinstance(value, (list, tuple)) and any(isinstance(v, str) for v in value):
        return [_bounded_detail(v) for v in value[:100]]
    return value


class CofferError(Exception):
    """Root of every error raised by coffer-memory.

    Whatever a raise put in them, ``message`` is at most ``MESSAGE_LIMIT`` characters and each text
    of ``details`` at most ``DETAIL_LIMIT``, with no terminal escape or control character: a value a
    caller sent (a megabyte ``mode``, an escape that retitles the terminal) came back whole in the
    error on every face. Raises that name a caller's value cut it further with ``safe_echo``.
    """

    code: ClassVar[str] = "COFFER_ERROR"

    def __init__(self, message: str, **details: Any) -> None:
        message = _bounded(message, MESSAGE_LIMIT)
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = {k: _bounded_detail(v) for k, v in details.items() if v is not None}

    def to_dict(self) -> dict[str, Any]:
        """The error as the wire envelope's inner object: ``{code, message, details}``."""
        return {"code": self.code, "message": self.message, "details": dict(self.details)}


class MemoryStoreNotFound(CofferError):
    """A store name that is not ``global`` or ``project-<26-char ULID>`` (``why``: or another reason
    no store answers to it)."""

    code = "MEMORY_STORE_NOT_FOUND"

    def __init__(self, store: str, why: str | None = None) -> None:
        why = why or "store names are 'global' or 'project-<26-char ULID>'"
        super().__init__(f"memory store {safe_echo(store)!r} not found: {why}", store=safe_echo(store))
        self.store = store


class MemoryNotFound(CofferError):
    """No fact (or lane file) with this id in this store."""

    code = "MEMORY_NOT_FOUND"

    def __init__(self, store: str, fact_id: str) -> None:
        super().__init__(
            f"memory {safe_echo(fact_id)!r} not found in store {safe_echo(store)!r}",
            store=safe_echo(store),
            fact_id=safe_echo(fact_id),
        )
        self.store = store
        self.fact_id = fact_id


class SessionNotFound(CofferError):
    """No past session with this id in the agent's files."""

    code = "SESSION_NOT_FOUND"

    def __init__(self, agent: str | None, session_id: str) -> None:
        where = f"{safe_echo(agent)} sessions" if agent else "any agent's sessions"
        super().__init__(
            f"session {safe_echo(session_id)!r} not found in {where}",
            agent=None if agent is None else safe_echo(agent),
            session_id=safe_echo(session_id),
        )
        self.agent = agent
        self.session_id = session_id


class MemoryRejected(CofferError):
    """The text cannot become a fact: ``reason`` is ``"empty"``, ``"too_long"`` or ``"secret"``.

    ``secret``: ``[security] secrets = "reject"`` and the text holds one; ``kinds`` counts them.
    ``member``: in an import, the entry refused (an archive's ``stores/<store>/<path>``, another
    tool's file and id), cleaned and cut to ``MEMBER_ECHO_LIMIT`` characters.
    """

    code = "MEMORY_REJECTED"

    def __init__(
        self,
        reason: str,
        *,
        length: int | None = None,
        limit: int | None = None,
        kinds: dict[str, int] | None = None,
        any_store: bool = False,
        member: str | None = None,
    ) -> None:
        if reason == "too_long" and any_store:
            # Checked before the store is known (so nothing is resolved or provisioned for it):
            # ``limit`` is then the highest any store may set, not this store's own.
            message = f"memory rejected: text is {length} characters, more than any store allows ({limit})"
        elif reason == "too_long":
            message = f"memory rejected: text is {length} characters, the limit is {limit}"
        elif reason == "secret":
            found = ", ".join(f"{n} {k}" for k, n in sorted((kinds or {}).items()))
            message = f'memory rejected: it holds a secret ({found}); [security] secrets = "reject"'
        else:
            message = "memory rejected: text is empty"
        details: dict[str, object] = {"length": length, "limit": limit}
        if kinds is not None:
            details["kinds"] = dict(kinds)
        if member is not None:  # an import's file, out of thousands: said, bounded and cleaned
            member = _tail_echo(member, MEMBER_ECHO_LIMIT)
            message = f"{member}: {message}"
            details["member"] = member
        super().__init__(message, reason=reason, **details)
        self.reason = reason
        self.limit = limit
        self.member = member


class MemoryConflict(CofferError):
    """A compare-and-swap write saw a different file than the caller read."""

    code = "MEMORY_CONFLICT"

    def __init__(self, store: str, fact_id: str, expected_sha256: str, actual_sha256: str) -> None:
        super().__init__(
            f"memory {safe_echo(fact_id)!r} changed since it was read (expected sha256 {expected_sha256[:12]}…, "
            f"found {actual_sha256[:12]}…); nothing was written",
            store=safe_echo(store),
            fact_id=safe_echo(fact_id),
            expected_sha256=expected_sha256,
            actual_sha256=actual_sha256,
        )
        self.expected_sha256 = expected_sha256
        self.actual_sha256 = actual_sha256


class ScopeUnresolved(CofferError):
    """``scope="project"`` was asked for a directory that is not inside a git repository."""

    code = "SCOPE_UNRESOLVED"

    def __init__(
        self, cwd: str, reason: str = "not inside a git repository", *, folder: str | None = None
    ) -> None:
        # ``folder``: what a relative ``cwd`` ('.') stood for, which a notebook's reader may not know.
        shown = repr(safe_echo(cwd, PATH_ECHO_LIMIT))
        if folder and folder != cwd:
            shown += f" ({safe_echo(folder, PATH_ECHO_LIMIT)})"
        super().__init__(f"cannot resolve a project scope for {shown}: {reason}", cwd=cwd)
        self.cwd = cwd


class InvalidInput(CofferError):
    """An argument is malformed (a bad cursor, an unknown mode, a limit out of range...)."""

    code = "INVALID_INPUT"

    def __init__(self, message: str, *, field: str | None = None, **details: Any) -> None:
        super().__init__(message, field=field, **details)
        self.field = field


class KeyNamedTwice(InvalidInput):
    """A JSON object names one key twice (``{"text": "a", "text": "b"}``), raised by
    ``keys_once_each``. ``key`` is the key; ``details['key']`` says it too."""

    def __init__(self, key: str) -> None:
        super().__init__(
            f"the key {safe_echo(key, 80)!r} is named twice in one object", field="body", key=key
        )
        self.key = key


def keys_once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook`` for a request body: the object as a dict, or
    ``KeyNamedTwice`` for a key it names twice. ``json.loads`` alone keeps the last value, where
    other parsers keep the first: a proxy or a log before the face may have read another request
    than the one served, so ``coffer-api`` and ``coffer-mcp`` refuse it."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                raise KeyNamedTwice(key)
            seen.add(key)
    return out


def check_limit(limit: object, most: int) -> None:
    """``limit`` is an int (a bool is not one) from 1 to ``most``, else InvalidInput saying what it is."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        shown = f"{type(limit).__name__} {limit!r}"
    elif not 1 <= limit <= most:
        shown = repr(limit)
    else:
        return
    raise InvalidInput(f"limit must be an integer from 1 to {most}, not {shown}", field="limit")


def check_query(query: object, most: int) -> None:
    """``query`` is a string with something besides blanks, no NUL, valid Unicode (SQLite and
    ripgrep take UTF-8 only) and at most ``most`` characters, else InvalidInput saying which."""
    if not isinstance(query, str):
        raise InvalidInput("query must be a string", field="query")
    if not query.strip():
        raise InvalidInput("query is empty", field="query")
    if "\x00" in query:
        raise InvalidInput("query contains a NUL character", field="query")
    if not query.isascii():
        try:
            query.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(
                "query contains a lone surrogate (not valid Unicode text)", field="query"
            ) from None
    if len(query) > most:
        raise InvalidInput(f"query is longer than {most} characters", field="query")


class InvalidCursor(InvalidInput):
    """A pagination cursor that is malformed, not ours, from another query or store, or stale.

    Stale means the store changed since the cursor was made: start again from the first page
    (``cursor=None``); coffer never restarts silently.
    """

    code = "INVALID_CURSOR"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, field="cursor", reason=reason)
        self.reason = reason


class StoreNotDeletable(InvalidInput):
    """The global store cannot be deleted (clear its facts instead)."""

    def __init__(self, store: str) -> None:
        super().__init__(f"the {store} store cannot be deleted; clear it instead", field="store", store=store)
        self.store = store


class StoreNotMergeable(InvalidInput):
    """Two stores that cannot be merged: ``reason`` is ``same_store``, ``global`` (only project stores
    merge: the global store is never retired, and project memory does not belong in it) or
    ``link`` (a store folder that is a symbolic link is never followed)."""

    def __init__(self, source: str, into: str, reason: str, message: str) -> None:
        super().__init__(message, field="store", reason=reason, source=source, into=into)
        self.reason = reason
        self.source = source
        self.into = into


class InvalidImport(InvalidInput):
    """An import source coffer refuses as a whole, before anything is written.

    ``reason`` is one of ``unknown_format``, ``corrupt``, ``unsafe_path`` (zip-slip: absolute or
    ``..`` member names), ``symlink``, ``too_large``, ``bad_json`` (with ``line``), ``checksum``
    (a file that does not match the export's manifest), ``collision`` (two members that differ
    only by case or Unicode normalisation: ``member`` and ``other``), ``not_text`` (a NUL byte or
    a lone surrogate in ``member``), ``not_regular`` (a FIFO, socket or device) or ``not_found``.
    """

    def __init__(
        self,
        reason: str,
        message: str,
        *,
        source: str,
        member: str | None = None,
        line: int | None = None,
        other: str | None = None,
    ) -> None:
        if source not in message:  # say which file, once
            message = f"{safe_echo(source, PATH_ECHO_LIMIT)}: {message}"
        super().__init__(
            message, field="source", reason=reason, source=source, member=member, line=line, other=other
        )
        self.reason = reason
        self.source = source
        self.member = member
        self.line = line
        self.other = other


class InvalidExport(InvalidInput):
    """An export coffer will not write, because its own import would refuse it; nothing is written.

    ``reason``: ``too_large`` (``limit`` is the limit it would pass: a file over ``[memory]
    max_file_bytes``, more members, bytes or manifest bytes than import reads, or a zip packed over
    its ratio), ``not_text`` (a file holding a NUL byte), ``unreadable`` (a file the process
    may not read), ``unsafe_path`` (a file name import
    refuses) or ``collision`` (two names that are one file on macOS or Windows). ``member`` names
    the file, as ``stores/<store>/<path>``, when one is to blame.
    """

    def __init__(
        self, reason: str, message: str, *, member: str | None = None, limit: int | None = None
    ) -> None:
        super().__init__(message, field="stores", reason=reason, member=member, limit=limit)
        self.reason = reason
        self.member = member
        self.limit = limit


class AgentConfigInvalid(CofferError):
    """An agent's config file (or coffer's own ``agents.json``) cannot be read, so it is not written.

    Coffer never overwrites a file it cannot parse: fix or move the file, then run the command again.
    """

    code = "AGENT_CONFIG_INVALID"

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}; nothing was written", path=path, reason=reason)
        self.path = path
        self.reason = reason


class StorageFull(CofferError):
    """The disk is full (or a file size limit was hit) while writing ``path``; nothing was half-written."""

    code = "STORAGE_FULL"

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot write {path}: {reason}; nothing was written", path=path, reason=reason)
        self.path = path


class StorageNotWritable(CofferError):
    """A store's folder or file cannot be changed by this process (no write permission, a
    read-only file system): ``path`` names it, ``reason`` is the system's word. Nothing was
    written; reads of the store still work."""

    code = "STORAGE_NOT_WRITABLE"

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(
            f"cannot change {path}: {reason} (this process may not write there); nothing was written",
            path=path,
            reason=reason,
        )
        self.path = path


class IndexUnavailable(CofferError):
    """A shared index backend (``[index] backend``, e.g. PostgreSQL) cannot be reached or failed;
    ``backend`` names it and ``reason`` says what its driver reported. Nothing was written: a write
    takes the backend's lock before it touches a file. Also the local index (``backend`` "sqlite")
    when ``index.db`` cannot be opened for want of room (a full disk, a file size limit), or
    another process held its write lock past ``busy_timeout_ms``."""

    code = "INDEX_UNAVAILABLE"

    def __init__(self, backend: str, reason: str) -> None:
        super().__init__(f"the {backend} index is unavailable: {reason}", backend=backend, reason=reason)
        self.backend = backend
        self.reason = reason


class IndexFolderMismatch(IndexUnavailable):
    """The shared index is bound to another memory folder than this home's (docs/team.md): the
    folder carries another identity (``folder_id``), or none. Refused before anything is pushed
    or removed, so a member whose ``memory`` is not the team's folder cannot empty the index."""

    def __init__(self, backend: str, reason: str, *, bound_to: str | None, folder_id: str | None) -> None:
        super().__init__(backend, reason)
        self.details.update({k: v for k, v in (("bound_to", bound_to), ("folder_id", folder_id)) if v})
        self.bound_to = bound_to
        self.folder_id = folder_id


class ServiceClosed(IndexUnavailable):
    """The ``MemoryService`` was closed: a call started after ``close()``, or one still running when
    ``close()`` stopped waiting for it and closed the index under it. Nothing was half-written (a
    write is one transaction; a fact file is renamed into place whole): open a new service."""

    def __init__(self) -> None:
        super().__init__("service", "the memory service is closed; open a new MemoryService")


class LedgerUnavailable(IndexUnavailable):
    """``ledger.db``, the record of which agent sessions were distilled (``backend`` "ledger"),
    could not be used for another reason than damage (which is repaired): another process held
    its write lock past ``busy_timeout_ms`` (a long write), or it could not be opened (``reason``
    says which). The session is left for the next distillation, which sends no turn twice."""

    def __init__(self, path: str, reason: str) -> None:
        CofferError.__init__(
            self,
            f"the distillation ledger {path} is unavailable: {reason}; "
            "the session is left for the next distillation",
            backend="ledger",
            reason=reason,
            path=path,
        )
        self.backend = "ledger"
        self.reason = reason
        self.path = path


class EmbeddingUnavailable(CofferError):
    """The embedder could not run. Internal: recall degrades to keyword and sets ``fallback``."""

    code = "EMBEDDING_UNAVAILABLE"
