"""Per-store configuration: the seed's ``MemoryStoreConfig`` for one store.

A store's own settings are truth in its ``store.json`` (``"config"``: only the keys set for that
store), for the global store too (``memory/global/store.json``), so they travel with the store
when it is synced. What a store runs with is the home's ``[memory]`` section (``config.toml``,
``COFFER_MEMORY_*``) with the store's keys laid over it.

What each key does per store:

- ``max_fact_chars``: the text limit of ``remember``, ``edit_fact`` and ``journal_append`` there.
- ``default_mode``: the mode a recall runs when none is asked for; ``retrieval_modes``: the modes a
  recall may run. A recall reads them from the first store it searches (the project store
  inside a repository, else the first named store). ``retrieval_modes`` may only narrow the
  home's list: the vector index is built home-wide.
- ``embedding_provider``, ``embedding_model``, ``embedding_base_url``, ``embedding_credential_ref``,
  ``embedding_dimensions``: the seed's legacy flat embedding fields. Accepted and ignored (never
  stored); the answer lists them in ``ignored``. Embeddings come from the home's ``[embedding]``.
- ``max_file_bytes``: home-wide only (the indexer's guard); ``InvalidInput`` per store.
- ``merged_identities``: managed by coffer (``stores merge``, moves); it reads back from the
  store's identity, and a change is refused (sending the current value back is accepted).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ._config import MemoryStoreConfig
from ._errors import InvalidInput, safe_echo
from ._store.identity import STORE_FILE, StoreIdentity, read_identity
from ._store.paths import StorePaths
from .vocabulary import RETRIEVAL_MODES

__all__ = [
    "FACT_CHARS_CEILING",
    "HOME_ONLY_KEYS",
    "LEGACY_KEYS",
    "STORE_KEYS",
    "StoreConfig",
    "effective_config",
    "store_settings",
    "updated_settings",
]

STORE_KEYS = ("retrieval_modes", "default_mode", "max_fact_chars")
"""The keys a store may set for itself (each one has an effect; see the module docstring)."""
LEGACY_KEYS = (
    "embedding_provider",
    "embedding_model",
    "embedding_base_url",
    "embedding_credential_ref",
    "embedding_dimensions",
)
"""The seed's flat embedding fields: accepted on the wire and ignored."""
HOME_ONLY_KEYS = ("max_file_bytes",)
MANAGED_KEY = "merged_identities"
FACT_CHARS_CEILING: int = next(
    f.metadata["le"] for f in dataclasses.fields(MemoryStoreConfig) if f.name == "max_fact_chars"
)
"""The highest ``max_fact_chars`` any store may set (texts are checked against it before the store is known)."""


@attrs.frozen
class StoreConfig:
    """One store's configuration as it runs, and where it comes from.

    ``config`` is the effective ``MemoryStoreConfig`` (the home's ``[memory]`` with the store's own
    keys over it, ``merged_identities`` from the store's identity); ``overrides`` the keys the store
    sets itself; ``ignored`` the legacy keys a change carried (accepted, not stored); ``path`` the
    ``store.json`` that holds ``overrides``.
    """

    store: str
    config: MemoryStoreConfig
    overrides: dict[str, Any] = attrs.field(hash=False)
    path: Path
    ignored: tuple[str, ...] = ()
    changed: bool = False


def effective_config(home: MemoryStoreConfig, identity: StoreIdentity | None) -> MemoryStoreConfig:
    """The home's store defaults with a store's own keys over them (bad stored keys are skipped)."""
    identity = identity or StoreIdentity()
    own = {k: v for k, v in identity.config.items() if k in STORE_KEYS}
    base = dataclasses.asdict(home)
    try:
        return MemoryStoreConfig.model_validate(
            {**base, **own, MANAGED_KEY: list(identity.merged_identities)}
        )
    except ValueError:  # pydantic's ValidationError is one
        # A hand-edited store.json must not stop reads or writes: the home's settings apply.
        return MemoryStoreConfig.model_validate({**base, MANAGED_KEY: list(identity.merged_identities)})


_seen: dict[StorePaths, tuple[str, tuple[int, int, int, int], MemoryStoreConfig, MemoryStoreConfig]] = {}
_SEEN_MAX = 256
_files: dict[StorePaths, str] = {}


def store_settings(home: MemoryStoreConfig, sp: StorePaths) -> MemoryStoreConfig:
    """The configuration store ``sp`` runs with (the home's when it sets nothing).

    Asked on every remember and recall: the parsed file is kept while its stat (size, times,
    inode) stays the same, so the common case costs one ``stat``.
    """
    held = _seen.get(sp)
    path = held[0] if held is not None else _files.get(sp)
    if path is None:  # a store without the file is asked on every recall too: its path kept
        if len(_files) >= _SEEN_MAX:
            _files.clear()
        path = _files[sp] = str(sp.root / STORE_FILE)
    elif held is None and not os.access(path, os.F_OK, follow_symlinks=False):
        # Not there before, not there now: ``access`` says so without the FileNotFoundError the
        # stat below raised on every recall (~5 k instructions, kw29b).
        return home
    try:
        st = os.stat(path, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return home
    key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    if held is not None and held[1] == key and held[2] is home:
        return held[3]
    identity = read_identity(sp)
    config = home if identity is None or not identity.config else effective_config(home, identity)
    if len(_seen) >= _SEEN_MAX:
        _seen.clear()
    _seen[sp] = (path, key, home, config)
    return config


def updated_settings(
    home: MemoryStoreConfig, identity: StoreIdentity, changes: Mapping[str, Any]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A store's new own keys after ``changes`` (a JSON merge patch: ``None`` removes a key).

    Returns the new overrides and the legacy keys that were ignored. Raises ``InvalidInput``
    (with the key as ``field``) for an unknown, home-only or managed key, or a bad value.
    """
    if not isinstance(changes, Mapping):
        raise InvalidInput("config changes must be an object of setting: value", field="config")
    overrides = {k: v for k, v in identity.config.items() if k in STORE_KEYS}
    ignored: list[str] = []
    for key, value in changes.items():
        if key in LEGACY_KEYS:
            ignored.append(key)
        elif key in HOME_ONLY_KEYS:
            raise InvalidInput(
                f"{key} is a home-wide setting: set it under [memory] in config.toml", field=key
            )
        elif key == MANAGED_KEY:
            if value is not None and value != list(identity.merged_identities):
                raise InvalidInput(
                    "merged_identities is managed by coffer (coffer stores merge); it cannot be set",
                    field=key,
                )
        elif key not in STORE_KEYS:
            known = ", ".join((*STORE_KEYS, *LEGACY_KEYS))
            raise InvalidInput(f"unknown store setting {safe_echo(key)!r}; one of {known}", field=key)
        elif value is None:
            overrides.pop(key, None)
        else:
            overrides[key] = value
    modes = overrides.get("retrieval_modes")
    outside = (
        [m for m in modes if m in RETRIEVAL_MODES and m not in home.retrieval_modes]
        if isinstance(modes, list)
        else []
    )
    if outside:
        raise InvalidInput(
            f"retrieval_modes {outside} are not enabled for the home ({home.retrieval_modes}); "
            "a store may only narrow them (set [memory] retrieval_modes in config.toml)",
            field="retrieval_modes",
        )
    try:
        checked = MemoryStoreConfig.model_validate({**dataclasses.asdict(home), **overrides})
    except ValueError as exc:  # pydantic's ValidationError for a field, a plain one across fields
        errors = getattr(exc, "errors", None)
        first = errors()[0] if callable(errors) else {"loc": (), "msg": str(exc)}
        # The one rule across fields (default_mode among retrieval_modes) has no location.
        field = str(first["loc"][0]) if first["loc"] else "default_mode"
        raise InvalidInput(f"invalid store setting {field}: {first['msg']}", field=field) from None
    # Stored as validated (e.g. "1000" -> 1000), so store.json holds clean JSON values.
    dumped = dataclasses.asdict(checked)
    return {k: dumped[k] for k in STORE_KEYS if k in overrides}, tuple(ignored)
