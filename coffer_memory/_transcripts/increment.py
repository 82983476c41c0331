"""Which turns of a session are still to distill, given what the ledger says was distilled before.

Agents append to a session's file when it goes on (``claude -p --continue``/``--resume`` end with
another SessionEnd; ``codex exec resume`` appends to the same rollout), so a session is distilled
more than once. Each ledger row keeps the content hash of the turns it covered, their count and a
short digest per turn. The hash of a transcript's content is a running hash over its turns, so the
hash of every prefix is known at no cost:

- **grown**: some prefix of the turns hashes to a distilled content, and no distilled content was
  longer: only the turns after that prefix are new;
- **rewritten** (a turn edited or removed, the file compacted by hand): a distilled content was
  longer than the longest distilled prefix. Only turns the ledger never saw (by digest) after that
  prefix are new: an edited turn is distilled, unchanged ones are not sent again, and what is
  already in the journal stays (it came from what the session really said at the time; deleting
  it is ``forget_session``'s job, on the user's word).

Rows written before turns were tracked have no count and no digests; their content hash still
marks the distilled prefix of a grown session.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import attrs

from .models import Message

# The turns just before the new ones, sent as context (marked as already distilled): "yes, do
# that" means nothing without the question.
CONTEXT_TURNS = 2
DIGEST_CHARS = 16


@attrs.frozen
class Distilled:
    """One distilled content of a session, as the ledger recorded it."""

    content_sha256: str
    message_count: int
    message_digests: tuple[str, ...]
    elsewhere: str = ""
    """The id of the *other* session this content was distilled under ("" for the session itself):
    a fork copies its parent's turns under a new id (see ``Ledger.distilled_elsewhere``)."""


@attrs.frozen
class Increment:
    """The turns to distill now, the turns before them to show as context, and why."""

    new: tuple[Message, ...]
    context: tuple[Message, ...]
    total: int
    rewritten: bool = False
    elsewhere: str = ""
    """The session whose distillation covered the turns before the new ones, when not this one."""

    @property
    def partial(self) -> bool:
        """True when some turns of the session were distilled before."""
        return len(self.new) < self.total

    def describe(self) -> str | None:
        """A line saying what part of the session is distilled (None for the whole of it)."""
        if not self.partial:
            return None
        if not self.new:  # "turns 8-7 of 7" said nothing
            return f"no new turns: all {self.total} were distilled before"
        if self.rewritten:
            return (
                f"the transcript was rewritten since it was last distilled: {len(self.new)} of "
                f"{self.total} turns are new or changed"
            )
        first = self.total - len(self.new) + 1
        done = f"turns {first}-{self.total} of {self.total}; turns 1-{first - 1} were distilled before"
        return (
            f"{done}, as session {self.elsewhere} (the two begin with the same turns)"
            if self.elsewhere
            else done
        )


def _encode(message: Message) -> bytes:
    return json.dumps([message.role, message.text], ensure_ascii=False).encode() + b"\n"


def message_digest(message: Message) -> str:
    """A short fingerprint of one turn (role and text)."""
    return hashlib.sha256(_encode(message)).hexdigest()[:DIGEST_CHARS]


def prefix_hashes(messages: Sequence[Message]) -> list[str]:
    """The content hash of ``messages[:k]`` for every ``k`` from 1 to ``len(messages)``."""
    digest = hashlib.sha256()
    hashes = []
    for message in messages:
        digest.update(_encode(message))
        hashes.append(digest.copy().hexdigest())
    return hashes


def content_hash(messages: Sequence[Message]) -> str:
    """The ledger key of a session's content: a running hash over its turns, as read."""
    hashes = prefix_hashes(messages)
    return hashes[-1] if hashes else hashlib.sha256().hexdigest()


def first_answer(messages: Sequence[Message]) -> int | None:
    """The index of a session's first assistant turn (None while it has none)."""
    return next((i for i, m in enumerate(messages) if m.role == "assistant"), None)


def family_head(messages: Sequence[Message]) -> tuple[str, ...]:
    """The digests of a session's turns up to and including its first answer: what another session
    must begin with to be of its family (a fork copies its parent's answers; two runs of one prompt
    share the prompt only). Empty while the session has no answer: it has no family."""
    answer = first_answer(messages)
    return () if answer is None else tuple(message_digest(m) for m in messages[: answer + 1])


def undistilled(messages: Sequence[Message], done: Sequence[Distilled]) -> Increment:
    """The turns of ``messages`` not covered by the distilled contents ``done``: this session's own
    rows, and rows of other sessions (``elsewhere``) whose turns begin as this session's do, up to
    its first answer at least. Sharing the first prompt only (two runs of ``claude -p "<same
    prompt>"``) counts for nothing: the prompt is this session's own question, sent with it."""
    own = [d for d in done if not d.elsewhere]
    known = {d.content_sha256 for d in own}
    hashes = prefix_hashes(messages)
    start = next((k for k in range(len(hashes), 0, -1) if hashes[k - 1] in known), 0)
    elsewhere = ""
    digests = [message_digest(m) for m in messages]
    answer = first_answer(messages)
    for row in sorted((d for d in done if d.elsewhere), key=lambda d: d.elsewhere):
        shared = _shared_turns(digests, hashes, row)
        # A prefix this session distilled itself wins a tie; a share short of the first answer is none.
        if shared > start and answer is not None and shared > answer:
            start, elsewhere = shared, row.elsewhere
    longest = max((d.message_count for d in own), default=0)
    rest = list(range(start, len(messages)))
    rewritten = longest > start
    if rewritten:
        seen = {digest for d in own for digest in d.message_digests}
        rest = [i for i in rest if digests[i] not in seen]
    first = rest[0] if rest else len(messages)
    return Increment(
        new=tuple(messages[i] for i in rest),
        context=tuple(messages[max(first - CONTEXT_TURNS, 0) : first]) if rest else (),
        total=len(messages),
        rewritten=rewritten,
        elsewhere=elsewhere,
    )


def _shared_turns(digests: Sequence[str], hashes: Sequence[str], row: Distilled) -> int:
    """How many of the first turns (``digests``, their ``prefix_hashes``) another session's
    distilled ``row`` covered: a parent distilled before its fork covers the turns the fork copied,
    a fork distilled before its parent the parent's turns up to the fork. A row written before turns
    were tracked has only its content hash: it covers the prefix that hashes to it, if any."""
    if not row.message_digests:
        return next((k for k in range(len(hashes), 0, -1) if hashes[k - 1] == row.content_sha256), 0)
    shared = 0
    for mine, theirs in zip(digests, row.message_digests, strict=False):
        if mine != theirs:
            break
        shared += 1
    return shared
