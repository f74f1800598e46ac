"""Ranking rules applied after fusion: outcome weights and the meaning-only keep rule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from suli.fusion import Fused, rrf

NEUTRAL_WEIGHT = 1.0  # an item with no outcome (plain documents) is neither lifted nor sunk


def outcome_weight(outcome: str | None, weights: Mapping[str, float]) -> float:
    """The multiplicative weight of an outcome; unknown or missing outcomes are neutral."""
    if outcome is None:
        return NEUTRAL_WEIGHT
    return weights.get(outcome, NEUTRAL_WEIGHT)


@dataclass(frozen=True, slots=True)
class KeepDecision:
    kept: bool
    reason: str


WORD_MATCH = KeepDecision(True, "word-match")
NO_LEG = KeepDecision(False, "no-leg")
MEANING_WITHIN = KeepDecision(True, "meaning-within-margin")
MEANING_BELOW = KeepDecision(False, "meaning-below-margin")
MEANING_BELOW_FLOOR = KeepDecision(False, "meaning-below-floor")
NO_GATES = KeepDecision(True, "no-gates")


def keep(
    fused: Fused, best_similarity: float | None, margin: float, floor: float = -1.0
) -> KeepDecision:
    """DESIGN 3.4: a word match is always kept; a meaning-only match only near the best one
    and above an absolute floor (without it, a query that means nothing keeps whatever is
    least far: the margin is relative to a best hit that may itself be noise)."""
    if "text" in fused.legs:
        return WORD_MATCH
    vec = fused.legs.get("vector")
    if vec is None or best_similarity is None:
        return NO_LEG
    if vec.score < floor:
        return MEANING_BELOW_FLOOR
    return MEANING_WITHIN if vec.score >= best_similarity - margin else MEANING_BELOW


def meaning_kept(similarity: float, best: float, margin: float, floor: float) -> bool:
    """Whether `keep` keeps a meaning-only hit of this similarity under a leg whose best is
    `best` (the same gates, for code that has similarities and no fused list: counting)."""
    return similarity >= floor and similarity >= best - margin


@dataclass(frozen=True, slots=True)
class Ranked:
    id: str
    score: float  # rrf x outcome weight
    fused: Fused
    kept: str
    weight: float


def rank(
    text: Sequence[tuple[str, float]],
    vector: Sequence[tuple[str, float]],
    outcomes: Mapping[str, str | None],
    *,
    k: int,
    text_weight: float,
    vector_weight: float,
    margin: float,
    outcome_weights: Mapping[str, float],
    gates: bool = True,
    floor: float = -1.0,
    dropped: dict[str, int] | None = None,
) -> list[Ranked]:
    """Fuse both legs, drop meaning-only matches far from the best or below the floor, weigh
    by outcome, sort.

    `vector` scores are cosine similarities, best first; `outcomes` maps id -> outcome.
    `dropped`, when given, counts the dropped hits by reason (for explain).
    """
    fused = rrf(
        {"text": text, "vector": vector},
        k=k,
        weights={"text": text_weight, "vector": vector_weight},
    )
    best = vector[0][1] if vector else None
    out: list[Ranked] = []
    for f in fused:
        decision = keep(f, best, margin, floor) if gates else NO_GATES
        if not decision.kept:
            if dropped is not None:
                dropped[decision.reason] = dropped.get(decision.reason, 0) + 1
            continue
        w = outcome_weight(outcomes.get(f.id), outcome_weights)
        out.append(Ranked(f.id, f.rrf * w, f, decision.reason, w))
    out.sort(key=lambda r: -r.score)  # stable: equal scores keep fusion order
    return out
