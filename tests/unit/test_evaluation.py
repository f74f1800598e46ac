"""nDCG@10 and recall@100 against values worked out by hand."""

import math

import pytest

from suli.evaluation import mean_metrics, ndcg_at, read_qrels, recall_at


def test_ndcg_by_hand() -> None:
    rels = {"a": 2, "b": 1, "c": 0}
    assert ndcg_at(["a", "b"], rels) == pytest.approx(1.0)
    dcg = 1 / math.log2(2) + 2 / math.log2(3)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert ndcg_at(["b", "a"], rels) == pytest.approx(dcg / idcg)
    assert ndcg_at(["x"], rels) == 0.0
    assert ndcg_at(["a"], {}) == 0.0


def test_recall() -> None:
    assert recall_at(["a", "x"], {"a": 1, "b": 2, "c": 0}) == pytest.approx(0.5)
    assert recall_at(["x"] * 100 + ["a"], {"a": 1}, k=100) == 0.0


def test_mean_skips_unjudged_queries(tmp_path) -> None:
    p = tmp_path / "q.tsv"
    p.write_text("query-id\tcorpus-id\tscore\nq1\ta\t1\nq2\tb\t0\n")
    qrels = read_qrels(p)
    m = mean_metrics({"q1": ["a"]}, qrels)
    assert m["queries"] == 1 and m["ndcg@10"] == 1.0
