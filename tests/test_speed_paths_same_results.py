"""Faster paths give exactly what the plain ones gave (issue #15 items 3 and 4): coverage
scores against a per-text reference, per-store keyword lists against separate searches, the
rendered-frontmatter reader against YAML, and a rebuild through the fast paths against one
through the reference paths, row by row."""

from __future__ import annotations

import contextlib
import random
import unicodedata
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import attrs
import pytest

from coffer_memory import MemoryService
from coffer_memory._index import coverage
from coffer_memory._index.cjk import CJK_RUN, has_cjk, index_text
from coffer_memory._index.coverage import COVERAGE_WEIGHT, by_coverage
from coffer_memory._index.fts import keyword_terms, search_chunks, search_chunks_many
from coffer_memory._index.migrations import WORDS_TABLE
from coffer_memory._index.reindex import Reindexer
from coffer_memory._models import MemoryFact
from coffer_memory._store import fastmeta
from coffer_memory._store.files import (
    FactParseError,
    ParsedFile,
    clean_tag,
    format_time,
    parse_fact,
    render_fact,
    split_frontmatter,
)

# -- coverage ------------------------------------------------------------------------------------
VOCABULARY = [
    "deploy",
    "deploying",
    "Deployed",
    "migrations",
    "migration",
    "café",
    "CAFÉ",
    "naïve",
    "ünïcode",
    "部署",
    "数据库迁移",
    "の",
    "ｆｕｌｌｗｉｄｔｈ",
    "７３０５８４１９６２７３０５８４１９６",  # fullwidth digits (NFKC makes them ASCII)
    "7305841962730584196",  # a long run of digits: one token, which porter leaves alone
    "7\u0301305841962730584196",  # digits once diacritics are removed
    "x7305841962730584196y",
    "make-release",
    "e.g.",
    "v1.2",
    "🚀",
    "\u2063",
    "\n",
    "relational",
    "hoping",
    "happiness",
    "",
]


Texts = Mapping[int, tuple[str, str, str]]


def _reference(
    conn: apsw.Connection, terms: Sequence[str], ranked: Sequence[tuple[int, float]], texts: Texts
) -> object:
    """``by_coverage`` as first written: every term and every text tokenized on its own."""
    weight = COVERAGE_WEIGHT
    if len(terms) < 2 or not ranked:
        return list(ranked)
    tokenize = conn.fts5_tokenizer(*coverage._TOKENIZER)

    def tokens(text: str, reason: int) -> list[str]:
        found = tokenize(text.encode("utf-8"), reason, None, include_offsets=False, include_colocated=False)
        return [str(t) for t in found]

    wanted = []
    for term in terms:
        found = tokens(term, apsw.FTS5_TOKENIZE_QUERY)
        cjk = tuple(t for t in found if has_cjk(t))
        if found:
            wanted.append((frozenset(found).difference(cjk), cjk))
    if len(wanted) < 2:
        return list(ranked)
    scored = []
    for rowid, score in ranked:
        row = texts.get(rowid)
        text = row[1] if row else ""
        if not text.isascii():
            text = unicodedata.normalize("NFKC", text)
        words = set(tokens(CJK_RUN.sub(" ", text) if has_cjk(text) else text, apsw.FTS5_TOKENIZE_DOCUMENT))
        share = sum(1 for latin, cjk in wanted if latin <= words and all(c in text for c in cjk))
        scored.append((rowid, score * (1.0 + weight * share / len(wanted))))
    return sorted(scored, key=lambda r: (r[1], r[0]))


def test_coverage_scores_equal_the_per_text_reference() -> None:
    conn = apsw.Connection(":memory:")
    r = random.Random(15)
    for _ in range(400):
        n = r.randint(0, 12)
        texts = {
            i: ("c", " ".join(r.choice(VOCABULARY) for _ in range(r.randint(0, 8))), "s")
            for i in range(n)
            if r.random() < 0.95  # now and then a row whose text is missing
        }
        ranked = [(i, -r.choice([1.0, 2.0, r.uniform(0.1, 9.0)])) for i in range(n)]
        terms = [r.choice(VOCABULARY) for _ in range(r.randint(1, 4))]
        assert by_coverage(conn, terms, ranked, texts) == _reference(conn, terms, ranked, texts), (
            terms,
            texts,
        )


def test_texts_share_one_string_per_token_and_the_table_stays_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kept texts' token dicts hold one string object per distinct token (the tokenizer makes a new
    one for every token of every text), with the same tokens as a text tokenized alone; the table
    of shared strings is emptied past its bound, and what it then gives is still the same tokens."""
    tokenize = coverage._tokenizer()
    texts = ["deploying the migrations", "the migration deploys", "migrations, then a rollback"]

    def alone(text: str) -> list[str]:
        return list(dict.fromkeys(coverage._tokens(tokenize, text, apsw.FTS5_TOKENIZE_DOCUMENT)))

    coverage._shared_tokens.clear()
    first, second, third = coverage._tokenize_all(tokenize, texts)
    assert [list(first), list(second), list(third)] == [alone(t) for t in texts]
    shared = {t: t for t in first}
    assert all(t is shared[t] for t in second if t in shared)  # "the", "migrat", "deploi"
    assert len([t for t in second if t in shared]) == 3

    monkeypatch.setattr(coverage, "_SHARED_TOKENS_MAX", 4)
    coverage._tokenize_all(tokenize, ["one two three four five six"])  # 6 > 4: emptied at the next call
    (again,) = coverage._tokenize_all(tokenize, [texts[0]])
    assert list(again) == alone(texts[0])
    assert len(coverage._shared_tokens) == len(again)
    coverage._shared_tokens.clear()


def test_a_text_holds_a_one_token_term_as_the_word_index_finds_it() -> None:
    """Coverage's tokens of a text (``_compared``) hold a term of one Latin token exactly when the
    word index's MATCH of the term in the ``text`` column finds the row (NFKC, CJK runs glued to
    Latin words, traditional characters, the header mark, diacritics): the equivalence that a
    coverage counted by SQLite would rest on (docs/benchmarks.md, "Keyword recall at 1k, session
    12"), and that keeps the re-scoring's terms the ones the search matched."""
    conn = apsw.Connection(":memory:")
    conn.execute(WORDS_TABLE)
    r = random.Random(12)
    words = [
        *VOCABULARY,
        "abc部署",
        "部署abc",
        "數據庫",
        "Déploy",
        "ﬁle",
        "Ⅻ",
        "x\u2063y",
        "ＭＩＧＲＡＴＩＯＮ",
        "ß",
    ]
    texts: dict[int, str] = {}
    for rowid in range(1, 301):
        texts[rowid] = " ".join(r.choice(words) for _ in range(r.randint(0, 8)))
        context = " ".join(r.choice(words) for _ in range(r.randint(0, 3)))  # never counted
        conn.execute(
            "INSERT INTO documents_words (rowid, text, store, context) VALUES (?, ?, ?, ?)",
            (rowid, index_text(texts[rowid]), "deploy", index_text(context)),
        )
    tokenize = conn.fts5_tokenizer(*coverage._TOKENIZER)
    coverage._words_cache.clear()  # tokenized here, not served from an earlier test's texts
    try:
        compared = dict(zip(texts, coverage._compared(tokenize, list(texts.values())), strict=True))
    finally:
        coverage._words_cache.clear()
    terms = {t for word in words for t in [word, *keyword_terms(word, characters=False)]}
    checked = 0
    for term in sorted(terms):
        wanted = coverage._wanted(tokenize, term)
        if wanted is None or wanted[1] or len(wanted[0]) != 1:
            continue
        (token,) = wanted[0]
        match = 'text : "' + term.replace('"', '""') + '"'
        found = {
            row
            for (row,) in conn.execute(
                "SELECT rowid FROM documents_words WHERE documents_words MATCH ?", (match,)
            )
        }
        assert found == {row for row, (_, tokens) in compared.items() if token in tokens}, term
        checked += 1
    assert checked >= 20


# -- a cold rebuild ------------------------------------------------------------------------------
AWKWARD = ["Deploy the api", "yes", "null", "~", "123", "1:20", "a: b", "has #hash", "- item", "it's"]
AWKWARD += ["'quoted'", '"double"', "café ünïcode 部署", "tab\there", "emoji 🚀", "  spaced  ", "", "x" * 300]

HAND_WRITTEN = [
    "plain text, no header at all\n",
    "# A heading\n\nbody under it\n",
    "---\ntitle: hand written\ntags: [Deploy, ops, Deploy]\n---\nbody\n",
    "---\ntitle: Tags as a string\ntags: a, b ,c\ncreated_at: 2026-03-01\n---\nbody\n",
    "---\ntitle: naive time\ncreated_at: 2026-03-01T10:11:12\nupdated_at: 2026-03-02 10:11:12+02:00\n---\nx\n",
    "---\ntitle: |\n  a block\n  title\ndescription: >\n  folded\n  text\n---\nmultiline\n",
    '---\ntitle: "escaped \\"quote\\" \\u00e9"\nmetadata:\n  actor: agent\n  origin_session_id: s-1\n---\nb\n',
    "---\nkind: knowledge\ntitle: extra key\ndescription: d\nmetadata:\n  actor: user\n"
    "origin_session_id: null\nupdated_at: 2026-01-01T00:00:00.000+00:00\nnote: kept\n---\n\nbody\n",
    "---\ntitle: out of range\ncreated_at: 0001-01-01T00:00:00+00:00\n---\nold\n",
    "---\ntitle: [unclosed\n---\nbroken\n",
    "\ufeff---\ntitle: with a BOM\n---\nbom body\n",
    "---\ntitle: 日本語のタイトル\ntags:\n  - 部署\n  - x\n---\n部署前必须先运行数据库迁移。\n",
]


def _write_home(root: Path) -> MemoryService:
    """A home whose two stores hold rendered facts with awkward values, hand-written files,
    a broken one, journal days and long multi-chunk bodies."""
    svc = MemoryService(home=root / "home")
    r = random.Random(3)
    stores = ["global", "project-01KB0000000000000000000000"]
    for i in range(160):
        when = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=i, milliseconds=r.randint(0, 999))
        fact = MemoryFact(
            id="",
            title=r.choice(AWKWARD) or "untitled",
            description=r.choice(AWKWARD),
            body=r.choice(["plain body", "", "# H\n\n" + "long paragraph about deploys. " * 120]),
            actor=r.choice(["agent", "user"]),
            origin_session_id=r.choice([None, "sess-1", "null", "a: b"]),
            created_at=when,
            updated_at=when + timedelta(hours=1),
            tags=tuple(r.sample(["deploy", "ops", "部署"], r.randint(0, 2))),
        )
        extra = r.choice([None, None, {"note": "yes"}])
        sp = svc.targets.paths(stores[i % 2])
        sp.inbox.mkdir(parents=True, exist_ok=True)
        (sp.inbox / f"f{i}.md").write_bytes(render_fact(fact, extra, with_created=r.random() < 0.8))
    for i, text in enumerate(HAND_WRITTEN):
        sp = svc.targets.paths(stores[i % 2])
        (sp.knowledge / f"hand-{i}.md").write_text(text, encoding="utf-8")
    journal = svc.targets.paths(stores[1]).journal
    journal.mkdir(parents=True)
    (journal / "2026-01-02.md").write_text("## 10:00 session s-9\n\ndeployed the api\n")
    return svc


def _rows(conn: apsw.Connection) -> dict[str, list[tuple[object, ...]]]:
    """Everything a rebuild writes, row by row (ctime left out: a file changed within 2 s keeps -1)."""
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.words_vocab USING fts5vocab(main, documents_words, instance)"
    )
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_vocab USING fts5vocab(main, documents_fts, instance)"
    )
    columns = [str(r[1]) for r in conn.execute("PRAGMA table_info(documents)") if r[1] != "file_ctime_ns"]
    queries = {
        "documents": f"SELECT rowid, {', '.join(columns)} FROM documents ORDER BY rowid",
        "chunks": "SELECT rowid, * FROM chunks ORDER BY rowid",
        "document_tags": "SELECT * FROM document_tags ORDER BY 1, 2",
        "documents_fts": "SELECT rowid, text, resource_name, chunk_id FROM documents_fts ORDER BY rowid",
        "words": "SELECT * FROM temp.words_vocab ORDER BY 1, 2, 3, 4",
        "trigrams": "SELECT * FROM temp.fts_vocab ORDER BY 1, 2, 3, 4",
        "broken_files": "SELECT resource_name, path, error FROM broken_files ORDER BY 1, 2",
    }
    return {name: list(conn.execute(sql)) for name, sql in queries.items()}


def _reference_add(
    self: Reindexer, store: str, path: Path, names: tuple[str, str], read: object = None
) -> ParsedFile:
    """A new file through the file-by-file routine, as before rows were queued (and before files
    were read ahead: it reads the file itself)."""
    self.write_new()
    return self.index_file(store, path, defer_embedding=True, names=names, absent=True)[1]


def test_a_rebuild_through_the_fast_paths_writes_the_rows_the_reference_paths_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = _write_home(tmp_path)
    reports = svc.reindex()
    assert sum(r.added for r in reports) > 150 and any(r.skipped for r in reports)
    fast = _rows(svc.index.db.conn)
    svc.close()
    assert len(fast["documents"]) > 150 and fast["document_tags"] and fast["broken_files"]
    assert len(fast["chunks"]) > len(fast["documents"])  # long bodies made several chunks
    for suffix in ("", "-wal", "-shm"):
        Path(f"{tmp_path / 'home' / 'index.db'}{suffix}").unlink(missing_ok=True)
    monkeypatch.setattr(fastmeta, "split_rendered", lambda text: None)  # every header through YAML
    monkeypatch.setattr(Reindexer, "add_new", _reference_add)
    with MemoryService(home=tmp_path / "home") as again:
        again.reindex()
        assert _rows(again.index.db.conn) == fast


# -- the rendered-frontmatter reader -------------------------------------------------------------
TAG_WORDS = ["deploy", "yes", "null", "~", "123", "1.5", "a: b", "it's", "'quoted'", "部署", "café", "x y"]
TAG_WORDS += ["#hash", "a#b", "-dash", "[x]", "{y}", "a:b", "true", "2026-01-01", "0x1f", "é" * 40, "a, b"]


def test_rendered_facts_with_tags_parse_the_same_both_ways() -> None:
    r = random.Random(16)
    fast = 0
    for i in range(500):
        tags = tuple(
            dict.fromkeys(t for t in (clean_tag(r.choice(TAG_WORDS)) for _ in range(r.randint(1, 4))) if t)
        )
        when = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=i)
        fact = MemoryFact(
            id="",
            title=r.choice(AWKWARD) or "t",
            description=r.choice(AWKWARD),
            body="body",
            actor="agent",
            origin_session_id=None,
            created_at=when,
            updated_at=when,
            tags=tags,
        )
        text = render_fact(fact, with_created=r.random() < 0.8).decode("utf-8")
        quick = fastmeta.split_rendered(text)
        meta, body = split_frontmatter(text)
        if quick is not None:
            fast += 1
            assert quick == (meta, body.strip()) and list(quick[0]) == list(meta), text
        assert parse_fact(text.encode(), store="global", relpath="k/x.md", mtime=0.0).fact.tags == tags
    assert fast > 250  # tags of plain words take the fast path


@pytest.mark.parametrize(
    "tags",
    [
        "[]",
        "[a,b]",
        "[a, , b]",
        "['a, b']",
        "[a: b]",
        '["x"]',
        "[a, [b]]",
        "[a]]",
        "[yes, 1]",
        "{a: 1}",
        "a, b",
    ],
)
def test_tag_lists_off_the_rendered_shape_take_the_yaml_path(tags: str) -> None:
    text = (
        "---\nkind: knowledge\ntitle: a\ndescription: b\nmetadata:\n  actor: agent\norigin_session_id: null\n"
        f"updated_at: 2026-01-01T00:00:00.000+00:00\ntags: {tags}\n---\n\nbody\n"
    )
    assert fastmeta.split_rendered(text) is None
    with contextlib.suppress(FactParseError):  # "[a, , b]" and "[a]]" are not YAML at all
        parse_fact(text.encode(), store="global", relpath="k/x.md", mtime=0.0)


# -- keyword search over several stores ----------------------------------------------------------
@pytest.mark.parametrize("searched", [["global", "project-01KB0000000000000000000001"], ["global"], []])
def test_a_search_over_a_few_of_many_stores_ranks_each_as_its_own_search(
    tmp_path: Path, searched: list[str]
) -> None:
    """The stores searched hold a minority of the index here (a third store holds the most), so
    each store gets its own filtered MATCH; with two of three stores searched and the third
    small, one unfiltered MATCH serves both. Either way each list is that store's own search."""
    svc = MemoryService(home=tmp_path / "home")
    r = random.Random(8)
    words = ["deploy", "port", "postgres", "kafka", "retry", "owner", "config", "timeout"]
    big = "project-01KB0000000000000000000002"
    for i in range(90):
        store = [big, big, big, "global", "project-01KB0000000000000000000001"][i % 5]
        svc.remember(f"note {i}: " + " ".join(r.choice(words) for _ in range(r.randint(2, 6))), store=store)
    db = svc.index.db
    for stores in (searched, [*searched, big]):
        for store in stores:
            svc.index.refresh(store)
        for query in ["deploy", "port kafka", "retry timeout owner", "nothing"]:
            for limit in (1, 4, 40):
                many = search_chunks_many(db, stores, query, limit)
                for store in stores:
                    assert many[store] == search_chunks(db, store, query, limit), (stores, query, limit)
    svc.close()


def test_the_times_a_rendered_header_holds_are_the_times_a_documents_row_formats() -> None:
    r = random.Random(17)
    starts = [datetime(1970, 1, 1, tzinfo=UTC), datetime(2026, 6, 9, 10, 11, 12, 345000, tzinfo=UTC)]
    starts.append(datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC))
    seen = set()
    base = MemoryFact("", "t", "d", "b", "agent", None, starts[0], starts[0])
    for i in range(400):
        start = r.choice(starts)
        step = timedelta(milliseconds=r.randint(0, 10**12))
        created = start - step if start.year == 9999 else start + step
        updated = min(created + timedelta(milliseconds=r.randint(0, 10**9)), starts[-1])
        fact = attrs.evolve(base, title=f"t {i}", created_at=created, updated_at=updated)
        data = render_fact(fact, with_created=r.random() < 0.8)
        if r.random() < 0.1:  # a hand-edited time out of range: the other one stands in
            data = data.replace(b"created_at: ", b"created_at: 1960-01-01T00:00:00.000+00:00\n#", 1)
        parsed = parse_fact(data, store="global", relpath=f"knowledge/t-{i}.md", mtime=0.0)
        want = (format_time(parsed.fact.created_at), format_time(parsed.fact.updated_at))
        assert parsed.times in (want, None), data
        seen.add(parsed.times is None)
    assert False in seen  # the fast reader took most
