"""bench.text_forms: the word-leg variants bench.tuning compares are built in the bench, start
from exactly what the product ships, and are in place only inside their block."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from bench import text_forms as tf
from suli.backends.base import LegQuery, PageQuery
from suli.backends.embedded import EmbeddedBackend, sql
from suli.backends.opensearch import bodies as b
from suli.models import Filters, Item, Principal
from suli.visibility import Visibility, visibility_for

VIS = Visibility("ws1", "prn_ana", frozenset())


def _fields(form: tf.TextForm, flavour: str = "stemmed") -> tuple[str, list[str]]:
    mm = tf.exact_match("x", flavour, form)["multi_match"]  # type: ignore[arg-type]
    return mm["type"], mm["fields"]


def test_the_sweep_starts_from_what_the_product_sends() -> None:
    for flavour in ("stemmed", "plain"):
        assert tf.exact_match("a b", flavour, tf.SHIPPED) == b.exact_match("a b", flavour)


def test_each_form_scores_its_fields() -> None:
    """The content form scores the combined field (plus path, plus a title boost when set);
    the per-field forms keep the v3 field lists."""
    assert _fields(tf.TextForm("content", 0.0)) == ("most_fields", ["content", "path"])
    assert _fields(tf.TextForm("content", 0.5), "plain") == (
        "most_fields",
        ["content.plain", "title.plain^0.5", "path.plain"],
    )
    assert _fields(tf.TextForm("cross_fields")) == ("cross_fields", tf.TEXT_FIELDS["stemmed"])
    assert _fields(tf.TextForm("most_fields"), "plain") == ("most_fields", tf.TEXT_FIELDS["plain"])


def test_a_form_is_in_the_product_bodies_only_inside_its_block() -> None:
    leg = LegQuery(VIS, Filters(), "deploy", None, 10)
    page = PageQuery(VIS, ("itm_1",), text="deploy", words_of=("itm_2",))
    anchor = replace(leg, text_after="itm_9")
    shipped = [b.text_leg(leg), b.text_anchor(anchor), b.page_bodies(page)]
    with tf.opensearch_form(tf.TextForm("cross_fields")):
        inside = [b.text_leg(leg), b.text_anchor(anchor), b.page_bodies(page)[-1]]
    for body in inside:  # the text leg, its anchor and the page's words check alike
        assert '"type": "cross_fields"' in json.dumps(body)
    assert [b.text_leg(leg), b.text_anchor(anchor), b.page_bodies(page)] == shipped
    assert '"cross_fields"' not in json.dumps(shipped)


def test_a_title_weight_reaches_the_embedded_word_leg_only_inside_its_block(
    tmp_path: Path,
) -> None:
    store = EmbeddedBackend(tmp_path / "s.db", 2)
    items = [Item("itm_t", "ws", "kite", body="a long body of words"), Item("itm_b", "ws", "x")]
    store.upsert([(it, [1.0, 0.0]) for it in items])
    vis = visibility_for(Principal("prn_a", "ws"), [])

    def score() -> float:
        [hit] = store.search(LegQuery(vis, Filters(), "kite", None, 5)).text
        return hit.score

    shipped = score()
    assert sql.bm25_call("t") == "(bm25(t, 1, 1, 1, 1, 2) + 0.3 * bm25(t, 1, 0, 0, 0, 0))"
    with tf.embedded_title_boost(1.0):
        assert "+ 1 * bm25(t," in sql.bm25_call("t")
        assert score() > shipped  # the title-only term weighs more
    assert score() == shipped
    store.close()
