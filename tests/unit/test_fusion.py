"""RRF: formula, 1-based ranks, absent items contribute nothing, weights, determinism."""

import pytest
from hypothesis import given
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
    legs = {"text": [("a", 1), ("b", 1), ("c", 1)], "vector": [("c", 1), ("x", 1), ("y", 1)]}
    # c is 3rd and 1st; a is 1st in one list only: small k favours the single first place.
    assert rrf(legs, k=1)[0].id == "c"
    assert rrf(legs, k=60)[0].id == "c"
    assert rrf({"text": [("a", 1)], "vector": [("z", 1), ("q", 1), ("a", 1)]}, k=1)[0].id == "a"


def test_duplicate_ids_in_one_leg_keep_the_first_rank() -> None:
    fused = rrf({"text": [("a", 3), ("a", 2), ("b", 1)]}, k=60)
    assert {f.id: f.legs["text"].rank for f in fused} == {"a": 1, "b": 3}


def test_k_must_be_positive() -> None:
    with pytest.raises(ValueError):
        rrf({"text": [("a", 1.0)]}, k=0)


ids = st.lists(st.sampled_from("abcdefghij"), unique=True, max_size=10)


@given(ids, ids, st.integers(min_value=1, max_value=100))
def test_properties(text: list[str], vector: list[str], k: int) -> None:
    fused = rrf({"text": [(i, 1.0) for i in text], "vector": [(i, 1.0) for i in vector]}, k=k)
    assert {f.id for f in fused} == set(text) | set(vector)
    scores = [f.rrf for f in fused]
    assert scores == sorted(scores, reverse=True)
    for f in fused:
        assert f.rrf == pytest.approx(sum(f.shares.values()))
        assert all(1 <= lr.rank <= 10 for lr in f.legs.values())
    assert fused == rrf(
        {"text": [(i, 1.0) for i in text], "vector": [(i, 1.0) for i in vector]}, k=k
    )
