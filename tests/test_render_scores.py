"""The CLI's recall table never prints a score with an exponent (fixes16)."""

from __future__ import annotations

from datetime import UTC, datetime

from coffer_memory import MemoryHit
from coffer_memory._render import hits_table


def _hit(score: float) -> MemoryHit:
    return MemoryHit(
        id="01M8XASY3XNJ899QNC4BVY5Y3Y",
        text="a fact",
        score=score,
        source="global:/tmp/a.md",
        time=datetime(2026, 12, 3, tzinfo=UTC),
        title="a",
    )


def test_tiny_and_large_scores_print_in_fixed_decimals() -> None:
    """A keyword score of ``2.834e-06`` was printed as such (docs/quickstart.md shows the others)."""
    lines = hits_table([_hit(12.25), _hit(0.5), _hit(2.834e-06), _hit(0.0), _hit(123456.7)]).splitlines()[2:]
    scores = [line.split()[1] for line in lines]
    assert scores == ["12.25", "0.5", "0.000002834", "0", "123457"]
    assert not any("e-" in s or "e+" in s for s in scores)
