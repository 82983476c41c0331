"""DTOs of store lifecycle: per-store config, merge, and the kind-agnostic resource view."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from coffer_memory import StoreConfig, StoreInfo, StoreMerge

from .schemas import STORE, Mode, _Out

if TYPE_CHECKING:
    MemoryStoreOut = BaseModel
else:
    MemoryStoreOut = STORE.model

LEGACY_NOTE = (
    "{key} is a legacy per-store embedding field: accepted and ignored "
    "(indexing and recall use the home's [embedding] settings)"
)


class MemoryStoreSettings(_Out):
    """The seed's MemoryStoreConfig, as the store runs with it."""

    retrieval_modes: list[Mode]
    default_mode: Mode
    embedding_provider: str | None = Field(description="Legacy: accepted, ignored.")
    embedding_model: str | None = Field(description="Legacy: accepted, ignored.")
    embedding_base_url: str | None = Field(description="Legacy: accepted, ignored.")
    embedding_credential_ref: str | None = Field(description="Legacy: accepted, ignored.")
    embedding_dimensions: int = Field(description="Legacy: accepted, ignored.")
    max_fact_chars: int
    max_file_bytes: int = Field(description="Home-wide only ([memory] in config.toml).")
    merged_identities: list[str] = Field(description="Project ULIDs merged into this store (managed).")


class MemoryStoreConfigOut(_Out):
    """A store's configuration: what it runs with, what it sets itself, and where that is kept."""

    store: str
    config: MemoryStoreSettings
    overrides: dict[str, Any] = Field(description="The keys this store sets itself (its store.json).")
    path: str = Field(description="Absolute path of the store.json that holds them.")
    ignored: list[str] = Field(description="Legacy keys of this request: accepted, not stored.")
    notes: list[str] = Field(description="One sentence per ignored key.")

    @classmethod
    def of(cls, view: StoreConfig) -> MemoryStoreConfigOut:
        """From the core's StoreConfig."""
        return cls(
            store=view.store,
            config=MemoryStoreSettings(**dataclasses.asdict(view.config)),
            overrides=dict(view.overrides),
            path=str(view.path),
            ignored=list(view.ignored),
            notes=[LEGACY_NOTE.format(key=k) for k in view.ignored],
        )


class MergeIn(BaseModel):
    """Where to merge the store named in the path."""

    model_config = ConfigDict(extra="forbid")  # a misspelt field is refused, not dropped

    into: str = Field(description="The store that receives it (global or project-<ULID>).")
    dry_run: bool = Field(default=False, description="Report what would move; write nothing.")
    cwd: str | None = Field(
        default=None,
        description=(
            "The client's checkout (an absolute path): when ``into`` holds no memory yet, it may be "
            "that checkout's store, made by this merge. Without it such an ``into`` is not found."
        ),
    )


class FileChangeOut(_Out):
    """One file the merge wrote (or would write) in the receiving store."""

    path: str
    action: Literal["created", "replaced", "appended", "deleted"]
    before_sha256: str | None
    after_sha256: str | None


class SiblingOut(_Out):
    """A same-name file kept beside the receiving store's own."""

    source_path: str
    written_as: str


class StoreMergeOut(_Out):
    """What merging a store did (or would do); paths are relative to the store folders."""

    source: str
    into: str
    dry_run: bool
    already_merged: bool = Field(description="Merged before; nothing to do.")
    retired: bool = Field(description="The source store was removed.")
    identity_changed: bool
    moved: list[str]
    siblings: list[SiblingOut]
    journal_entries: int = Field(description="Entries added to journal days both stores had.")
    unchanged: list[str]
    skipped: list[str]
    changes: list[FileChangeOut]

    @classmethod
    def of(cls, m: StoreMerge) -> StoreMergeOut:
        """From the core's StoreMerge."""
        return cls(
            source=m.source,
            into=m.into,
            dry_run=m.dry_run,
            already_merged=m.already_merged,
            retired=m.retired,
            identity_changed=m.identity_changed,
            moved=list(m.moved),
            siblings=[SiblingOut(source_path=a, written_as=b) for a, b in m.siblings],
            journal_entries=m.journal_entries,
            unchanged=list(m.unchanged),
            skipped=list(m.skipped),
            changes=[
                FileChangeOut(
                    path=str(r.path),
                    action=r.action,
                    before_sha256=r.before_sha256,
                    after_sha256=r.after_sha256,
                )
                for r in m.receipts
            ],
        )


ResourceKind = Literal["memory"]


class ResourceOut(_Out):
    """A resource of the kind-agnostic API: here always a memory store, with its configuration."""

    kind: ResourceKind
    name: str
    config: MemoryStoreSettings
    store: MemoryStoreOut
    ignored: list[str] = Field(default_factory=list, description="Legacy keys of this request: ignored.")
    notes: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, info: StoreInfo, view: StoreConfig) -> ResourceOut:
        """From a store and its configuration."""
        cfg = MemoryStoreConfigOut.of(view)
        return cls(
            kind="memory",
            name=info.name,
            config=cfg.config,
            store=MemoryStoreOut(**STORE.dump(info, exists=info.store_dir.is_dir())),
            ignored=cfg.ignored,
            notes=cfg.notes,
        )


class ResourceListOut(_Out):
    """Resources of one kind."""

    items: list[ResourceOut]


class ResourcePatchIn(BaseModel):
    """A change to a resource: its config (a JSON merge patch; null removes a key)."""

    model_config = ConfigDict(extra="forbid")  # a misspelt field is refused, not dropped

    config: dict[str, Any] = Field(default_factory=dict)
