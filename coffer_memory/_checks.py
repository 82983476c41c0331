"""Content checks the service plugs into the Writer (``store.writer.ContentCheck``).

The truth layer knows only the hook; what a check does (here: secrets, with the transcript
scrubber's patterns) is decided by the settings.
"""

from __future__ import annotations

from collections import Counter

from ._config import SecuritySettings
from ._errors import MemoryRejected
from ._store.writer import ContentCheck


class SecretCheck:
    """Redact (default), reject or allow a secret typed into a memory (``[security] secrets``)."""

    def __init__(self, policy: str) -> None:
        self.policy = policy

    def __call__(self, text: str, field: str, findings: dict[str, int]) -> str:
        """The text to write; counts what was found by kind into ``findings`` (never the values)."""
        from ._transcripts.secrets import redact_secrets  # its patterns cost start-up; reads never need them

        counts: Counter[str] = Counter()
        redacted = redact_secrets(text, counts)
        if not counts:
            return text
        if self.policy == "reject":
            raise MemoryRejected("secret", kinds=dict(counts))
        for kind, n in counts.items():
            findings[kind] = findings.get(kind, 0) + n
        return redacted


def content_checks(security: SecuritySettings) -> list[ContentCheck]:
    """The checks every write runs for these settings (none for ``secrets = "allow"``)."""
    return [] if security.secrets == "allow" else [SecretCheck(security.secrets)]
