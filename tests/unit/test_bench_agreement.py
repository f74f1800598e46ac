"""bench.agreement's measure and its split of the differing places, on hand-made pages and
legs; and the embedded store's word-leg scoring expression (bench.agreement_text replays it)."""

from __future__ import annotations

from bench import agreement as ag
from suli.backends.embedded import sql
from suli.settings import Settings


def test_agreement_divides_by_the_longer_page_and_empty_pages_agree() -> None:
    assert ag.agreement(list("abcdefghij"), list("abcdefghik")) == 0.9
    assert ag.agreement(list("abc"), list("abcde")) == 0.6  # two places missing on one side
    assert ag.agreement([], []) == 1.0
    assert ag.agreement(list("abc"), []) == 0.0
    assert ag.differing(list("abc"), list("abcde")) == 2


def test_mean_agreement_reports_all_answered_and_per_ten() -> None:
    a = {"q1": list("abc"), "q2": [], "q3": list("abcdefghij")}
    b = {"q1": list("abc"), "q2": [], "q3": list("abcdefghiz")}
    m = ag.mean_agreement(a, b)
    assert m["all"] == round((1 + 1 + 0.9) / 3, 4)
    assert m["nonempty"] == round((1 + 0.9) / 2, 4) and m["queries_nonempty"] == 2
    assert m["all_per_10"] == round((0.3 + 0 + 0.9) / 3, 4)  # a short page counts against it
    assert m["differing_places"] == 1 and m["identical_sets"] == 2


def test_breakdown_puts_a_word_leg_difference_on_the_text_leg() -> None:
    vec = [(f"v{i}", 0.9 - i * 0.01) for i in range(20)]
    text_e = [(f"t{i}", 10.0 - i) for i in range(10)]
    text_o = [(f"t{i}", 10.0 - i) for i in range(9)] + [("other", 1.0)]
    e = {"q": (text_e, vec)}
    o = {"q": (text_o, vec)}
    got = ag.breakdown(e, o, Settings())
    assert got["differing_places"] >= 1
    assert got["text_leg_share"] == 1.0 and got["vector_leg_share"] == 0.0
    assert got["agreement_if"]["same_text_leg"] == 1.0


def test_ties_by_id_orders_equal_scores_by_item_id() -> None:
    assert ag.ties_by_id([("b", 1.0), ("a", 1.0), ("c", 2.0)]) == [
        ("c", 2.0),
        ("a", 1.0),
        ("b", 1.0),
    ]
    assert ag.tied_at_cut([(str(i), 1.0) for i in range(11)])


def test_bm25_adds_a_title_only_call_as_opensearch_adds_its_title_field() -> None:
    expr = sql.bm25_call("fts_stem")
    cols = ", ".join("1" if c == "title" else "0" for c in sql.FTS_COLUMNS)
    assert expr == f"(bm25(fts_stem, 1, 1, 1, 1, 2) + 0.3 * bm25(fts_stem, {cols}))"
    assert sql.BM25_COLUMNS[sql.FTS_COLUMNS.index("title")] == 1.0
    assert sql.bm25_call("t", title=False) == "bm25(t, 1, 1, 1, 1, 2)"
