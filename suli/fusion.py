"""Reciprocal rank fusion that keeps each leg's rank and score (they feed `explain`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# k = 60 is the constant of Cormack et al. (2009): it damps the head of each list so one
# leg's first place does not drown the other leg; it is configurable (Settings.rrf_k).
DEFAULT_K = 60


@dataclass(frozen=True, slots=True)
class LegRank:
    rank: int  # 1-based: the first hit of a leg contributes 1 / (k + 1)
    score: float


@dataclass(frozen=True, slots=True)
class Fused:
    id: str
    rrf: float
    legs: Mapping[str, LegRank]
    shares: Mapping[str, float]  # leg -> that leg's part of rrf


def rrf(
    ranked: Mapping[str, Sequence[tuple[str, float]]],
    k: int = DEFAULT_K,
    weights: Mapping[str, float] | None = None,
) -> list[Fused]:
    """Fuse ranked lists {leg: [(id, score), ...]} into one list, best first.

    rrf(d) = sum over legs containing d of weight(leg) / (k + rank(d, leg)).
    An item absent from a list contributes nothing for that list. Ties keep the order in
    which ids were first seen (legs in the given order), so fusion is deterministic.
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    legs: dict[str, dict[str, LegRank]] = {}
    shares: dict[str, dict[str, float]] = {}
    order: dict[str, int] = {}
    for leg, hits in ranked.items():
        w = 1.0 if weights is None else weights.get(leg, 1.0)
        seen: set[str] = set()
        for rank, (item_id, score) in enumerate(hits, start=1):
            if item_id in seen:  # a leg lists each id once; keep its best (first) rank
                continue
            seen.add(item_id)
            order.setdefault(item_id, len(order))
            legs.setdefault(item_id, {})[leg] = LegRank(rank, score)
            shares.setdefault(item_id, {})[leg] = w / (k + rank)
    fused = [
        Fused(id=i, rrf=sum(shares[i].values()), legs=legs[i], shares=shares[i]) for i in order
    ]
    fused.sort(key=lambda f: (-f.rrf, order[f.id]))
    return fused
