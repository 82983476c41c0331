"""The ``postgresql`` index backend: one shared recall index for a team store (``[index] backend``).

psycopg 3 and psycopg-pool come with ``pip install 'coffer-memory[postgresql]'``; they are imported
when the backend is built, never by ``import coffer_memory``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..._config import Settings
from ..._errors import InvalidInput
from ..._home import errors_log_for
from ...plugins.builtin._http import resolve_secret
from ...plugins.hookspecs import IndexBackend, IndexBackendFactory, hookimpl


def database_url(settings: Settings) -> str:
    """The connection URL: the variable ``index.url_env``, else the keyring's ``index.credential_ref``,
    else ``index.url`` (which holds no password). ``InvalidInput`` when none is set."""
    import os

    from_env = os.environ.get(settings.index.url_env)
    if from_env:
        return _utf8(from_env, settings.index.url_env)
    if settings.index.credential_ref:
        url = resolve_secret(None, settings.index.credential_ref, InvalidInput)
        if url:
            return _utf8(url, f"the keyring entry {settings.index.credential_ref}")
    if settings.index.url:
        return _utf8(settings.index.url, "index.url")
    raise InvalidInput(
        f"index.backend is 'postgresql' but no database URL is set: export {settings.index.url_env}="
        "postgresql://user@host/db (or set index.credential_ref to a keyring entry)",
        field="index.url",
    )


def _utf8(url: str, where: str) -> str:
    """``url`` when libpq can take it: bytes that are not UTF-8 in an environment variable (Python
    keeps them as lone surrogates) were a raw ``UnicodeEncodeError`` from psycopg at start-up."""
    try:
        url.encode("utf-8")
    except UnicodeEncodeError as exc:
        # Not the URL itself: it may hold a password.
        raise InvalidInput(
            f"the database URL in {where} is not UTF-8 text (a byte that is not UTF-8 at character "
            f"{exc.start + 1}): write it in UTF-8, with %XX escapes for other bytes",
            field="index.url",
        ) from None
    return url


def build(settings: Settings) -> IndexBackend:
    """A connected ``PostgresIndex`` for ``settings`` (its schema created or migrated, and bound to
    the home's memory folder: ``IndexFolderMismatch`` when the database follows another)."""
    try:
        from .backend import PostgresIndex
    except ImportError as exc:
        raise InvalidInput(
            "index.backend is 'postgresql' but psycopg is not installed: pip install 'coffer-memory[postgresql]'",
            field="index.backend",
        ) from exc
    from .failures import keep_pool_log

    keep_pool_log(errors_log_for(settings.home))  # the pool's lines, never the CLI's stderr
    return PostgresIndex(
        database_url(settings),
        pool_size=settings.index.pool_size,
        memory_dir=settings.memory_dir,
        vectors_wanted=bool({"vector", "hybrid"} & set(settings.memory.retrieval_modes)),
        timeout=settings.index.timeout_seconds,
    )


@hookimpl
def register_index_backends(register: Callable[[str, IndexBackendFactory], None]) -> None:
    """The built-in ``postgresql`` backend."""
    register("postgresql", build)
