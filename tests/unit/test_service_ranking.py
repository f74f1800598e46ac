"""The Searcher's ranking rules over the in-memory backend: outcome order (DESIGN 3.3), the
meaning-only margin and floor (3.4), the common-word rule (3.5)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the contract package

from contract.helpers import KeyedEmbedder, World, axis, blend, item, memory_world, principal

# DESIGN 3.3, in its own words: approved and completed first, in-progress a little lower, then
# superseded, then rejected, failed and abandoned. Not read from the settings' defaults.
TIERS = [
    {"approved", "completed"},
    {"in-progress"},
    {"superseded"},
    {"rejected", "failed", "abandoned"},
]
# The ids in word-rank order (equal words: by id); each outcome placed away from its tier.
ORDER = ["abandoned", "completed", "superseded", "failed", "in-progress", "approved", "rejected"]


def test_outcomes_rank_in_the_designed_order_and_none_is_hidden() -> None:
    """Every item says the same words; their meanings rank them in the opposite order, so
    fused scores are equal to 0.2% and only the outcome weights can order them."""
    emb = KeyedEmbedder()
    emb.set("zebra plan", axis(0))
    items = []
    for n, outcome in enumerate(ORDER):
        it = item(f"itm_{n}", "Zebra plan", body=f"n{n}", outcome=outcome)
        emb.set(it, blend(0, n + 1, 0.5 + 0.05 * n))  # the last id means the query best
        items.append(it)
    w = memory_world(items, [principal("prn_a")], embedder=emb, text_weight=1.0, vector_weight=1.0)
    got = [r.outcome for r in w.search("prn_a", "zebra plan", limit=25).results]
    assert sorted(got) == sorted(ORDER)  # lower outcomes sink, never vanish
    tier_of = {o: n for n, tier in enumerate(TIERS) for o in tier}
    assert [tier_of[o] for o in got] == sorted(tier_of[o] for o in got), got


def _meaning_world(**settings: float) -> World:
    emb = KeyedEmbedder()
    emb.set("qq", axis(0))
    emb.set("zz", axis(9))
    near = item("itm_near", "Alpha", body="first")  # meaning only, best
    close = item("itm_close", "Beta", body="second")  # within the margin of the best
    far = item("itm_far", "Gamma", body="third")  # past the margin
    word = item("itm_word", "Delta qq", body="fourth")  # the word, meaning nothing like it
    faint = item("itm_faint", "Epsilon", body="fifth")  # the best for "zz", under the floor
    for it, vec in (
        (near, blend(0, 1, 0.9)),
        (close, blend(0, 2, 0.7)),
        (far, blend(0, 3, 0.5)),
        (word, axis(4)),
        (faint, blend(9, 5, 0.2)),
    ):
        emb.set(it, vec)
    items = [near, close, far, word, faint]
    return memory_world(items, [principal("prn_a")], embedder=emb, **settings)


def test_a_meaning_only_hit_is_kept_near_the_best_and_above_the_floor() -> None:
    w = _meaning_world(meaning_margin=0.3, meaning_floor=0.33)
    resp = w.search("prn_a", "qq", limit=25, explain=True)
    kept = {r.id: r.explain.kept for r in resp.results if r.explain}
    # 0.9 best; 0.7 within 0.3 of it; 0.5 is not; the word match is kept whatever it means
    assert set(kept) == {"itm_near", "itm_close", "itm_word"}
    assert kept["itm_word"] == "word-match" and resp.total == 3


def test_a_query_meaning_nothing_visible_answers_with_nothing() -> None:
    w = _meaning_world(meaning_margin=0.3, meaning_floor=0.33)
    # The best meaning match is 0.2: within the margin of itself, under the floor.
    resp = w.search("prn_a", "zz", limit=25)
    assert resp.results == () and resp.total == 0
    assert w.search("prn_a", "zz", limit=25, mode="vector").results == ()


def test_a_wider_margin_and_lower_floor_keep_more() -> None:
    w = _meaning_world(meaning_margin=0.45, meaning_floor=0.1)
    assert {r.id for r in w.search("prn_a", "qq", limit=25).results} == {
        "itm_near", "itm_close", "itm_far", "itm_word"
    }  # fmt: skip
    assert [r.id for r in w.search("prn_a", "zz", limit=25).results] == ["itm_faint"]


@pytest.fixture(scope="module")
def words_world() -> World:
    return memory_world(
        [
            item("itm_the", "The plan", body="for the herd"),
            item("itm_zebra", "Zebra herd", body="stripes"),
            item("itm_none", "Giraffe", body="neck"),
        ],
        [principal("prn_a")],
    )


def test_common_words_count_only_when_the_query_has_no_other_word(words_world: World) -> None:
    def ids(q: str) -> set[str]:
        return {r.id for r in words_world.search("prn_a", q, mode="text", limit=25).results}

    assert ids("the") == {"itm_the"}  # only common words: they are the query
    assert ids("the for") == {"itm_the"}
    assert ids("the zebra") == {"itm_zebra"}  # another word: "the" no longer matches
    assert ids("zebra") == {"itm_zebra"}
