"""bench.scale_cluster's pure parts: the exact filtered top k behind its recall, the ACLs that
give each principal its visible share, and the growth table."""

from __future__ import annotations

import numpy as np
import pytest

from bench.clustered import LEVELS, WORKSPACE, visible_mask
from bench.scale_cluster.growth import growth
from bench.scale_cluster.load import acl_rows
from bench.scale_cluster.recall import exact_topk, recall_at
from suli.models import Principal
from suli.visibility import visibility_for

# Unit vectors; their dot products with (1, 0) are 1, 0, 0.6, 0.8, -1 and with (0, 1)
# 0, 1, 0.8, 0.6, 0 (worked out by hand).
VECTORS = np.array([[1, 0], [0, 1], [0.6, 0.8], [0.8, 0.6], [-1, 0]], dtype=np.float32)
QUERIES = np.array([[1, 0], [0, 1]], dtype=np.float32)


def test_exact_topk_matches_the_hand_computed_answer_across_chunks() -> None:
    masks = {
        "all": np.ones(5, dtype=bool),
        "some": np.array([False, True, True, False, True]),
        "one": np.array([False, False, False, False, True]),
    }
    got = exact_topk(VECTORS, QUERIES, masks, k=3, chunk=2)  # chunks of 2 rows: 3 passes
    assert got["all"].tolist() == [[0, 3, 2], [1, 2, 3]]
    assert got["some"].tolist() == [[2, 1, 4], [1, 2, 4]]
    assert got["one"].tolist() == [[4, -1, -1], [4, -1, -1]]  # fewer visible than k


def test_recall_counts_the_exact_top_found_and_ignores_padding() -> None:
    assert recall_at([0, 3, 9], np.array([0, 3, 2])) == pytest.approx(2 / 3)
    assert recall_at([4, 7], np.array([4, -1, -1])) == 1.0
    assert recall_at([], np.array([-1, -1])) == 1.0  # nothing visible: nothing to miss
    assert recall_at([], np.array([1, -1])) == 0.0


def test_acls_give_each_principal_exactly_its_share_of_boards() -> None:
    acls = acl_rows()
    boards = np.arange(1000)
    for principal, share in LEVELS.items():
        vis = visibility_for(Principal(principal, WORKSPACE), acls)
        assert vis.boards == frozenset(f"brd_{b}" for b in range(share))
        assert visible_mask(boards, principal).sum() == share


def test_growth_takes_the_latest_run_of_the_smallest_and_largest_size() -> None:
    def row(n: int, p50: float, p99: float, phase: str = "latency") -> dict:
        side = {"p50_ms": p50, "p99_ms": p99}
        return {"phase": phase, "kind": "clustered", "n": n, "sides": {"suli_core": side}}

    rows = [row(100, 9.0, 9.0), row(100, 10.0, 20.0), row(500, 12.0, 30.0), row(1000, 15.0, 50.0),
            {"phase": "latency", "kind": "clustered", "n": 2000, "error": "boom"}]  # fmt: skip
    rows += [{"phase": "load", "kind": "clustered", "n": 1000, "items_per_s": 0.5},
             {"phase": "resources", "kind": "clustered", "n": 1000,
              "total_bytes_per_million_items": 3e12}]  # fmt: skip
    got = growth(rows, "clustered", target=10_000)
    # One more decade: p50 grows 1.5x again (15 -> 22.5), p99 2.5x (50 -> 125).
    assert got == {"latency": {"from": 100, "to": 1000, "sides": {"suli_core": {
        "p50_growth": 1.5, "p99_growth": 2.5,
        "p50_ms_projected_10000": 22.5, "p99_ms_projected_10000": 125.0}}},
        "load_hours_projected_10000": round(10_000 / 0.5 / 3600, 1),
        "disk_gb_projected_10000": 30.0}  # fmt: skip
    assert "skipped" in growth(rows[:2], "clustered")
