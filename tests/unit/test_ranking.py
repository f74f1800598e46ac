"""Outcome weights, the meaning-only gate and the combined rank()."""

import pytest

from suli.ranking import outcome_weight, rank
from suli.settings import DEFAULT_OUTCOME_WEIGHTS

W = DEFAULT_OUTCOME_WEIGHTS


def test_default_outcome_order() -> None:
    order = [
        "approved",
        "completed",
        "in-progress",
        "superseded",
        "rejected",
        "failed",
        "abandoned",
    ]
    weights = [outcome_weight(o, W) for o in order]
    assert weights == sorted(weights, reverse=True)
    assert W["approved"] == W["completed"] > W["in-progress"] > W["superseded"] > W["rejected"]
    assert all(w > 0 for w in weights)  # lower outcomes sink but are never removed
    assert outcome_weight(None, W) == 1.0


def _rank(text, vector, outcomes=None, margin=0.1, gates=True):
    return rank(
        text,
        vector,
        outcomes or {},
        k=60,
        text_weight=1,
        vector_weight=1,
        margin=margin,
        outcome_weights=W,
        gates=gates,
    )


def test_equal_relevance_approved_before_rejected() -> None:
    # a and r appear at mirrored ranks in the two legs: identical RRF.
    out = _rank([("r", 5), ("a", 4)], [("a", 0.9), ("r", 0.8)], {"a": "approved", "r": "rejected"})
    assert [x.id for x in out] == ["a", "r"]
    assert out[0].fused.rrf == pytest.approx(out[1].fused.rrf)


def test_meaning_only_gate() -> None:
    out = _rank([("w", 3.0)], [("near", 0.80), ("far", 0.50), ("w", 0.10)], margin=0.1)
    kept = {x.id: x.kept for x in out}
    assert kept == {"near": "meaning-within-margin", "w": "word-match"}  # far is dropped
    assert "far" in {x.id for x in _rank([("w", 3.0)], [("near", 0.8), ("far", 0.5)], margin=0.4)}


def test_word_match_with_poor_vector_is_kept() -> None:
    out = _rank([("w", 1.0)], [("a", 0.9), ("w", -0.5)], margin=0.05)
    assert "w" in {x.id for x in out}


def test_gates_off_keeps_everything() -> None:
    out = _rank([], [("a", 0.9), ("b", 0.1)], margin=0.0, gates=False)
    assert [x.id for x in out] == ["a", "b"]


def test_meaning_only_hits_below_the_floor_are_dropped_and_counted() -> None:
    """The margin alone is relative: a query that means nothing keeps its least-far items."""
    vector = [("a", 0.30), ("b", 0.28), ("w", 0.10)]
    loose = _rank([("w", 3.0)], vector, margin=0.1)
    assert {x.id for x in loose} == {"a", "b", "w"}
    dropped: dict[str, int] = {}
    out = rank(
        [("w", 3.0)],
        vector,
        {},
        k=60,
        text_weight=1,
        vector_weight=1,
        margin=0.1,
        outcome_weights=W,
        floor=0.29,
        dropped=dropped,
    )
    assert {x.id: x.kept for x in out} == {"a": "meaning-within-margin", "w": "word-match"}
    assert dropped == {"meaning-below-floor": 1}  # b; the word match w is never dropped
