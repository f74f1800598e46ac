"""RRF: formula, 1-based ranks, absent items contribute nothing, weights, determinism."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suli.fusion import rrf


def test_formula_with_one_based_ranks() -> None:
    fused = rrf({"text": [("a", 9.0), ("b", 5.0)], "vector": [("b", 0.9)]}, k=60)
    by = {f.id: f for f in fused}
    assert by["a"].rrf == pytest.approx(1 / 61)
    assert by["b"].rrf == pytest.approx(1 / 62 + 1 / 61)
    assert [f.id for f in fused] == ["b", "a"]
    assert by["b"].legs["text"].rank == 2 and by["b"].legs["vector"].rank == 1
    assert "vector" not in by["a"].legs and "vector" not in by["a"].shares


def test_weights_scale_each_leg() -> None:
    fused = rrf(
        {"text": [("a", 1.0)], "vector": [("b", 1.0)]}, k=60, weights={"text": 1.0, "vector": 2.0}
    )
    assert [f.id for f in fused] == ["b", "a"]
    assert fused[0].rrf == pytest.approx(2 / 61)


def test_k_changes_how_much_the_head_dominates() -> None:
    # a and r are first in one list each; b is fourth in both. First seen: a p q b r s t.
    legs = {
        "text": [("a", 1), ("p", 1), ("q", 1), ("b", 1)],
        "vector": [("r", 1), ("s", 1), ("t", 1), ("b", 1)],
    }
    # k = 1: a, r 1/2 = 0.5; b 2/5 = 0.4; p, s 1/3; q, t 1/4. A single first place wins.
    assert [f.id for f in rrf(legs, k=1)] == ["a", "r", "b", "p", "s", "q", "t"]
    # k = 60: b 2/64 = 0.03125; a, r 1/61 = 0.01639; p, s 1/62; q, t 1/63. Agreement wins.
    assert [f.id for f in rrf(legs, k=60)] == ["b", "a", "r", "p", "s", "q", "t"]


def test_duplicate_ids_in_one_leg_keep_the_first_rank() -> None:
    fused = rrf({"text": [("a", 3), ("a", 2), ("b", 1)]}, k=60)
    assert {f.id: f.legs["text"].rank for f in fused} == {"a": 1, "b": 3}


def test_k_must_be_positive() -> None:
    with pytest.raises(ValueError):
        rrf({"text": [("a", 1.0)]}, k=0)


ids = st.lists(st.sampled_from("abcdefghij"), unique=True, max_size=10)


@settings(max_examples=500)
@given(ids, ids, st.integers(min_value=1, max_value=100))
def test_properties(text: list[str], vector: list[str], k: int) -> None:
    fused = rrf({"text": [(i, 1.0) for i in text], "vector": [(i, 1.0) for i in vector]}, k=k)
    # DESIGN 3.2 written out: 1 / (k + 1-based rank) summed over the lists holding the id.
    expected = {i: 0.0 for i in [*text, *vector]}
    for hits in (text, vector):
        for n, i in enumerate(hits):
            expected[i] += 1 / (k + n + 1)
    assert {f.id: f.rrf for f in fused} == pytest.approx(expected)
    scores = [f.rrf for f in fused]
    assert scores == sorted(scores, reverse=True)
    for f in fused:
        assert f.rrf == pytest.approx(sum(f.shares.values()))
        assert all(1 <= lr.rank <= 10 for lr in f.legs.values())
    assert fused == rrf(
        {"text": [(i, 1.0) for i in text], "vector": [(i, 1.0) for i in vector]}, k=k
    )
