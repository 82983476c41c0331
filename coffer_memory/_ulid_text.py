"""ULIDs as text, written out instead of imported: python-ulid costs ~80 ms to import, which
``coffer-hook`` would pay on every agent session start."""

from __future__ import annotations

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's base32 digits, as ULIDs use them


# Two base32 digits per entry: 13 lookups of 10 bits make a ULID's 130 bits.
_CROCKFORD_PAIRS = [a + b for a in CROCKFORD for b in CROCKFORD]


def crockford_ulid(raw: bytes) -> str:
    """16 bytes as a 26-character ULID string (Crockford base32, as ``ulid.ULID.from_bytes`` prints it).

    Written out here because importing python-ulid costs ~80 ms, which ``coffer-hook`` pays on
    every agent session start (and its encoder took 10 us per id of a rebuild); a test pins it
    to the library's output.
    """
    v = int.from_bytes(raw, "big")
    p = _CROCKFORD_PAIRS
    # Written out (a rebuild makes one per file): the comprehension it replaces ran ~150 bytecodes.
    first = p[v >> 120 & 1023] + p[v >> 110 & 1023] + p[v >> 100 & 1023] + p[v >> 90 & 1023]
    middle = p[v >> 80 & 1023] + p[v >> 70 & 1023] + p[v >> 60 & 1023] + p[v >> 50 & 1023]
    last = p[v >> 40 & 1023] + p[v >> 30 & 1023] + p[v >> 20 & 1023] + p[v >> 10 & 1023] + p[v & 1023]
    return first + middle + last
