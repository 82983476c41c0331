"""The physical limit's side of ``bench/limit.py``: plain apsw FTS5 over coffer's own schema, one
ripgrep process, the least a rebuild, a keyword recall and a grep recall can do on the same data.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

import apsw
from _limit_corpus import FETCH, LIMIT

from coffer_memory._index.fts import keyword_terms
from coffer_memory.plugins.builtin.grep import find_ripgrep

INDEX_TABLES = ("documents", "chunks", "documents_fts", "documents_words")


def index_schema(index_db: Path) -> list[str]:
    """coffer's own CREATE statements of the tables a rebuild fills (and their indexes),
    read from an index it built: the limit pays for the same schema."""
    conn = apsw.Connection(str(index_db), flags=apsw.SQLITE_OPEN_READONLY)
    marks = ",".join("?" * len(INDEX_TABLES))
    try:
        return [
            str(r[0])
            for r in conn.execute(
                # FTS5 shadow tables are their own tbl_name: the virtual tables make them again.
                f"SELECT sql FROM sqlite_master WHERE tbl_name IN ({marks}) AND sql IS NOT NULL "
                "ORDER BY type = 'index'",
                INDEX_TABLES,
            )
        ]
    finally:
        conn.close()


def fts_settings(index_db: Path) -> list[str]:
    """The statements that give the limit's FTS5 tables coffer's own settings of them (e.g. the
    trigram index's ``hashsize``, session 17), read from an index coffer built: a setting both
    could have is not a lead of coffer's over the limit."""
    conn = apsw.Connection(str(index_db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [
            f"INSERT INTO {table} ({table}, rank) VALUES ('{key}', {int(value)})"
            for table in ("documents_fts", "documents_words")
            for key, value in conn.execute(f"SELECT k, v FROM {table}_config WHERE k != 'version'")
            if str(key).isidentifier() and isinstance(value, int)
        ]
    finally:
        conn.close()


def limit_rebuild(db_path: Path, files: Sequence[Path], schema: Sequence[str]) -> apsw.Connection:
    """Read every file, cut its frontmatter, insert one row into each table of coffer's schema
    (documents, chunks, both FTS5 tables) with the body as the text; one transaction."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    conn = apsw.Connection(str(db_path))
    conn.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL")
    for sql in schema:
        conn.execute(sql)
    with conn:
        for rowid, path in enumerate(files, start=1):
            text = path.read_bytes().decode("utf-8")
            body = text.split("\n---\n", 1)[1].strip("\n") if text.startswith("---\n") else text
            store = path.parts[-4]
            doc = str(rowid)
            conn.execute(
                "INSERT INTO documents (id, kind, resource_name, project_id, path, title, content_sha256, "
                "created_at, updated_at) VALUES (?, 'memory', ?, '', ?, '', '', '', '')",
                (doc, store, str(path)),
            )
            conn.execute(
                "INSERT INTO chunks (rowid, id, document_id, kind, resource_name, position) "
                "VALUES (?, ?, ?, 'memory', ?, 0)",
                (rowid, doc, doc, store),
            )
            conn.execute(
                "INSERT INTO documents_fts (rowid, text, resource_name, chunk_id) VALUES (?, ?, ?, ?)",
                (rowid, body, store, doc),
            )
            conn.execute(
                "INSERT INTO documents_words (rowid, text, store) VALUES (?, ?, ?)", (rowid, body, store)
            )
    return conn


def segments(index_db: Path) -> int:
    """How many FTS5 segments of the word index hold terms: a MATCH looks every term up in each."""
    conn = apsw.Connection(str(index_db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return int(conn.execute("SELECT count(DISTINCT segid) FROM documents_words_idx").get)
    finally:
        conn.close()


def limit_keyword(conn: apsw.Connection, query: str) -> list[tuple[int, str]]:
    """One bm25 MATCH over every store, then the matched texts: the least a keyword recall does."""
    terms = keyword_terms(query)
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    ranked = list(
        conn.execute(
            "SELECT rowid FROM documents_words WHERE documents_words MATCH ? "
            "ORDER BY bm25(documents_words, 1.0, 0.0) LIMIT ?",
            (match, FETCH),
        )
    )
    ids = [r[0] for r in ranked]
    marks = ",".join("?" * len(ids))
    texts = dict(conn.execute(f"SELECT rowid, text FROM documents_fts WHERE rowid IN ({marks})", ids))
    return [(i, texts[i]) for i in ids[:LIMIT] if i in texts]


def grep_patterns(query: str) -> list[str]:
    """The fixed strings a grep recall looks for: the phrase, then its words."""
    phrase = " ".join(query.split())
    return [phrase, *(t for t in keyword_terms(query, characters=False) if t != phrase.lower())]


try:  # the same walk as coffer's ripgrep backend, listing the matching files instead of lines
    from coffer_memory.plugins.builtin.grep import RG_SEARCH_FLAGS
except ImportError:  # an older tree (--coffer-src): the flags its backend passed
    RG_SEARCH_FLAGS = tuple(
        shlex.split(
            "--fixed-strings --ignore-case --hidden --no-ignore --no-follow "
            "--glob *.md --glob !.* --no-messages --no-config"
        )
    )


def limit_grep(folders: Sequence[Path], query: str) -> list[str]:
    """One ripgrep process listing the files that hold any pattern: the least a grep recall does."""
    rg = find_ripgrep()
    assert rg is not None, "the limit needs rg (pip install ripgrep)"
    args = [rg, *RG_SEARCH_FLAGS, "--files-with-matches"]
    for pattern in grep_patterns(query):
        args += ["-e", pattern]
    proc = subprocess.run([*args, "--", *map(str, folders)], capture_output=True, check=False)
    return proc.stdout.decode("utf-8", errors="replace").splitlines()
