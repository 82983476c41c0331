"""Keep the word index (``documents_words``) in few FTS5 segments, so keyword recall reads few.

FTS5 writes every transaction's new terms as a new segment (a b-tree) and merges segments only
now and then: by default after every 64 leaf pages written (``automerge``), or when one level
holds 16 (``crisismerge``). A MATCH looks each of its terms up in every segment, so each one
costs every search: a cold rebuild left one per commit (one per store at 1k facts, five at 10k,
where the plain one-transaction load has one or two), and single writes pile up to 15 one-page
segments, which made a MATCH at 1k facts 0.41 ms against 0.25 ms in one segment
(docs/benchmarks.md, session 6).

- After a bulk load that wrote at least a quarter of the index, the word index is optimized
  into one segment: it holds about a tenth of what the trigram index holds, so this costs ~2 ms
  at 1k facts and ~17 ms at 10k (a rebuild takes 0.15 s and 1.3 s). The trigram index is left as
  it is: merging it cost 0.13 s at 10k, and only queries the word index cannot answer read it.
- After any other write to the word index, one bounded incremental merge step runs in the same
  transaction (``'merge'``, at most ``MERGE_PAGES`` pages written): levels holding
  ``usermerge`` (4) segments are merged, so small writes keep 3-7 segments instead of up to 22,
  for ~0.05 ms more per write and no write that rewrites the whole index at once.

- Single writes still leave a few segments (3-7 at 1k facts, 10 in a 10k home built by
  ``remember`` calls), and each costs every MATCH (the plain FTS5 query took 1.14x as long on such
  a 10k index as on one segment). So maintenance settles them (``settle``): a long-lived
  process's background full scan optimizes a word index of more than ``SETTLED`` segments, and
  an explicit ``reindex`` one of more than one. Reads never do (the CLI's included).

These run inside the writer's transaction, under its locks: readers (WAL) keep reading the last
committed state and never wait, and other processes' writers wait on SQLite's busy timeout as
for any write. A read that changes nothing writes nothing, so it never merges.
"""

from __future__ import annotations

import logging

import apsw

from .db import IndexDB

log = logging.getLogger("coffer_memory._index")

# Pages written per incremental merge step after a small write: enough to fold a level of
# one-page segments into one, never a whole large segment in one write.
MERGE_PAGES = 16
# A bulk load that wrote at least 1/OPTIMIZE_SHARE of the word index's rows optimizes it: the
# optimize costs ~1.7 us per indexed row, the load ~130 us per file, so at most ~5% of the load.
OPTIMIZE_SHARE = 4
# Pending terms the trigram index keeps in memory before it writes them out as a segment
# (FTS5's ``hashsize``, 1 MiB by default). A bulk load's trigram terms overflowed 1 MiB every few
# hundred files, and each flush made a segment that automerge then merged again: 8 MiB cut a
# 10k-file load's SQL by about a quarter (docs/benchmarks.md, session 17). Only a transaction
# that writes more than 1 MiB of terms sees a difference; the index's contents are the same.
TRIGRAM_HASH_BYTES = 8 << 20
# Segments a background scan leaves as they are: an optimize costs ~17 ms at 10k facts, so with
# writes arriving all the time it runs at most once per scan (every 5-60 s), ~0.3% of a core.
SETTLED = 2


def merge_step(db: IndexDB) -> None:
    """One bounded incremental merge of the word index (inside the caller's transaction)."""
    db.conn.execute("INSERT INTO documents_words (documents_words, rank) VALUES ('merge', ?)", (MERGE_PAGES,))


def optimize(db: IndexDB) -> None:
    """Merge the word index into one segment (inside the caller's transaction)."""
    db.conn.execute("INSERT INTO documents_words (documents_words) VALUES ('optimize')")


def bulk_hash(db: IndexDB) -> None:
    """Let the trigram index hold ``TRIGRAM_HASH_BYTES`` of pending terms (inside the caller's
    transaction; a setting of the table, written once per index)."""
    held = db.scalar("SELECT v FROM documents_fts_config WHERE k = 'hashsize'")
    if held != TRIGRAM_HASH_BYTES:
        db.conn.execute(
            "INSERT INTO documents_fts (documents_fts, rank) VALUES ('hashsize', ?)", (TRIGRAM_HASH_BYTES,)
        )


def after_bulk_load(db: IndexDB, rows_written: int) -> None:
    """Settle the word index after a bulk load wrote ``rows_written`` of its rows (one transaction):
    optimized into one segment when the load was a large share of it, one merge step otherwise."""
    if rows_written <= 0:
        return
    try:
        with db.transaction():
            total = int(db.scalar("SELECT count(*) FROM chunks") or 0)
            if rows_written * OPTIMIZE_SHARE >= total:
                optimize(db)
            else:
                merge_step(db)
    except apsw.BusyError:  # the load is committed; another writer's long transaction only delays this
        log.info("word index not merged after a bulk load: the index was busy")


def settle(db: IndexDB, most: int = SETTLED) -> bool:
    """Optimize the word index when it holds more than ``most`` segments (its own transaction).

    Maintenance, never part of a read: False when the index was left as it is (few segments, or
    the index busy, read-only or failing: a later scan tries again)."""
    try:
        if segment_count(db) <= most:
            return False
        with db.transaction():
            optimize(db)
        return True
    except apsw.Error as exc:
        log.info("word index not merged: %s", exc)
        return False


def segment_count(db: IndexDB) -> int:
    """How many segments of the word index hold terms (for tests and benchmarks)."""
    return int(db.scalar("SELECT count(DISTINCT segid) FROM documents_words_idx") or 0)
