"""The shortcuts a cold rebuild takes per file give what the plain code gives (issue #15 item 3):
the rendered-header reader's printable check, the word index's text of an ASCII chunk and the
first chunk's header, each against the reference it replaced."""

from __future__ import annotations

import itertools
import random
import unicodedata
from datetime import UTC, datetime, timedelta

import pytest

from coffer_memory._index.cjk import CJK_RUN, index_text, run_tokens
from coffer_memory._index.hant import fold
from coffer_memory._index.keys import HEADER_END
from coffer_memory._index.rows import index_header, indexed_chunks
from coffer_memory._models import MemoryFact
from coffer_memory._store import fastmeta
from coffer_memory._store.files import format_time, parse_fact, render_fact, split_frontmatter

# Characters on which ``str.isprintable`` and YAML's reader disagree (YAML takes them, Python calls
# them unprintable: spaces, format characters, private use, unassigned), and ones the reader leaves
# to YAML (YAML refuses them or takes them for line breaks; a tab in a plain value).
YAML_PRINTABLE = ["\xa0", "\u200b", "\u3000", "\xad", "\ue000", "\u0378", "\u2063", "\U000e0001", "\u00e9"]
DECLINED = ["\x85", "\u2028", "\u2029", "\r", "\x7f", "\x01", "\ufffe", "\t"]


def _header(title: str, description: str, origin: str, tag: str) -> str:
    """A header in ``render_fact``'s shape holding these values as they are (a hand edit: the
    renderer folds whitespace out of a title)."""
    return (
        f"---\nkind: knowledge\ntitle: {title}\ndescription: {description}\nmetadata:\n  actor: agent\n"
        f"origin_session_id: {origin}\ncreated_at: 2026-03-04T05:06:07.890+00:00\n"
        f"updated_at: 2026-03-04T06:06:07.890+00:00\ntags: [{tag}]\n---\n\nbody\n"
    )


@pytest.mark.parametrize("char", YAML_PRINTABLE + DECLINED)
@pytest.mark.parametrize("where", ["title", "description", "origin", "tag"])
def test_a_header_value_python_calls_unprintable_reads_as_yaml_reads_it(char: str, where: str) -> None:
    """The reader asks ``str.isprintable`` first and YAML's character check only when it says no:
    a character YAML takes in a value keeps the header on the fast path, with YAML's answer; one
    it refuses or breaks a line at sends the header to YAML."""
    value = f"a{char}b"
    text = _header(
        value if where == "title" else "t",
        value if where == "description" else "d",
        value if where == "origin" else "null",
        value if where == "tag" else "x",
    )
    quick = fastmeta.split_rendered(text)
    if char in DECLINED:
        assert quick is None
        return
    meta, body = split_frontmatter(text)
    assert quick == (meta, body.strip()) and list(quick[0]) == list(meta)
    parsed = parse_fact(text.encode(), store="global", relpath="knowledge/x.md", mtime=0.0)
    assert parsed.times == ("2026-03-04T05:06:07.890+00:00", "2026-03-04T06:06:07.890+00:00")


def test_the_times_a_rendered_header_holds_are_read_with_its_values() -> None:
    """``read_rendered`` gives each time as written; a header without ``created_at`` gives None."""
    r = random.Random(26)
    for i in range(200):
        when = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(milliseconds=r.randint(0, 10**11))
        fact = MemoryFact("", f"t {i}", "d", "b", "user", None, when, when + timedelta(seconds=i))
        with_created = r.random() < 0.7
        text = render_fact(fact, with_created=with_created).decode("utf-8")
        found = fastmeta.read_rendered(text)
        assert found is not None
        meta, _, created, updated = found
        assert created == (format_time(when) if with_created else None)
        assert updated == format_time(fact.updated_at)
        assert meta["updated_at"] == fact.updated_at
        parsed = parse_fact(text.encode(), store="global", relpath="knowledge/x.md", mtime=0.0)
        assert parsed.times == (created or updated, updated)


def _reference_index_text(text: str) -> str:
    """``cjk.index_text`` as written before its ASCII shortcut."""
    return CJK_RUN.sub(
        lambda m: " " + " ".join(run_tokens(fold(m.group()))) + " ", unicodedata.normalize("NFKC", text)
    )


def test_the_word_index_text_of_a_chunk_is_the_reference_one() -> None:
    """ASCII around the header mark is taken as it is; anything else is normalized and cut."""
    pieces = ["deploy", " ", "\n", "\t", "A.", HEADER_END, "\u2063", "\u0301", "ﬁ", "部署", "數據", "é"]
    pieces += ["e\u0301", "\xa0", "Ⅻ", "ｆ", "\u3000", "かな", "한국", "\x7f", "~"]
    r = random.Random(27)
    for _ in range(20_000):
        text = "".join(r.choice(pieces) for _ in range(r.randint(0, 8)))
        assert index_text(text) == _reference_index_text(text), repr(text)
    chunk = indexed_chunks("Deploying", "", "Run the migrations first.")[0]
    assert HEADER_END in chunk and index_text(chunk) is chunk  # the shortcut took it


def _reference_header(title: str, description: str, body: str) -> str:
    """``rows.index_header`` as written before it was written out."""
    folded = " ".join(body.split()).lower()
    parts = [
        p
        for p in (title.strip(), description.strip())
        if p and " ".join(p.split()).lower().removesuffix("…") not in folded
    ]
    return "\n".join(dict.fromkeys(parts)) + HEADER_END if parts else ""


def test_the_first_chunks_header_is_the_reference_one() -> None:
    values = ["", " ", "a", "A b", "a  b", "Deploy the api", "deploy the", "x…", "de…", "…", " a "]
    values += ["ΣΑΣ", "σας", "İ", "\xa0", "b"]
    bodies = ["", "a b", "Deploy the API now", "deploy\nthe\tapi", "x", "ΣΑΣ σας", "İstanbul", "de"]
    for title, description, body in itertools.product(values, values, bodies):
        want = _reference_header(title, description, body)
        assert index_header(title, description, body) == want, (title, description, body)


AWKWARD_VALUES = [
    "t",
    "\xa0",
    "'  '",
    "null",
    "~",
    "'yes'",
    "'3.10'",
    "'a: b'",
    "'it''s'",
    "部署",
    "x\u2063y",
    "-x",
]
TIMES = [
    "2026-01-01T00:00:00.000+00:00",
    "2025-06-30T12:34:56.789+00:00",
    "0001-01-01T00:00:00.000+00:00",
    "9999-12-31T12:00:00.000+00:00",
]


def test_a_rendered_header_parses_as_the_same_header_read_through_yaml() -> None:
    """``parse_fact``'s own branch for a header in ``render_fact``'s form (no ``_header_text`` or
    ``parse_time``) gives the fact that YAML's branch gives for the same header with a comment
    line in it (which sends it there), over awkward values and times out of range."""
    r = random.Random(30)
    fast_ones = 0
    for _ in range(600):
        created = f"created_at: {r.choice(TIMES)}\n" if r.random() < 0.7 else ""
        actor = r.choice(["agent", "user"])
        origin = r.choice(["null", "sess-1", "'null'", "~"])
        tags = r.choice(["x", "a, b", "'yes'"])
        body = r.choice(["body", "", "# Heading here\n\ntext", "  "])
        text = (
            f"---\nkind: knowledge\ntitle: {r.choice(AWKWARD_VALUES)}\ndescription: {r.choice(AWKWARD_VALUES)}\n"
            f"metadata:\n  actor: {actor}\norigin_session_id: {origin}\n{created}"
            f"updated_at: {r.choice(TIMES)}\ntags: [{tags}]\n---\n\n{body}\n"
        )
        via_yaml = text.replace("\nkind: knowledge\n", "\n# a note\nkind: knowledge\n", 1)
        assert fastmeta.read_rendered(via_yaml) is None
        fast_ones += fastmeta.read_rendered(text) is not None
        quick = parse_fact(text.encode(), store="global", relpath="knowledge/x.md", mtime=12345.0)
        slow = parse_fact(via_yaml.encode(), store="global", relpath="knowledge/x.md", mtime=12345.0)
        assert (quick.fact, quick.extra, quick.has_frontmatter, quick.has_created_at) == (
            slow.fact,
            slow.extra,
            slow.has_frontmatter,
            slow.has_created_at,
        ), text
        # The times' text kept from the header is what the row would otherwise format anew.
        shown = (format_time(quick.fact.created_at), format_time(quick.fact.updated_at))
        assert quick.times in (None, shown), text
    assert fast_ones > 500  # the comparison is of the fast branch
