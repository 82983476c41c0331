"""What developers type at their memory: names in another case, versions glued to a package, and
words nothing holds as written (a typo, the other spelling, two words written as one).

Each class was found by ``bench/data/asked_s13.jsonl`` (session 13, ``bench/heldout.py --data``);
the tests hold the rule for the class, not that set's wording.
"""

from __future__ import annotations

import pytest

from coffer_memory import MemoryService
from coffer_memory._index.fts import keyword_terms

# A memory of a few facts, each with words a question may spell otherwise, and distractors that
# share the question's other words.
FACTS = {
    "retries": "Set `max_retries` to 5 in `worker/config.py`; three gave up during the nightly outage.",
    "log": "The `HARBOR_LOG_LEVEL` environment variable controls logging; set it to debug locally.",
    "python": "We pinned Python to 3.11 because 3.12 broke the gevent wheel on our base image.",
    "colour": "The colour tokens live in `web/src/theme/colours.ts`, as the design system spells them.",
    "licence": "The licence for the PDF library (pdfkit-pro) is renewed every January by Marta.",
    "oom": "The memory limit of the api pod is 512Mi; it was OOM-killed at 256Mi under export load.",
    "migration": "Database migrations are generated with alembic and reviewed by hand before merging.",
    "default-branch": "The default branch is main; release branches are cut from it on Mondays.",
    "default-timeout": "The default HTTP timeout is 30 seconds for every outgoing call.",
    "level": "Each level of the cache is flushed on deploy; the hot level first.",
}


@pytest.fixture
def memory(svc: MemoryService) -> tuple[MemoryService, dict[str, str]]:
    ids = {svc.remember(text, store="global").fact.id: key for key, text in FACTS.items()}
    return svc, ids


def _first(memory: tuple[MemoryService, dict[str, str]], query: str) -> str | None:
    svc, ids = memory
    hits = svc.recall(query, stores=["global"], mode="keyword").hits
    return ids[hits[0].id] if hits else None


@pytest.mark.parametrize(
    ("query", "written", "phrase"),
    [
        ("maxRetries default?", "maxretries", "max retries"),
        ("HarborLogLevel", "harborloglevel", "harbor log level"),
        ("useAuthToken.ts", "useauthtoken.ts", "use auth token"),
        ("OOMKilled pods", "oomkilled", "oom killed"),
    ],
)
def test_a_camel_case_name_is_also_searched_as_its_words(query: str, written: str, phrase: str) -> None:
    terms = keyword_terms(query)
    assert phrase in terms
    assert written in terms  # and as written, for a fact that writes it so


@pytest.mark.parametrize("query", ["iPhone", "IPv6", "getX", "PostgreSQL", "MySQL", "plain words only"])
def test_a_name_with_a_one_letter_part_is_not_split(query: str) -> None:
    assert keyword_terms(query) == keyword_terms(query.lower())


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("maxRetries default?", "retries"),  # the fact writes max_retries; "default" is in others
        ("what is HarborLogLevel", "log"),
    ],
)
def test_a_name_in_another_case_finds_its_fact(
    memory: tuple[MemoryService, dict[str, str]], query: str, expected: str
) -> None:
    assert _first(memory, query) == expected


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("python>=3.11", ["python", "3.11"]),
        ("node^20", ["node", "20"]),
        ("gevent~=21.1,<22", ["gevent", "21.1", "22"]),
        ("redis|kafka", ["redis", "kafka"]),
    ],
)
def test_operators_split_a_word(query: str, terms: list[str]) -> None:
    assert keyword_terms(query) == terms


def test_a_version_constraint_finds_the_fact_of_its_package(
    memory: tuple[MemoryService, dict[str, str]],
) -> None:
    assert _first(memory, "python>=3.11") == "python"
    assert _first(memory, "python^3.11") == "python"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("colors", "colour"),  # American spelling of the fact's British one
        ("colors.ts", "colour"),
        ("license", "licence"),
        ("oomkilled", "oom"),  # one word where the fact has two
        ("maxretries", "retries"),
        ("migraton", "migration"),  # a letter left out
    ],
)
def test_a_word_nothing_holds_finds_its_near_spelling(
    memory: tuple[MemoryService, dict[str, str]], query: str, expected: str
) -> None:
    assert _first(memory, query) == expected


def test_a_word_near_nothing_still_finds_nothing(memory: tuple[MemoryService, dict[str, str]]) -> None:
    svc, _ = memory
    assert not svc.recall("zookeeper", stores=["global"], mode="keyword").hits
    assert not svc.recall("xylophone quartz", stores=["global"], mode="keyword").hits


def test_two_words_that_share_trigrams_by_chance_are_no_near_spelling(svc: MemoryService) -> None:
    svc.remember("Set the Argo Rollout image back to the previous tag.", store="global")
    # "outage" has half of its trigrams (out, age) in "rolloutimage": two words written together
    # are long and share trigrams by chance; they are not a spelling of it
    assert not svc.recall("outage", stores=["global"], mode="keyword").hits
    assert svc.recall("rolloutimage", stores=["global"], mode="keyword").hits
    # and a short word is no spelling of a longer one it shares a part with
    svc.remember("Keep the release notes short.", store="global")
    assert not svc.recall("zookeeprr", stores=["global"], mode="keyword").hits
    # nor are two words that share an ending
    svc.remember("something", store="global")
    assert not svc.recall("nothing-like-it", stores=["global"], mode="keyword").hits


def test_near_spellings_keep_to_the_filter(svc: MemoryService) -> None:
    tagged = svc.remember("The colour palette is in theme.ts.", store="global", tags=["ui"]).fact.id
    svc.remember("The colours of the status page are set by ops.", store="global", tags=["ops"])
    hits = svc.recall("colors", stores=["global"], mode="keyword", tags=["ui"]).hits
    assert [h.id for h in hits] == [tagged]
