"""``coverage.stored_tokens`` tells a text that is ASCII apart from the header's mark (U+2063) by
its UTF-8 length (rb31): every such text, and every other, stores what tokenizing the text as
``_prepared`` gives it stores."""

from __future__ import annotations

import apsw

from coffer_memory._index import coverage
from coffer_memory._index.keys import HEADER_END

TEXTS = [
    "",
    " ",
    "Deploying the API: run `make deploy` twice!",
    f"Deploying{HEADER_END}Run the deploy script on Fridays.",
    f"Title\nDescription{HEADER_END}body text",
    HEADER_END,
    HEADER_END * 3 + "running runners ran",
    f"Café{HEADER_END}crème brûlée recipes",  # two-byte characters beside the mark
    f"Résumé{HEADER_END}",
    f"Tokyo{HEADER_END}東京の天気は晴れです",  # CJK: segmented as the index sees it
    f"Ｆｕｌｌ{HEADER_END}ｗｉｄｔｈ letters",  # NFKC changes them
    f"ellipsis{HEADER_END}and so on…",  # a three-byte character like the mark
    f"smile{HEADER_END}😀 four bytes",
    "no\u00a0break space",
    "\u2062invisible times, not the mark",
]


def _as_before(text: str) -> str:
    """What ``stored_tokens`` stored before rb31: the tokens of ``_prepared(text)[1]``."""
    tokens = coverage._tokens(coverage._tokenizer(), coverage._prepared(text)[1], apsw.FTS5_TOKENIZE_DOCUMENT)
    return f" {' '.join(tokens)} " if tokens else " "


def test_stored_tokens_are_those_of_the_prepared_text() -> None:
    for text in TEXTS:
        assert coverage.stored_tokens(text) == _as_before(text), text


def test_plain_texts_are_stored_as_tokenized_unchanged() -> None:
    """A text the length check takes for plain is one ``_plain`` takes for plain, and back."""
    for text in TEXTS:
        data = text.encode("utf-8")
        assert (len(data) == len(text) + 2 * text.count(coverage._HEADER_MARK)) == coverage._plain(text), text
