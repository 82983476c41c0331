"""Chinese, Japanese and Korean text for the word index: overlapping bigrams plus single characters.

Written CJK has no spaces between words (Korean puts them between phrases, with particles
attached), and most Chinese words are two characters long. So every run of CJK characters is
indexed as its overlapping two-character pieces, as Lucene's CJK analyzer does, and also as its
single characters (``部署前`` -> ``部署 署前 部 署 前``): bigrams carry the words and rank first (they
are rarer), single characters let one-character words and shortened forms match. A query is cut
the same way after its question words and particles are taken out (``部署之前要做什么？`` ->
``部署 部 署``). Both sides see traditional characters as their simplified forms (``hant.fold``),
so either script finds the other. The stored text is never changed: only what the word index sees.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from .hant import fold
from .keys import HEADER_END

# Han (with extensions A and compatibility), kana, Hangul syllables and jamo.
CJK_CHARS = "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
CJK_RUN = re.compile(f"[{CJK_CHARS}]+")
_HIRAGANA = re.compile("[\u3040-\u309f]+")

# Question words, particles and auxiliaries that say what kind of answer is wanted, not what it
# is about. They are cut out of a query (the run is split where they stood), never out of the index.
# Chinese: interrogatives, "before/after" as query words, modal verbs, pronouns, particles; the
# colloquial interrogatives of typed chat (啥 = 什么, 咋 = 怎么, 干嘛 = 做什么), the modal
# A-not-A questions beside 能不能, and the polite and inclusive pronouns beside 你 and 我们.
_ZH_QUESTION = (
    "为什么 怎么样 怎么办 是什么 什么样 哪一个 有没有 是不是 能不能 可不可以 如何 怎么 怎样 什么 哪个 哪些 "
    "哪里 哪儿 哪天 多少 多久 多长 多大 几点 是否 之前 之后 以前 以后 时候 需要 应该 可以 我们 你们 一般 "
    "一下 请问 吗 呢 吧 啊 呀 么 的 了 是 谁 哪 几 该 我 你 "
    "为啥 咋样 咋办 干嘛 几时 啥 咋 会不会 要不要 需不需要 该不该 您 咱们 咱 嘛 呗"
)
# Japanese: interrogatives and sentence endings (hiragana separates query pieces anyway).
_JA_QUESTION = "何 誰 どのくらい どうやって どう どの どれ いつ なぜ どこ ですか ますか でしょうか"
# Korean: interrogatives and question endings.
_KO_QUESTION = "무엇 어떻게 어떤 언제 어디 얼마나 얼마 누구 몇 왜 인가요 하나요 합니까 입니까 나요"
QUERY_STOPWORDS = frozenset(" ".join((_ZH_QUESTION, _JA_QUESTION, _KO_QUESTION)).split())
_STOP_SPLIT = re.compile("|".join(sorted(map(re.escape, QUERY_STOPWORDS), key=len, reverse=True)))


def has_cjk(text: str) -> bool:
    """True when ``text`` holds a CJK character."""
    return CJK_RUN.search(text) is not None


def bigrams(run: str) -> list[str]:
    """Overlapping two-character pieces of a CJK run; a one-character run is kept whole."""
    if len(run) < 2:
        return [run] if run else []
    return [run[i : i + 2] for i in range(len(run) - 1)]


def run_tokens(run: str) -> list[str]:
    """The index tokens of a CJK run: its bigrams, then its distinct single characters."""
    return list(dict.fromkeys([*bigrams(run), *run]))


def _plain(text: str) -> bool:
    """True when ``text`` is ASCII but for the header's U+2063 (``keys.HEADER_END``): NFKC
    already, and no CJK in it."""
    head, _, rest = text.partition(HEADER_END)
    return head.isascii() and rest.isascii()


def index_text(text: str) -> str:
    """``text`` as the word index sees it: NFKC, every CJK run replaced by the tokens of its
    simplified form."""
    if _plain(text):
        # The text as it is (a rebuild spent most of this function looking for CJK runs in English).
        return text
    return _segmented(unicodedata.normalize("NFKC", text))


def _segmented(nfkc: str) -> str:
    return CJK_RUN.sub(lambda m: " " + " ".join(run_tokens(fold(m.group()))) + " ", nfkc)


def index_forms(text: str) -> tuple[str, str, str | None]:
    """A chunk's text as its index rows hold it: the word index's (``index_text``), then the
    trigram index's and the text as written when that differs (else None).

    Queries are NFKC and lower case (``terms.plan_query``): the trigram index holds a text that
    NFKC changes (full-width letters, half-width kana, ligatures, ``…``) as NFKC in lower case,
    so a fragment of it is found as the word index finds its words; the text as written is
    kept beside it, for what recall shows and what is embedded. ASCII is the text itself."""
    if _plain(text):
        return text, text, None
    nfkc = unicodedata.normalize("NFKC", text)
    if nfkc == text:
        return _segmented(nfkc), text, None
    return _segmented(nfkc), nfkc.lower(), text


def _piece_spans(folded: str) -> list[tuple[int, int]]:
    """Where the pieces of a (folded) CJK run of a query are: between question words, particles
    and hiragana."""
    spans = []
    start = 0
    for stop in [*_STOP_SPLIT.finditer(folded), None]:
        end = stop.start() if stop else len(folded)
        for kana in _HIRAGANA.finditer(folded, start, end):
            if kana.start() > start:
                spans.append((start, kana.start()))
            start = kana.end()
        if end > start:
            spans.append((start, end))
        start = stop.end() if stop else end
    return spans


def query_pieces(run: str, *, written: bool = False) -> list[str]:
    """The parts of a CJK run of a query that carry its meaning: question words and particles cut out.

    Hiragana in a query is grammar (particles, endings) far more often than meaning, so it
    separates pieces too. The pieces are in simplified characters, as the index sees them
    (traditional question words are cut out as well); ``written``: also each piece as the run
    writes it, where that differs (grep reads the files themselves, in either script).
    """
    folded = fold(run)
    spans = _piece_spans(folded)
    pieces = [folded[a:b] for a, b in spans]
    if written:  # folding maps one character to one, so the spans hold in the run as well
        pieces += [run[a:b] for a, b in spans if run[a:b] != folded[a:b]]
    return pieces


def query_terms(runs: Iterable[str], *, characters: bool = True, written: bool = False) -> list[str]:
    """Index terms of a query's CJK runs: the tokens of their pieces (without ``characters``,
    their bigrams only; ``written``: see ``query_pieces``).

    A piece of one character left between question words (``做`` in ``加新依赖之前要做什么``) is
    mostly grammar; it counts only when no longer piece is left. A query of nothing but question
    words keeps them all rather than search for nothing.
    """
    runs = list(runs)
    pieces = [p for run in runs for p in query_pieces(run, written=written)]
    if not pieces:
        pieces = [fold(run) for run in runs] + ([r for r in runs if fold(r) != r] if written else [])
    long = [p for p in pieces if len(p) > 1]
    tokens = run_tokens if characters else bigrams
    return list(dict.fromkeys(t for piece in (long or pieces) for t in tokens(piece)))
