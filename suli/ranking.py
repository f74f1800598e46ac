"""Ranking rules applied after fusion: outcome weights and the meaning-only keep rule."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from suli.fusion import Fused

NEUTRAL_WEIGHT = 1.0  # an item with no outcome (plain documents) is neither lifted nor sunk


def outcome_weight(outcome: str | None, weights: Mapping[str, float]) -> float:
    """The multiplicative weight of an outcome; unknown or missing outcomes are neutral."""
    if outcome is None:
        return NEUTRAL_WEIGHT
    return weights.get(outcome, NEUTRAL_WEIGHT)


@dataclass(frozen=True)
class KeepDecision:
    kept: bool
    reason: str


def keep(fused: Fused, best_similarity: float | None, margin: float) -> KeepDecision:
    """DESIGN 3.4: a word match is always kept; a meaning-only match only near the best one."""
    if "text" in fused.legs:
        return KeepDecision(True, "word-match")
    vec = fused.legs.get("vector")
    if vec is None or best_similarity is None:
        return KeepDecision(False, "no-leg")
    if vec.score >= best_similarity - margin:
        return KeepDecision(True, "meaning-within-margin")
    return KeepDecision(False, "meaning-below-margin")
