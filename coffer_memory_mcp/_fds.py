"""The stdio wire on private descriptors, for ``coffer-mcp``'s fast path and the SDK path alike."""

from __future__ import annotations

import os
from typing import BinaryIO

__all__ = ["claim_stdio"]


def claim_stdio() -> tuple[BinaryIO, BinaryIO]:
    """The wire on private descriptors; fd 0 reads /dev/null and fd 1 writes stderr from now on,
    as the SDK's ``stdio_server`` arranges, so no stray print or child process can tear a frame."""
    wire_in = os.fdopen(os.dup(0), "rb", buffering=0)
    wire_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return wire_in, wire_out
