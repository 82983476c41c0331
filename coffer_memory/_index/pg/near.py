"""Near spellings on PostgreSQL: a keyword recall that found nothing else, neither as words nor as
substrings, looks for near spellings of its words as on SQLite (``index/near.py``): the chunks
holding the most of a word's trigrams (or of its swapped forms) are read by ``ILIKE``, which
pg_trgm's GIN index answers where the extension is there, and scored by ``near.NearQuery``."""

from __future__ import annotations

from typing import Any

from ..fts import TRIGRAM, plan_query
from ..near import NEAR_ROWS, NearQuery
from .text import SEARCHED, escape_like


def near_rows(
    conn: Any, select: str, store: str, query: str, rows: int, only: tuple[str, list[object]]
) -> list[tuple[Any, ...]]:
    """At most ``rows`` rows of ``select`` (``PostgresIndex._SELECT``, its score the nearness)
    holding a near spelling of a word of ``query`` in ``store``, the nearest first; ``only``:
    the filter's SQL and parameters."""
    asked = NearQuery.of(plan_query(query).fts_terms, TRIGRAM)
    if asked is None:
        return []
    where, params = only
    likes = [f"%{escape_like(p)}%" for p in asked.pieces]
    count = " + ".join([f"({SEARCHED} ILIKE %s)::int"] * len(likes))
    any_of = " OR ".join([f"{SEARCHED} ILIKE %s"] * len(likes))
    # The candidates holding the most pieces first, as SQLite reads them by the trigrams' bm25.
    sql = select.format(score=f"({count})") + (
        f"WHERE c.store = %s AND ({any_of}){where} ORDER BY score DESC, length(c.text), d.path "
        f"LIMIT {min(NEAR_ROWS, max(50, 2 * int(rows)))}"
    )
    found = conn.execute(sql, (*likes, store, *likes, *params)).fetchall()
    scored = asked.scored(((i, row[4], -float(row[5])) for i, row in enumerate(found)), rows)
    return [(*found[int(i)][:5], nearness) for nearness, i, _ in scored]
