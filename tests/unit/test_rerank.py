"""MMRReranker: near-duplicates move down, distinct items keep the fused order."""

from __future__ import annotations

import pytest

from suli.rerank import MMRReranker

A = [1.0, 0.0, 0.0]
A2 = [0.99, 0.05, 0.0]  # a near-duplicate of A
B = [0.0, 1.0, 0.0]
C = [0.0, 0.0, 1.0]


def test_a_near_duplicate_gives_way_to_a_distinct_item() -> None:
    ranked = ["a", "a2", "b", "c"]
    out = MMRReranker().rerank(None, ranked, {"a": A, "a2": A2, "b": B, "c": C})
    assert out[0] == "a"
    assert out.index("a2") > out.index("b")
    assert sorted(out) == sorted(ranked)


def test_distinct_items_keep_the_fused_order() -> None:
    ranked = ["c", "a", "b"]
    assert MMRReranker().rerank([1.0, 0.0, 0.0], ranked, {"a": A, "b": B, "c": C}) == ranked


def test_lambda_one_is_no_reranking() -> None:
    ranked = ["a", "a2", "b"]
    assert MMRReranker(lambda_=1.0).rerank(None, ranked, {"a": A, "a2": A2, "b": B}) == ranked


def test_items_without_vectors_are_never_redundant() -> None:
    ranked = ["a", "x", "a2", "y"]
    out = MMRReranker().rerank(None, ranked, {"a": A, "a2": A2})
    assert out[:2] == ["a", "x"]
    assert out.index("y") < out.index("a2")


def test_short_lists_and_bad_lambda() -> None:
    assert MMRReranker().rerank(None, ["a"], {}) == ["a"]
    assert MMRReranker().rerank(None, [], {}) == []
    with pytest.raises(ValueError, match="lambda_"):
        MMRReranker(lambda_=1.5)
