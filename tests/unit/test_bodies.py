"""OpenSearch request bodies against golden JSON (UPDATE_GOLDEN=1 rewrites them; review the diff)."""

import json
import os
from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path

from suli.backends.base import LegQuery
from suli.backends.opensearch import bodies as b
from suli.backends.opensearch import docs as d
from suli.counting import without_facet_filters
from suli.models import Filters
from suli.visibility import Visibility

GOLDEN = Path(__file__).parent / "golden"
VIS = Visibility("ws1", "prn_ana", frozenset({"brd_b", "brd_a"}))
FILTERS = Filters(
    kinds=("artifact",),
    outcomes=("approved", "failed"),
    boards=("brd_a",),
    agents=("prn_bot",),
    stations=("Build",),
    tags=("deploy",),
    since=date(2026, 1, 1),
    until=date(2026, 1, 31),
)


def check(name: str, body: dict) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(body, indent=2, sort_keys=True) + "\n"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{name} body changed; rerun with UPDATE_GOLDEN=1 and review"


def test_text_leg() -> None:
    check("text_leg", b.text_leg(LegQuery(VIS, FILTERS, 'title:(x) AND "y', None, 100)))


def test_text_leg_plain_words() -> None:
    check("text_leg_plain", b.text_leg(LegQuery(VIS, Filters(), "the", None, 50, "plain")))


def test_vector_leg_filters_inside_knn() -> None:
    body = b.vector_leg(LegQuery(VIS, FILTERS, None, [0.5, -0.5, 0.0], 100))
    check("vector_leg", body)
    assert body["query"]["knn"]["vector"]["filter"]["bool"]["filter"][0] == b.visibility_clause(VIS)


def test_vector_leg_ef_search_widens_the_graph_search_only() -> None:
    q = LegQuery(VIS, FILTERS, None, [0.5, -0.5, 0.0], 100)
    plain, wide = b.vector_leg(q), b.vector_leg(q, 400)
    knn = wide["query"]["knn"]["vector"]
    assert knn["method_parameters"] == {"ef_search": 400}
    # Still depth candidates, filtered inside the knn clause: only the search breadth changes.
    assert knn["k"] == wide["size"] == 100
    assert knn["filter"] == plain["query"]["knn"]["vector"]["filter"]
    assert "method_parameters" not in plain["query"]["knn"]["vector"]


def test_browse_regex_facets() -> None:
    check(
        "browse_regex", b.browse_body(VIS, Filters(include_hidden=True), 10, regex='^deploy "v2"')
    )
    check("facets", b.facets_body(Visibility("ws1", "prn_x", frozenset()), Filters()))


def test_visibility_without_boards_has_no_board_clause() -> None:
    clause = b.visibility_clause(Visibility("ws1", "prn_x", frozenset()))
    assert "terms" not in json.dumps(clause)
    assert clause["bool"]["filter"] == [{"term": {"workspace": "ws1"}}]


def test_user_text_is_never_query_syntax() -> None:
    text = json.dumps(b.text_leg(LegQuery(VIS, Filters(), "a OR b:*", None, 10)))
    assert "query_string" not in text and "simple_query_string" not in text
    assert '"query": "a OR b:*"' in text  # multi_match analyses it as plain words


def test_cosine_from_score() -> None:
    assert d.cosine_from_score(1.0) == 1.0 and d.cosine_from_score(0.5) == 0.0


def test_facets_over_a_search_use_the_text_legs_own_query() -> None:
    """Counts follow the text leg: its query (whatever it becomes) or a kept meaning-only id."""
    match = b.MatchSet("deploy", "stemmed", None, ("itm_1", "itm_2"))
    body = b.facets_body(VIS, FILTERS, match, cap=5)
    [clause] = body["query"]["bool"]["filter"]
    text, ids = clause["bool"]["should"]
    # Under every filter but the facets' own (counted disjunctively); post_filter adds them.
    base = without_facet_filters(FILTERS)
    assert text == b.text_leg(LegQuery(VIS, base, "deploy", None, 0))["query"]
    assert ids["bool"]["filter"][:-1] == b.filter_clauses(VIS, base)
    assert ids["bool"]["filter"][-1] == {"terms": {"id": ["itm_1", "itm_2"]}}
    assert body["post_filter"] == {"bool": {"filter": b.facet_clauses(FILTERS)}}
    assert body["track_total_hits"] is True and body["size"] == 0
    assert {a["aggs"]["values"]["terms"]["size"] for a in body["aggs"].values()} == {6}  # cap + 1
    assert "aggs" not in b.facets_body(VIS, FILTERS, match, cap=0)  # a count only


def test_the_exact_words_are_the_combined_field_the_title_and_the_path() -> None:
    """The one form the product builds (bench/text_forms.py builds the sweep's others)."""
    for flavour, fields in (
        ("stemmed", ["content", "title^0.25", "path"]),
        ("plain", ["content.plain", "title.plain^0.25", "path.plain"]),
    ):
        mm = b.exact_match("x", flavour)["multi_match"]  # type: ignore[arg-type]
        assert (mm["type"], mm["fields"]) == ("most_fields", fields)


def test_a_refused_leg_is_named_by_its_root_cause() -> None:
    # The shape OpenSearch gives a shard's query-phase refusal inside `_msearch`.
    refused = {
        "status": 400,
        "error": {
            "type": "search_phase_execution_exception",
            "reason": "all shards failed",
            "phase": "query",
            "root_cause": [{"type": "illegal_argument_exception", "reason": "field too long"}],
        },
    }
    assert d.leg_error(refused) == (
        "refused by OpenSearch (status 400, query phase): "
        "illegal_argument_exception: field too long"
    )
    lost = {"status": 503, "error": {"type": "no_shard_available_action_exception"}}
    assert d.leg_error(lost).startswith("failed by OpenSearch (status 503)")
    assert d.refusal(refused) == "illegal_argument_exception"
    assert d.refusal(lost) is None
    assert d.refusal({"status": 429, "error": {"type": "rejected_execution_exception"}}) is None


def test_legs_return_only_what_fusion_reads() -> None:
    """No `_source` (no body text), no stored field at all (not even `_id`: its block holds the
    `_source`), no highlight: ids, outcome and replacement by doc values."""
    q = LegQuery(VIS, FILTERS, "deploy", [0.5, -0.5, 0.0], 100)
    for body in (b.text_leg(q), b.vector_leg(q)):
        assert body["_source"] is False and "highlight" not in body
        assert body["stored_fields"] == "_none_"
        assert body["docvalue_fields"] == ["id", "outcome", "superseded_by"]
        assert body["size"] == 100  # the candidate depth, as tuned


def test_vector_leg_carries_nothing_of_the_words() -> None:
    # Which meaning hits the words match is the page fetch's to ask (words_body), only when
    # `total` needs it: the k-NN leg is the same with or without the query's words.
    q = LegQuery(VIS, FILTERS, "deploy", [0.5, -0.5, 0.0], 100)
    assert b.vector_leg(q) == b.vector_leg(replace(q, text=None))


def test_page_asks_which_meaning_hits_the_words_match_under_the_text_legs_query() -> None:
    page = b.PageQuery(
        VIS, ("itm_2",), FILTERS, "^dep.*", "deploy", "stemmed", words_of=("itm_7", "itm_8"),
    )  # fmt: skip
    *shown, words = b.page_bodies(page)
    assert len(shown) == 1 and "highlight" not in shown[0]
    check("page_words", words)
    leg = b.text_leg(LegQuery(VIS, FILTERS, "deploy", None, 100, regex="^dep.*"))["query"]
    # The text leg's own match narrowed to the ids (which the vector leg found under the
    # search's visibility and filters: not read again).
    scoring, ids = words["query"]["bool"]["filter"]
    assert [scoring] == leg["bool"]["must"]
    assert ids == {"terms": {"id": ["itm_7", "itm_8"]}}
    # No hit is fetched: the matching ids come back as buckets, one per id at most.
    assert words["size"] == 0 and words["aggs"][b.WORDS_AGG]["terms"]["size"] == 2
    assert words["aggs"][b.WORDS_AGG]["terms"]["field"] == "id"
    assert b.page_bodies(replace(page, words_of=())) == shown


def test_text_leg_continues_after_sort_values_or_an_offset() -> None:
    q = LegQuery(VIS, Filters(), "deploy", None, 100)
    assert b.text_leg(q)["sort"] == [
        {"_score": {"order": "desc"}},
        {"id": {"order": "asc", "unmapped_type": "keyword"}},
    ]
    assert "search_after" not in b.text_leg(q) and "from" not in b.text_leg(q)
    assert b.text_leg(replace(q, text_offset=200))["from"] == 200
    after = b.text_leg(replace(q, text_offset=200, text_after="itm_9"), after=(1.5, "itm_9"))
    assert after["search_after"] == [1.5, "itm_9"] and "from" not in after


def test_the_anchor_is_the_text_leg_narrowed_to_the_hit_it_continues_after() -> None:
    q = LegQuery(VIS, FILTERS, "deploy", None, 100, text_offset=200, text_after="itm_9")
    anchor = b.text_anchor(q)
    leg = b.text_leg(q)
    assert anchor["size"] == 1 and "from" not in anchor and "search_after" not in anchor
    assert anchor["sort"] == leg["sort"]  # its sort values are the leg's own
    assert anchor["query"]["bool"]["must"] == leg["query"]["bool"]["must"]
    filters = anchor["query"]["bool"]["filter"]  # visibility and filters kept, then the id
    assert filters == [*leg["query"]["bool"]["filter"], {"term": {"id": "itm_9"}}]


def test_page_fetch_reads_the_page_under_visibility_and_filters_without_highlights() -> None:
    """The searched page (where it is not read by id): one body for every id, visibility and
    filters applied again, nothing highlighted (the core makes the snippets)."""
    page = b.PageQuery(VIS, ("itm_2", "itm_1"), FILTERS, None, "deploy", "stemmed")
    [body] = b.page_bodies(page)
    check("page", body)
    clauses = body["query"]["bool"]["filter"]
    assert clauses[:-1] == b.filter_clauses(VIS, FILTERS)  # visibility and filters again
    assert clauses[-1] == {"terms": {"id": ["itm_2", "itm_1"]}} and body["size"] == 2
    assert body["_source"] == {"excludes": ["vector", "embedded_text_sha"]}
    assert "highlight" not in body


def test_browse_continues_after_the_last_item() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    body = b.browse_body(VIS, Filters(), 10, after=(when, "itm_7"))
    assert body["search_after"] == [int(when.timestamp() * 1000), "itm_7"]
    assert b.browse_body(VIS, Filters(), 10, after=(None, "itm_7"))["search_after"] == [
        b.MISSING_DESC, "itm_7"
    ]  # fmt: skip
    assert b.browse_body(VIS, Filters(), 10, offset=30)["from"] == 30
