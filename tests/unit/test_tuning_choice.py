"""bench.tuning's fusion choice on synthetic legs (pure code): what it may move and what it holds."""

from __future__ import annotations

from bench import tuning
from suli.settings import Settings

# One query: the text leg finds an irrelevant item; the one relevant item is a meaning-only match
# with similarity 0.25, under the default floor (0.33). A lower floor would keep it and win dev.
LEGS = {"q1": ([("d_word", 5.0)], [("d_meaning", 0.25)])}
QRELS = {"q1": {"d_meaning": 2}}


def test_fusion_choice_holds_the_meaning_floor() -> None:
    """The floor is calibrated on nonsense queries (bench.floor: they must answer nothing); a
    dev-nDCG tuner would always lower it, so it is held and only swept for the record."""
    start = tuning.fusion_defaults(Settings())
    grid = {"meaning_floor": (0.0, 0.1, 0.2, 0.3, 0.4), "vector_weight": (0.5, 1.0)}
    point, best, raw = tuning.choose_fusion({"embedded": LEGS}, QRELS, grid, start)
    assert point["meaning_floor"] == Settings().meaning_floor == 0.33
    assert best == 0.0  # the relevant item was dropped by the held floor
    sweep = {r["point"]["meaning_floor"]: r["score"] for r in raw if r.get("sweep")}
    assert set(sweep) == {0.0, 0.1, 0.2, 0.3, 0.4}
    assert sweep[0.2] > best  # what the floor costs here is on record


def test_fusion_choice_holds_rrf_k_and_moves_free_values() -> None:
    start = {**tuning.fusion_defaults(Settings()), "meaning_floor": 0.0}
    grid = {"rrf_k": (10, 60), "vector_weight": (0.5, 2.0), "meaning_floor": (0.0,)}
    point, _, _ = tuning.choose_fusion({"embedded": LEGS}, QRELS, grid, start)
    assert point["rrf_k"] == 60  # DESIGN 3.3
    assert point["vector_weight"] == 2.0  # the relevant item is only in the vector leg
