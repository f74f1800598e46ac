"""Contract rules of DESIGN.md section 3.9 (related items) and section 8 (bad input changes nothing)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from indexer.pipeline import index_stream
from suli.errors import InvalidInput, NotFound
from suli.search_params import search_request
from suli.service import Card

from .helpers import WS, MakeSearcher, World, acl, item, principal

RELATED_ITEMS = [
    item(
        "itm_x",
        "Payment retry design",
        "Exponential backoff for payment retries.",
        references=["itm_ref", "itm_ref_secret", "itm_ref_hidden", "https://wiki.example/pay"],
    ),
    item("itm_ref", "Ledger schema", "Tables and columns."),  # shares no word with itm_x
    item("itm_ref_secret", "Payment retry secrets", "payment retry backoff", board="brd_secret"),
    item("itm_ref_hidden", "Payment retry hidden", "payment retry backoff", hidden=True),
    item(
        "itm_similar", "Payment retry runbook", "When payment retries pile up, raise the backoff."
    ),
    item("itm_citing", "Quarterly planning", "Unrelated words.", references=["itm_x"]),
    item(
        "itm_citing_secret",
        "Payment plans",
        "payment retry",
        references=["itm_x"],
        board="brd_secret",
    ),
    item("itm_other", "Gardening", "Tomatoes and beans."),
]


class RelatedRules:
    """DESIGN 3.9: direct references first, the item itself excluded, cards never stored."""

    @pytest.fixture(scope="class")
    @classmethod
    def rel(cls, make_searcher: MakeSearcher) -> World:
        return make_searcher(
            RELATED_ITEMS, [principal("prn_p")], [acl("brd_secret", members=["prn_s"])]
        )

    def test_direct_references_rank_first_and_the_item_is_excluded(self, rel: World) -> None:
        ids = [r.id for r in rel.related("prn_p", "itm_x", limit=25).results]
        assert ids[0] == "itm_ref"
        assert "itm_x" not in ids
        assert "itm_similar" in ids
        assert "itm_citing" in ids  # items that name it are related too
        assert not {"itm_ref_secret", "itm_citing_secret"} & set(ids)

    def test_related_never_returns_hidden_items(self, rel: World) -> None:
        """Hidden items are excluded unless a request asks; a related request cannot ask."""
        ids = [r.id for r in rel.related("prn_p", "itm_x", limit=25).results]
        assert "itm_ref_hidden" not in ids
        card = Card("Payment retry", "backoff", references=("itm_ref_hidden", "itm_ref"))
        assert "itm_ref_hidden" not in [
            r.id for r in rel.related("prn_p", card=card, limit=25).results
        ]

    def test_related_respects_its_limit(self, rel: World) -> None:
        assert len(rel.related("prn_p", "itm_x", limit=1).results) == 1
        for bad in (0, 26):
            with pytest.raises(InvalidInput) as e:
                rel.related("prn_p", "itm_x", limit=bad)
            assert e.value.field == "limit"

    def test_a_card_is_matched_from_title_and_spec_and_never_stored(self, rel: World) -> None:
        before = rel.backend.count()
        card = Card("Payment retry checklist", "What to do when payment retries back off: zyzzyva.")
        ids = [r.id for r in rel.related("prn_p", card=card, limit=25).results]
        assert {"itm_x", "itm_similar"} <= set(ids)
        assert "itm_other" not in ids[:2]
        rel.refresh()
        assert rel.backend.count() == before
        assert (
            rel.search("prn_p", "zyzzyva", mode="text").total == 0
        )  # its words are stored nowhere

    def test_a_card_with_references_lists_visible_ones_first(self, rel: World) -> None:
        card = Card("Gardening notes", "", references=("itm_ref_secret", "itm_ref", "itm_missing"))
        ids = [r.id for r in rel.related("prn_p", card=card, limit=25).results]
        assert ids[0] == "itm_ref"
        assert "itm_ref_secret" not in ids and "itm_missing" not in ids

    def test_related_needs_exactly_one_source(self, rel: World) -> None:
        with pytest.raises(InvalidInput):
            rel.related("prn_p")
        with pytest.raises(InvalidInput):
            rel.related("prn_p", "itm_x", card=Card("t"))
        with pytest.raises(NotFound):
            rel.related("prn_p", "itm_missing")


BAD_SEARCHES: list[tuple[dict[str, Any], str]] = [
    ({"outcome": "shipped"}, "outcome"),
    ({"outcome": ["approved", "great"]}, "outcome"),
    ({"kind": "memo"}, "kind"),
    ({"limit": 0}, "limit"),
    ({"limit": 26}, "limit"),
    ({"limit": "ten"}, "limit"),
    ({"since": "2026-02-01", "until": "2026-01-01"}, "since"),
    ({"since": "2026-13-01"}, "since"),
    ({"since": "yesterday"}, "since"),
    ({"until": "2026/01/05"}, "until"),
    ({"until": "2026-02-30"}, "until"),
    ({"recent_days": 0}, "recent_days"),
    ({"recent_days": 3, "since": "2026-01-01"}, "recent_days"),
    ({"query": "word " * 201}, "query"),
    ({"mode": "fuzzy"}, "mode"),
    ({"regex": "("}, "regex"),
]
LUCENE_QUERIES = [
    'title:(zebra) AND "herd',
    "*",
    "~",
    "\\",
    "zebra~2 herd^3",
    "+zebra -herd",
    "zebra && herd || !cats",
    "[a TO z] {x TO y}",
    "/zeb.*/",
    "zebra\\",
    'zebra"',
    "(((",
    "title:",
    "_exists_:body",
]


class BadInputRules:
    """DESIGN 8: every bad input is refused naming its field, and changes nothing."""

    @pytest.fixture(scope="class")
    @classmethod
    def guarded(cls, make_searcher: MakeSearcher) -> World:
        items = [
            item("itm_z", "Zebra herd", "The herd crossed the river."),
            item("itm_y", "Cats", "Other animals."),
        ]
        return make_searcher(items, [principal("prn_p")])

    @pytest.mark.parametrize(
        "params,field", BAD_SEARCHES, ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD_SEARCHES)]
    )
    def test_bad_search_parameters_name_the_field(
        self, guarded: World, params: dict[str, Any], field: str
    ) -> None:
        before = guarded.backend.count()
        params = dict(params)  # the parametrized dict is shared between runs
        query = params.pop("query", "zebra")
        with pytest.raises(InvalidInput) as e:
            guarded.search("prn_p", query, **params)
        assert e.value.field == field
        with pytest.raises(InvalidInput):
            search_request(query, **params)
        assert guarded.backend.count() == before

    @pytest.mark.parametrize("query", LUCENE_QUERIES)
    def test_query_syntax_is_plain_words(self, guarded: World, query: str) -> None:
        resp = guarded.search("prn_p", query, limit=25)  # never a syntax error
        ids = {r.id for r in resp.results}
        assert ids <= {"itm_z", "itm_y"}
        if "zebra" in query.lower():
            assert "itm_z" in ids

    def test_operators_are_not_obeyed(self, guarded: World) -> None:
        """'-herd' must not exclude the herd item: '-' is punctuation, not NOT."""
        assert "itm_z" in guarded.ids("prn_p", "+zebra -herd")
        assert "itm_z" in guarded.ids("prn_p", "cats AND NOT herd")

    def test_bad_lines_are_rejected_with_reasons_and_change_nothing(self, guarded: World) -> None:
        before = guarded.backend.count()
        good = {"id": "itm_new", "workspace": WS, "title": "New zebra"}
        lines = [
            "{not json",
            json.dumps({"id": "itm_b1", "workspace": WS, "title": "x", "outcome": "shipped"}),
            json.dumps({"id": "itm_b2", "workspace": WS}),
            json.dumps(
                {"id": "itm_b3", "workspace": WS, "title": "x", "last_activity_at": "last week"}
            ),
            json.dumps({"id": "itm_b4", "workspace": WS, "title": "x", "mystery": 1}),
            json.dumps(["an", "array"]),
            json.dumps({"id": "bad id with spaces", "workspace": WS, "title": "x"}),
        ]
        summary = index_stream(
            io.StringIO("\n".join(lines) + "\n"), guarded.backend, guarded.embedder
        )
        guarded.refresh()
        assert summary.indexed == 0 and summary.read == len(lines)
        assert [r.line for r in summary.rejected] == list(range(1, len(lines) + 1))
        reasons = [r.reason for r in summary.rejected]
        assert "JSON" in reasons[0]
        assert (
            "outcome" in reasons[1] and "title" in reasons[2] and "last_activity_at" in reasons[3]
        )
        assert "mystery" in reasons[4]
        assert guarded.backend.count() == before
        for bad in ("itm_b1", "itm_b2", "itm_b3", "itm_b4"):
            with pytest.raises(NotFound):
                guarded.get("prn_p", bad)
        # A bad line among good ones: the good one goes in, the bad one is reported.
        summary = index_stream(
            io.StringIO(lines[1] + "\n" + json.dumps(good) + "\n"),
            guarded.backend,
            guarded.embedder,
        )
        guarded.refresh()
        assert (summary.indexed, [r.line for r in summary.rejected]) == (1, [1])
        assert guarded.backend.count() == before + 1
        guarded.backend.delete(good["workspace"], ["itm_new"])
        guarded.refresh()
