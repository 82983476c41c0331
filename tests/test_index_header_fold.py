"""``rows.folded``, the comparison form ``index_header`` checks a title and description against
the body in, made of ASCII text's bytes (rb31): the same as ``" ".join(text.split()).lower()``."""

from __future__ import annotations

import random

from coffer_memory._index.rows import folded, index_header


def _by_words(text: str) -> str:
    return " ".join(text.split()).lower()


def test_every_ascii_character_folds_as_split_and_lower_fold_it() -> None:
    for code in range(128):
        c = chr(code)
        for text in (c, f"a{c}b", f"A{c}{c}{c}B", f"{c}{c}x{c}", c * 7):
            assert folded(text) == _by_words(text), repr(text)


def test_runs_of_every_kind_of_space_fold_to_one() -> None:
    alphabet = "aZ09 .\t\n\v\f\r\x1c\x1d\x1e\x1f"
    rng = random.Random(31)
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        assert folded(text) == _by_words(text), repr(text)


def test_text_beyond_ascii_folds_as_before() -> None:
    for text in ["ΣΑΣ ΟΔΟΣ", "İstanbul", "a\u00a0b", "a\u3000 b", "x\x85y", "Café  Crème", "…", ""]:
        assert folded(text) == _by_words(text), repr(text)


def test_the_header_says_what_the_body_does_not() -> None:
    body = "Deploy  the API\n\twith `make deploy`; run it TWICE."
    assert index_header("Deploy the api", "", body) == ""  # said, in other spaces and capitals
    assert index_header("Rollout", "deploy THE api with", body) == "Rollout\n\u2063\n"
    assert index_header("Rollout", "Canary first", body) == "Rollout\nCanary first\n\u2063\n"


def _header_before(title: str, description: str, body: str) -> str:
    """``index_header`` as it was before rb31: every part folded by splitting it into words."""
    title, description = title.strip(), description.strip()
    if not title and not description:
        return ""
    body_words = _by_words(body)
    said = title and _by_words(title).removesuffix("…") in body_words
    if not description or description == title or _by_words(description).removesuffix("…") in body_words:
        return "" if said or not title else title + "\n\u2063\n"
    return description + "\n\u2063\n" if said or not title else f"{title}\n{description}\n\u2063\n"


def test_the_header_is_the_one_folding_every_part_gave() -> None:
    """Parts found in the body as written, folded, in other capitals or spaces, or not at all;
    Greek capital sigmas, which lower by their neighbours."""
    words = ["Deploy", "deploy", "the", "API", "api", "ΟΔΟΣ", "οδος", "Σ", "…", "x", "  ", "\n", "\t"]
    rng = random.Random(15)
    for _ in range(4000):
        body = " ".join(rng.choice(words) for _ in range(rng.randrange(0, 12)))
        start = rng.randrange(0, len(body) + 1)
        cut = body[start : start + rng.randrange(0, 20)]
        other = "".join(rng.choice(words) for _ in range(rng.randrange(0, 4)))
        for title, description in [
            (cut, other),
            (other, cut),
            (cut, cut),
            (cut.upper(), cut + "…"),
            ("", cut),
        ]:
            assert index_header(title, description, body) == _header_before(title, description, body), (
                title,
                description,
                body,
            )
