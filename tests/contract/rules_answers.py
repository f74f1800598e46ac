"""Search answers: a meaning-only match below the floor is dropped, `total` counts the visible
matches (a lower bound where the vector leg may hold more), a cursor pages on without repeats
or gaps and only for its own caller and search, facets follow the query and never count an
item the caller may not see. The same rules for every backend."""

from __future__ import annotations

import pytest

from suli.errors import InvalidInput
from suli.models import Filters, Item, SearchRequest
from suli.search_params import search_request

from .helpers import (
    KeyedEmbedder,
    MakeSearcher,
    World,
    acl,
    axis,
    blend,
    expected_facets,
    facet_dict,
    item,
    principal,
)

RUNBOOKS = 9  # word matches of "runbook"


class AnswerRules:
    @pytest.fixture(scope="class")
    @classmethod
    def library(cls, make_searcher: MakeSearcher) -> World:
        """9 runbooks (3 on a board only prn_b sees), 2 meaning-only neighbours of "runbook",
        one far item, and 60 tagged items (more tags than a facet's cap)."""
        books = [
            item(
                f"itm_rb{n}",
                f"Runbook {n}",
                "steps for the runbook",
                outcome="approved" if n % 2 else "failed",
                tags=[f"t{n % 3}"],
                **({"board": "brd_x"} if n >= 6 else {}),
            )
            for n in range(RUNBOOKS)
        ]
        near = item("itm_near", "Operating guide", "what to do when paged", tags=["t0"])
        near2 = item("itm_near2", "Playbook", "incident handling")
        far = item("itm_far", "Lunch menu", "soup of the day")
        tagged = [
            item(f"itm_tag{n:02}", f"Tagged {n}", "filler", tags=[f"tag{n:02}"]) for n in range(60)
        ]
        emb = KeyedEmbedder(
            [
                ("runbook", axis(0)),
                ("menu soup nonsense", axis(1)),
                (near, blend(0, 2, 0.8)),
                (near2, blend(0, 3, 0.7)),
                (far, blend(1, 4, 0.3)),  # the best neighbour of its query, yet below the floor
            ]
        )
        for n, b in enumerate(books):
            emb.set(b, blend(0, 5 + n, 0.6))
        for n, t in enumerate(tagged):
            emb.set(t, axis(20 + n % 40))
        return make_searcher(
            [*books, near, near2, far, *tagged],
            [principal("prn_a"), principal("prn_b")],
            [acl("brd_x", members=["prn_b"])],
            embedder=emb,
            meaning_floor=0.35,
            meaning_margin=0.5,
        )

    # ---- 1. the floor ------------------------------------------------------------------------

    def test_a_meaning_only_hit_below_the_floor_is_dropped_and_explain_says_so(
        self, library: World
    ) -> None:
        resp = library.search("prn_a", "menu soup nonsense", mode="vector", explain=True)
        assert resp.results == () and resp.total == 0 and not resp.has_more
        assert resp.dropped and resp.dropped.get("meaning-below-floor", 0) >= 1
        # without a floor the same query keeps its nearest item (the margin alone is relative)
        loose = library.with_settings(meaning_floor=-1.0)
        assert "itm_far" in loose.ids("prn_a", "menu soup nonsense", mode="vector")

    def test_meaning_only_hits_above_the_floor_are_kept(self, library: World) -> None:
        ids = library.ids("prn_a", "runbook", limit=25)
        assert {"itm_near", "itm_near2"} <= set(ids)
        assert "itm_far" not in ids

    # ---- 2. total ----------------------------------------------------------------------------

    def test_total_counts_every_visible_word_match_not_the_depth(self, library: World) -> None:
        shallow = library.with_settings(candidate_depth=2)
        resp = shallow.search("prn_a", "runbook", mode="text", limit=1)
        assert (resp.total, resp.total_relation) == (6, "eq")  # 6 visible to prn_a, depth 2
        resp = shallow.search("prn_b", "runbook", mode="text", limit=1)
        assert (resp.total, resp.total_relation) == (RUNBOOKS, "eq")

    def test_hybrid_total_adds_kept_meaning_only_hits_once(self, library: World) -> None:
        full = library.search("prn_a", "runbook", limit=25)
        assert (full.total, full.total_relation) == (6 + 2, "eq") == (len(full.results), "eq")
        # depth 2: the text leg holds 2 of 6, the vector leg itm_near and itm_near2; a runbook
        # the vector leg finds is a word match beyond the text leg's depth: counted once.
        shallow = library.with_settings(candidate_depth=2)
        assert shallow.search("prn_a", "runbook", exact_total=True).total == 8
        # Not asked exact: what comes free, a true lower bound where a backend would pay for
        # the rest (or the exact figure, "eq", where it knows it anyway).
        free = shallow.search("prn_a", "runbook")
        assert free.total == 8 if free.total_relation == "eq" else 4 <= free.total <= 8
        shallow3 = library.with_settings(candidate_depth=3)
        resp = shallow3.search("prn_a", "runbook", exact_total=True)
        # the vector leg's last hit still passes the gates: more may lie deeper, so "gte"
        assert (resp.total, resp.total_relation) == (8, "gte")

    def test_total_is_a_lower_bound_when_the_vector_leg_may_hold_more(self, library: World) -> None:
        resp = library.with_settings(candidate_depth=3).search("prn_a", "runbook", mode="vector")
        assert resp.total_relation == "gte" and resp.total == 3

    def test_filters_narrow_total(self, library: World) -> None:
        resp = library.search("prn_b", "runbook", mode="text", outcome="approved")
        assert (resp.total, resp.total_relation) == (4, "eq")

    # ---- 3. paging ---------------------------------------------------------------------------

    def test_cursor_pages_through_the_ranked_list_without_repeats_or_gaps(
        self, library: World
    ) -> None:
        whole = library.ids("prn_b", "runbook", limit=25)
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            resp = library.search("prn_b", "runbook", limit=4, cursor=cursor)
            assert resp.offset == len(seen)
            seen += [r.id for r in resp.results]
            pages += 1
            if not resp.has_more:
                assert resp.next is None
                break
            assert resp.next
            cursor = resp.next
        assert seen == whole and len(set(seen)) == len(seen) and pages == 3
        # the same cursor twice gives the same page (stable while the index is unchanged)
        first = library.search("prn_b", "runbook", limit=4)
        a = library.ids("prn_b", "runbook", limit=4, cursor=first.next)
        assert a == library.ids("prn_b", "runbook", limit=4, cursor=first.next) == whole[4:8]
        # a page number means the same
        assert library.ids("prn_b", "runbook", limit=4, page=2) == whole[4:8]

    def test_browse_pages_too(self, library: World) -> None:
        whole = library.ids("prn_a", "", limit=25)
        first = library.search("prn_a", "", limit=10)
        assert first.has_more and first.total == 2 + 6 + 1 + 60
        second = library.search("prn_a", "", limit=10, cursor=first.next)
        assert [r.id for r in first.results + second.results] == whole[:20]

    def test_a_page_past_the_end_is_empty(self, library: World) -> None:
        for query in ("", "runbook"):
            resp = library.search("prn_a", query, limit=25, page=400)
            assert resp.results == () and not resp.has_more and resp.next is None
            assert resp.total == library.search("prn_a", query).total

    @pytest.mark.parametrize(
        "who, query, params",
        [
            ("prn_a", "runbook", {}),  # another principal
            ("prn_b", "playbook", {}),  # another query
            ("prn_b", "runbook", {"mode": "text"}),  # another mode
            ("prn_b", "runbook", {"outcome": "approved"}),  # other filters
        ],
    )
    def test_a_cursor_of_another_caller_or_search_is_refused(
        self, library: World, who: str, query: str, params: dict[str, str]
    ) -> None:
        cursor = library.search("prn_b", "runbook", limit=4).next
        assert cursor
        with pytest.raises(InvalidInput) as e:
            library.search(who, query, limit=4, cursor=cursor, **params)
        assert e.value.field == "cursor"
        # case and spacing of the words do not make another search
        assert library.search("prn_b", "  RUNBOOK ", limit=4, cursor=cursor).offset == 4

    def test_a_tampered_cursor_is_refused(self, library: World) -> None:
        cursor = library.search("prn_b", "runbook", limit=4).next
        assert cursor
        body, sig = cursor.split(".")
        for bad in (body + "." + sig[:-2] + "AA", body[:-2] + "x." + sig, "garbage", "a.b.c"):
            with pytest.raises(InvalidInput) as e:
                library.search("prn_b", "runbook", limit=4, cursor=bad)
            assert e.value.field == "cursor"

    def test_a_cursor_never_widens_visibility(self, make_searcher: MakeSearcher) -> None:
        items = [
            item(f"itm_{n}", f"Runbook {n}", "runbook", **({"board": "brd_y"} if n % 2 else {}))
            for n in range(8)
        ]
        w = make_searcher(items, [principal("prn_c")], [acl("brd_y", members=["prn_c"])])
        first = w.search("prn_c", "runbook", limit=3, mode="text")
        assert first.total == 8 and first.next
        w.backend.put_acls([acl("brd_y", members=[])])  # prn_c leaves the board
        w.refresh()
        rest = w.search("prn_c", "runbook", limit=25, mode="text", cursor=first.next)
        assert all(not r.board for r in rest.results)
        assert rest.total == 4

    # ---- 4. facets ---------------------------------------------------------------------------

    def test_facets_follow_the_query_and_filters(self, library: World) -> None:
        req_results = library.search("prn_b", "runbook", limit=25)
        got = library.searcher.facets(library.who("prn_b"), req=_req("runbook"))
        shown = {i.id: i for i in _items(library, [r.id for r in req_results.results])}
        assert facet_dict(got) == expected_facets(shown.values())
        assert got.total == req_results.total == len(req_results.results)
        # a ticked filter narrows the other facets' counts, never its own (DESIGN 3.10)
        narrowed = library.searcher.facets(
            library.who("prn_b"), req=_req("runbook", outcome="approved")
        )
        assert dict(narrowed.values["outcome"]) == dict(got.values["outcome"])
        assert dict(got.values["outcome"])["approved"] == 4 < got.total
        assert sum(n for _, n in narrowed.values["kind"]) == narrowed.total == 4

    def test_facets_never_count_an_invisible_item(self, library: World) -> None:
        got = library.searcher.facets(library.who("prn_a"), req=_req("runbook"))
        assert "brd_x" not in dict(got.values.get("board", []))
        assert got.total == 8

    def test_every_value_up_to_the_cap_then_more(self, library: World) -> None:
        got = library.facets("prn_a", Filters())
        assert len(got.values["tag"]) == 50 and got.more["tag"] is True
        assert got.more["outcome"] is False
        few = library.searcher.facets(library.who("prn_a"), req=_req("runbook"))
        assert few.more["tag"] is False and len(few.values["tag"]) == 3

    def test_a_search_can_carry_its_facets(self, library: World) -> None:
        resp = library.search("prn_b", "runbook", facets=True)
        assert resp.facets is not None and resp.facets.total == resp.total


def _req(query: str, **params: str) -> SearchRequest:
    return search_request(query, **params)


def _items(world: World, ids: list[str]) -> list[Item]:
    vis = world.searcher.visibility(world.who("prn_b"))
    got = world.backend.get_many(vis, ids)
    return [got[i] for i in ids]
