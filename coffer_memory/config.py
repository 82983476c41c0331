"""Settings for a coffer home and the per-store memory configuration (pydantic v2)."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Self
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import InvalidInput
from .home import CONFIG_TOML, HomeLayout
from .models import RetrievalMode

DEFAULT_HOME = Path("~/.coffer")
CONFIG_FILENAME = CONFIG_TOML


def _default_modes() -> list[RetrievalMode]:
    return ["grep", "keyword"]


class MemoryStoreConfig(BaseModel):
    """Configuration of a memory store, with the seed's fields, defaults and ranges.

    The flat ``embedding_*`` fields are legacy: accepted for compatibility and ignored;
    indexing and recall use the global embedding settings.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    retrieval_modes: list[RetrievalMode] = Field(default_factory=lambda: _default_modes(), min_length=1)
    default_mode: RetrievalMode = "keyword"
    embedding_provider: str | None = None
    embedding_model: str | None = None
    embedding_base_url: str | None = None
    embedding_credential_ref: str | None = None
    embedding_dimensions: int = Field(default=768, ge=1, le=8192)
    max_fact_chars: int = Field(default=8192, ge=64, le=32768)
    # Hand-written files larger than this are skipped with a warning (doctor lists them).
    max_file_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    merged_identities: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _default_mode_enabled(self) -> Self:
        if self.default_mode not in self.retrieval_modes:
            raise ValueError(
                f"default_mode {self.default_mode!r} is not one of retrieval_modes {self.retrieval_modes}"
            )
        return self


class EmbeddingSettings(BaseModel):
    """The home-wide embedding configuration (the seed's redesign: global, not per store).

    ``provider``: ``"auto"`` (the built-in multilingual ``"multilingual-e5"`` when
    ``coffer-memory[vector]`` is installed, else ``"minilm"`` when ``coffer-memory[minilm]`` is,
    else none), ``"none"``, ``"multilingual-e5"``, ``"minilm"``, ``"openai"`` or a plugin's name.
    API keys are read from the environment variable ``api_key_env`` or from the system
    keyring through ``credential_ref`` (``"service/username"``); never from a file.
    """

    model_config = ConfigDict(extra="forbid")

    provider: str = "auto"
    model: str | None = None
    base_url: str | None = None
    dimensions: int | None = Field(default=None, ge=1, le=8192)
    api_key_env: str | None = None
    credential_ref: str | None = None
    batch_size: int = Field(default=64, ge=1, le=2048)
    timeout_seconds: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=4, ge=0, le=20)
    retry_max_seconds: float = Field(default=8.0, ge=0)
    # Send "dimensions" in the request (OpenAI text-embedding-3 can shorten its vectors;
    # some servers reject the field, so it is off unless asked for).
    request_dimensions: bool = False


class LLMSettings(BaseModel):
    """The home-wide LLM configuration (the organizer and other LLM-driven operations).

    ``provider``: ``"none"`` (the default: no model, every LLM-driven operation is a no-op),
    ``"openai"`` (any OpenAI-compatible ``/chat/completions`` server: OpenAI, Ollama, vLLM,
    llama.cpp server, OpenRouter) or a plugin's name. API keys are read from the environment
    variable ``api_key_env`` or from the system keyring through ``credential_ref``
    (``"service/username"``); never from a file. ``json_mode`` picks how structured output is
    asked for: ``"auto"`` tries a JSON schema, then JSON object mode, then plain text, and
    remembers what the server accepted; the other values pin one way.
    """

    model_config = ConfigDict(extra="forbid")

    provider: str = Field(default="none", min_length=1)
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    credential_ref: str | None = None
    timeout_seconds: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=20)
    retry_max_seconds: float = Field(default=8.0, ge=0)
    json_mode: Literal["auto", "json_schema", "json_object", "off"] = "auto"
    max_tokens: int = Field(default=2000, ge=1)


class OrganizeSettings(BaseModel):
    """The LLM organizer: how it files the inbox, splits rules, reorganizes, and runs by itself."""

    model_config = ConfigDict(extra="forbid")

    candidates: int = Field(default=3, ge=1, le=10)
    candidate_chars: int = Field(default=6000, ge=200)
    # A rules file longer than this is split into per-topic rules files (one LLM call).
    rules_split_chars: int = Field(default=4000, ge=500)
    reorg_max_steps: int = Field(default=12, ge=1, le=100)
    # Opt-in: organize a store in the background once it has been quiet this long after a write.
    auto: bool = False
    auto_delay_seconds: float = Field(default=30.0, ge=0.0)


class SecuritySettings(BaseModel):
    """What the write path does with a secret (an API key, a token, a password) typed into a memory.

    ``redact`` (default) writes ``[REDACTED:<kind>]`` in its place, ``reject`` refuses the write
    (``MemoryRejected`` with reason ``secret``), ``allow`` writes it as typed.
    """

    model_config = ConfigDict(extra="forbid")

    secrets: Literal["redact", "reject", "allow"] = "redact"


def _has_password(url: str) -> bool:
    """Whether a libpq connection string (URL or ``key=value`` form) carries a password."""
    if "://" in url:
        parts = urlsplit(url)
        return bool(parts.password) or "password" in parse_qs(parts.query)
    return re.search(r"(^|\s)password\s*=", url) is not None


class IndexSettings(BaseModel):
    """Where the derived index lives: ``"sqlite"`` (``<home>/index.db``, the default) or
    ``"postgresql"`` (a team store served by several processes; ``coffer-memory[postgresql]``).

    The PostgreSQL URL comes from the environment variable ``url_env`` (``COFFER_PG_URL``), the
    system keyring entry ``credential_ref`` (``"service/username"``), or ``url``, which must not
    hold a password (libpq then reads ``PGPASSWORD`` or ``~/.pgpass``): a password in a config
    file is refused.
    """

    model_config = ConfigDict(extra="forbid")

    backend: str = Field(default="sqlite", min_length=1)
    url: str | None = None
    url_env: str = Field(default="COFFER_PG_URL", min_length=1)
    credential_ref: str | None = None
    pool_size: int = Field(default=4, ge=1, le=64)

    @field_validator("url")
    @classmethod
    def _no_password(cls, value: str | None) -> str | None:
        if value is not None and _has_password(value):
            raise ValueError(
                "index.url holds a password; put the URL in the environment variable named by "
                "index.url_env (COFFER_PG_URL) or in the keyring (index.credential_ref), or the "
                "password in PGPASSWORD or ~/.pgpass"
            )
        return value


class Settings(BaseModel):
    """Everything a ``coffer_memory.MemoryService`` needs to know about its home.

    ``home`` defaults to ``$COFFER_HOME``, else ``~/.coffer``. A ``config.toml`` in the home
    may set any field (``[memory]`` holds the store defaults).
    """

    model_config = ConfigDict(extra="forbid")

    home: Path = Field(default_factory=lambda: Path(os.environ.get("COFFER_HOME") or DEFAULT_HOME))
    memory: MemoryStoreConfig = Field(default_factory=MemoryStoreConfig)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    organize: OrganizeSettings = Field(default_factory=OrganizeSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    # "auto" picks the available backend with the highest priority; plugins may add names.
    grep_backend: str = Field(default="auto", min_length=1)
    # Stores with at most this many knowledge files are fully stat'ed on every read, so an
    # external edit is seen at once; larger stores check folder mtimes on every read and run
    # the full stat scan at most once per ``reconcile_full_scan_seconds``.
    reconcile_full_scan_max_files: int = Field(default=200, ge=0)
    reconcile_full_scan_seconds: float = Field(default=5.0, ge=0.0)
    busy_timeout_ms: int = Field(default=10_000, ge=0)

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, value: Path) -> Path:
        return Path(os.path.abspath(value.expanduser()))

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
        present, then ``COFFER_*`` environment variables (see ``env_overrides``), then ``overrides``."""
        base = Path(home if home is not None else os.environ.get("COFFER_HOME") or DEFAULT_HOME)
        base = Path(os.path.abspath(base.expanduser()))
        data = read_config_file(base)
        for section, value in env_overrides(os.environ).items():
            if isinstance(value, dict) and isinstance(data.get(section), dict):
                data[section] = {**data[section], **value}
            else:
                data[section] = value
        data.update(overrides)
        data["home"] = base
        index = data.get("index")
        if isinstance(index, dict) and isinstance(index.get("url"), str) and _has_password(index["url"]):
            # Said before validation: pydantic's message would repeat the URL, password and all.
            raise InvalidInput(
                "index.url holds a password, which a config file must never hold; put the URL in "
                "COFFER_PG_URL (or the variable index.url_env names) or the keyring (index.credential_ref)",
                field="index.url",
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise InvalidInput(f"invalid settings: {exc}", field="settings") from exc


def read_config_file(home: Path) -> dict[str, Any]:
    """The parsed ``<home>/config.toml`` (empty when there is none)."""
    cfg = home / CONFIG_FILENAME
    if not cfg.is_file():
        return {}
    try:
        return tomllib.loads(cfg.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{cfg} is not valid TOML: {exc}", field="config") from exc


def setting_keys() -> dict[str, str]:
    """Every setting by dotted key (``llm.model``) with its environment variable (``COFFER_LLM_MODEL``)."""
    keys: dict[str, str] = {}
    for name, field in Settings.model_fields.items():
        section = field.annotation
        if isinstance(section, type) and issubclass(section, BaseModel):
            keys.update({f"{name}.{sub}": f"COFFER_{name}_{sub}".upper() for sub in section.model_fields})
        elif name != "home":  # COFFER_HOME picks the home before any file is read
            keys[name] = f"COFFER_{name}".upper()
    return keys


def is_list_setting(key: str) -> bool:
    """Whether the setting holds a list (given as comma-separated values in the environment)."""
    section, _, name = key.rpartition(".")
    model: type[BaseModel] = Settings.model_fields[section].annotation if section else Settings  # type: ignore[assignment]
    return getattr(model.model_fields[name].annotation, "__origin__", None) is list


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
