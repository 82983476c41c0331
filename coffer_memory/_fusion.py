"""How ranked lists become one: hybrid's weighted score fusion inside a store, reciprocal rank
fusion across stores, and the score a hit lends its neighbours of the same agent session.

Pure functions over scores and hits: the retrieval (``_retrieval.py``) and the shared-index
recall (``_shared_recall.py``) call them; nothing here reads the index.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TypeVar

import attrs

from ._models import MemoryHit

T = TypeVar("T")

RRF_K = 60
# Hybrid's share for the keyword list (the vector list gets the rest). Chosen on LoCoMo's dev
# conversations (0-4): 0.5-0.7 all beat rank fusion there at turn and session level.
KEYWORD_WEIGHT = 0.6
# A hit lends this share of its score (above its list's lowest) to each of the DEPTH facts after
# it and before it in the same agent session (``_index/session.py``): a reply ("Yeah, I play
# clarinet!") is found through the turn that asked. Facts without a session rank as before.
# Chosen on LoCoMo's dev conversations (0-4), see docs/benchmarks.md.
NEIGHBOUR_NEXT_SHARE = 0.4
NEIGHBOUR_PREV_SHARE = 0.3
NEIGHBOUR_DEPTH = 2


def _normalised(scored: Sequence[tuple[str, float]]) -> dict[str, float]:
    """Each id's score scaled to 0..1 within its list (min-max; a list of equal scores is all 1)."""
    if not scored:
        return {}
    low = min(score for _, score in scored)
    span = max(score for _, score in scored) - low
    return {i: (score - low) / span if span > 0 else 1.0 for i, score in scored}


def fuse_modes(
    keyword: Sequence[MemoryHit],
    vector: Sequence[MemoryHit],
    limit: int,
    keyword_weight: float = KEYWORD_WEIGHT,
) -> list[MemoryHit]:
    """Hybrid inside one store: a weighted sum of the two lists' min-max normalised scores.

    A hit missing from a list gets 0 there. Unlike rank fusion this keeps how far apart the
    hits of a list are: a keyword hit far ahead of the rest stays ahead. The hit's score is the
    fused value (``fused_scores``); a hit in both lists is the vector list's.
    """
    first: dict[str, MemoryHit] = {}
    for hits in (vector, keyword):
        for hit in hits:
            first.setdefault(hit.id, hit)
    fused = fused_scores(
        [(h.id, h.score) for h in keyword], [(h.id, h.score) for h in vector], limit, keyword_weight
    )
    return [attrs.evolve(first[i], score=score) for i, score in fused]


def fused_scores(
    keyword: Sequence[tuple[str, float]],
    vector: Sequence[tuple[str, float]],
    limit: int,
    keyword_weight: float = KEYWORD_WEIGHT,
) -> list[tuple[str, float]]:
    """``fuse_modes`` of (id, score) lists: the first ``limit`` ids and their fused scores, best
    first (equal scores in the order ids first appear, the vector list's first), so that a
    caller makes hits only of those it keeps."""
    of_vector, of_keyword = _normalised(vector), _normalised(keyword)
    vector_weight = 1.0 - keyword_weight
    ids = dict.fromkeys(i for i, _ in vector)
    ids.update(dict.fromkeys(i for i, _ in keyword))
    # The two products added as ``sum`` over the weights added them (0 + a + b is a + b), without
    # a generator per id: a hybrid recall fuses each store's lists after its query embedding.
    fused = {i: vector_weight * of_vector.get(i, 0.0) + keyword_weight * of_keyword.get(i, 0.0) for i in ids}
    order = sorted(fused, key=fused.__getitem__, reverse=True)[:limit]
    return [(i, fused[i]) for i in order]


def rrf_order(
    lists: Sequence[Sequence[tuple[str, str]]], limit: int, k: int = RRF_K
) -> list[tuple[str, str]]:
    """The (store, id) keys of ranked lists by reciprocal rank fusion, sum of 1/(k + rank);
    ties keep the order in which keys were first seen."""
    fused: dict[tuple[str, str], float] = {}
    for keys in lists:
        for rank, key in enumerate(keys, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(fused, key=fused.__getitem__, reverse=True)[:limit]


def rrf_disjoint(lists: Sequence[Sequence[T]], limit: int) -> list[T]:
    """``rrf_order`` of lists that share no key, none twice in one list (each store's own ids):
    a key's sum is then its own ``1 / (k + rank)``, equal only for keys of one rank, which keep
    the order of their lists. So the keys by rank, the lists in turn at each rank; without a
    dict, a float per key and a sort (a keyword recall fuses its stores so)."""
    out: list[T] = []
    live = [keys for keys in lists if keys]
    start = 0
    while live and len(out) < limit:
        end = min(map(len, live))
        out.extend(itertools.chain.from_iterable(zip(*(keys[start:end] for keys in live), strict=True)))
        start = end
        live = [keys for keys in live if len(keys) > end]
    return out[:limit]


def even_turns(lists: int, limit: int) -> list[int]:
    """How many keys ``rrf_disjoint`` takes from each of ``lists`` lists when none runs out before
    ``limit`` keys are taken: ``limit`` split evenly, the first lists one more. A list as long as
    its turn or longer is taken only that far."""
    each, more = divmod(limit, lists) if lists else (0, 0)
    return [each + 1] * more + [each] * (lists - more)


def disjoint_taken(lengths: Sequence[int], limit: int) -> list[int]:
    """How many keys ``rrf_disjoint`` takes from the front of each of lists of these ``lengths``:
    its answer is ``rrf_disjoint`` of those fronts alone (a caller reads rows only for keys that
    can place)."""
    even = even_turns(len(lengths), limit)
    if all(map(int.__ge__, lengths, even)):
        return even
    taken = [0] * len(lengths)
    left = limit
    rank = 0
    while left > 0:
        live = [j for j, length in enumerate(lengths) if length > rank]
        if not live:
            break
        for j in live[:left]:
            taken[j] += 1
        left -= min(left, len(live))
        rank += 1
    return taken


def rrf_merge(lists: Sequence[Sequence[MemoryHit]], limit: int, k: int = RRF_K) -> list[MemoryHit]:
    """Reciprocal rank fusion: order by sum of 1/(k + rank); each hit keeps its own score."""
    first: dict[tuple[str, str], MemoryHit] = {}
    for hits in lists:
        for hit in hits:
            first.setdefault((hit.store, hit.id), hit)
    return [first[key] for key in rrf_order([[(h.store, h.id) for h in hits] for hits in lists], limit, k)]


def lend(
    scored: Sequence[tuple[str, float]], near: Mapping[str, Sequence[tuple[str, int]]]
) -> list[tuple[str, float]]:
    """``scored`` (id, score; best first) with what each lends its session neighbours added,
    best first, neighbours missing from it included. ``near`` maps an id to its neighbours as
    (id, offset): positive after it in the session, negative before.

    A neighbour missing from the list starts at the list's lowest score, and a hit lends a
    share of how far it stands above that, so the order does not depend on the scores' units
    (as min-max normalisation; a list of equal scores stands one score's size above the floor).
    """
    low = min(score for _, score in scored)
    if low == max(score for _, score in scored):
        low -= abs(low) or 1.0
    total = dict(scored)
    for fact_id, score in scored:
        for other, offset in near.get(fact_id, ()):
            share = NEIGHBOUR_NEXT_SHARE if offset > 0 else NEIGHBOUR_PREV_SHARE
            total[other] = total.get(other, low) + share * (score - low)
    return sorted(total.items(), key=lambda item: item[1], reverse=True)
