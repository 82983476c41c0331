"""The tools' structured outputs (Pydantic, at the JSON edge) and their readable text renderings."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from coffer_memory import FactRecord, LaneWrite, MemoryHit, MutationResult, RecallResult, ResumeResult

__all__ = [
    "FactOut",
    "HandoffOut",
    "HitOut",
    "ListMemoryOut",
    "RecallOut",
    "RememberOut",
    "ResumeOut",
]


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


class HitOut(BaseModel):
    """One recall hit."""

    id: str = Field(description="The fact (or lane document) id.")
    title: str
    text: str = Field(description="The matching text.")
    score: float = Field(description="The score of the mode that found it, within its own store.")
    source: str = Field(
        description="Where it was found: <scope>:<file path> (the store's scope and the fact's file)."
    )
    store: str
    path: str | None = Field(description="The Markdown file that holds it.")
    time: datetime

    @classmethod
    def of(cls, hit: MemoryHit) -> HitOut:
        """From a core ``MemoryHit``."""
        return cls(
            id=hit.id,
            title=hit.title,
            text=hit.text,
            score=hit.score,
            source=hit.source,
            store=hit.store,
            path=str(hit.path) if hit.path is not None else None,
            time=hit.time,
        )


class RecallOut(BaseModel):
    """What ``coffer__recall`` found."""

    query: str
    mode: str = Field(description="The retrieval mode that answered.")
    fallback: bool = Field(description="True when the asked mode was unavailable and recall degraded.")
    stores: list[str] = Field(description="The stores searched: the project's (in a git repo), then global.")
    cwd: str = Field(description="The directory the project was resolved from.")
    hits: list[HitOut]

    @classmethod
    def of(cls, query: str, cwd: str, res: RecallResult) -> RecallOut:
        """From a core ``RecallResult``."""
        return cls(
            query=query,
            mode=res.mode,
            fallback=res.fallback,
            stores=list(res.stores),
            cwd=cwd,
            hits=[HitOut.of(h) for h in res.hits],
        )

    def render(self) -> str:
        """A readable account for the model."""
        mode = f"mode {self.mode}" + (", degraded from the mode asked for" if self.fallback else "")
        if not self.hits:
            return (
                f"Nothing in memory matches {self.query!r} ({mode}). If the user tells you, "
                "remember the answer when it will still matter later."
            )
        lines = [f"{_count(len(self.hits), 'memory', 'memories')} for {self.query!r}, best first ({mode}):"]
        for n, hit in enumerate(self.hits, 1):
            lines += ["", f"{n}. {hit.title or hit.id}  [{hit.store}, id {hit.id}]"]
            lines += [f"   {line}" for line in hit.text.strip().splitlines()]
        return "\n".join(lines)


class RememberOut(BaseModel):
    """The fact ``coffer__remember`` wrote."""

    id: str
    title: str
    description: str
    store: str = Field(description="'global' or 'project-<ULID>'.")
    path: str = Field(description="The Markdown file written (the truth; the index is derived).")
    sha256: str | None = Field(description="The sha256 of the file written.")
    created_at: datetime
    tags: list[str] = Field(default_factory=list)
    created: bool = Field(default=True, description="False when this fact was already remembered.")
    redacted: dict[str, int] = Field(
        default_factory=dict, description="Secrets replaced by [REDACTED:<kind>] before writing, by kind."
    )

    @classmethod
    def of(cls, res: MutationResult) -> RememberOut:
        """From a core ``MutationResult``."""
        return cls(
            id=res.fact.id,
            title=res.fact.title,
            description=res.fact.description,
            store=res.store,
            path=str(res.path),
            sha256=res.after_sha256,
            created_at=res.fact.created_at,
            tags=list(res.fact.tags),
            created=res.created,
            redacted=dict(res.receipt.findings) if res.receipt is not None else {},
        )

    def render(self) -> str:
        """A readable account for the model."""
        verb = "Remembered" if self.created else "Already remembered"
        text = f"{verb} {self.title!r} in {self.store} (id {self.id}).\nFile: {self.path}"
        if self.redacted:
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.redacted.items()))
            text += f"\nSecrets redacted before writing: {kinds}."
        return text


class FactOut(BaseModel):
    """One fact as listed."""

    id: str
    title: str
    description: str
    text: str = Field(description="The fact's body.")
    path: str
    sha256: str
    created_at: datetime
    updated_at: datetime
    tags: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, rec: FactRecord) -> FactOut:
        """From a core ``FactRecord``."""
        return cls(
            id=rec.fact.id,
            title=rec.fact.title,
            description=rec.fact.description,
            text=rec.fact.body,
            path=str(rec.path),
            sha256=rec.sha256,
            created_at=rec.fact.created_at,
            updated_at=rec.fact.updated_at,
            tags=list(rec.fact.tags),
        )


class ListMemoryOut(BaseModel):
    """One page of a store's facts, newest first."""

    store: str
    items: list[FactOut]
    next_cursor: str | None = Field(description="Pass back as `cursor` for the next page; null on the last.")

    def render(self) -> str:
        """A readable account for the model."""
        if not self.items:
            return f"No facts in {self.store}."
        lines = [f"{_count(len(self.items), 'fact', 'facts')} in {self.store}, newest first:"]
        for fact in self.items:
            lines.append(
                f"- {fact.title} (id {fact.id}, updated {fact.updated_at:%Y-%m-%d}): {fact.description}"
            )
        if self.next_cursor:
            lines += ["", f"More: call again with cursor={self.next_cursor!r}."]
        return "\n".join(lines)


class ResumeOut(BaseModel):
    """The handoff of the current project and branch."""

    store: str
    branch: str
    head: str | None = Field(description="The commit checked out now.")
    found: bool = Field(description="Whether a handoff was saved for this branch.")
    text: str | None = Field(description="The handoff note.")
    saved_at: datetime | None
    saved_head: str | None = Field(description="The commit checked out when the handoff was saved.")
    head_moved: bool
    new_commits: list[str] | None = Field(
        description="Commits since the handoff (oneline); null when its commit left the history."
    )
    summary: str

    @classmethod
    def of(cls, res: ResumeResult) -> ResumeOut:
        """From a core ``ResumeResult``."""
        scene = res.scene
        return cls(
            store=res.store,
            branch=res.branch,
            head=res.head,
            found=scene is not None,
            text=scene.text if scene else None,
            saved_at=scene.updated_at if scene else None,
            saved_head=scene.head if scene else None,
            head_moved=res.head_moved,
            new_commits=list(res.new_commits) if res.new_commits is not None else None,
            summary=res.summary,
        )


class HandoffOut(BaseModel):
    """The handoff ``coffer__handoff`` saved."""

    store: str
    branch: str
    path: str
    replaced: bool = Field(description="True when an earlier handoff of this branch was replaced.")
    sha256: str | None

    @classmethod
    def of(cls, res: LaneWrite) -> HandoffOut:
        """From a core ``LaneWrite`` (its target says which branch it was saved for)."""
        return cls(
            store=res.store,
            branch=(res.target.branch if res.target is not None else None) or "HEAD",
            path=str(res.path),
            replaced=res.before_sha256 is not None,
            sha256=res.after_sha256,
        )

    def render(self) -> str:
        """A readable account for the model."""
        verb = "Replaced the" if self.replaced else "Saved a"
        return f"{verb} handoff for branch {self.branch!r} in {self.store}.\nFile: {self.path}"
