"""DESIGN 3.10: facets you can combine. Within one facet the counts are disjunctive (its own
ticked values do not narrow it), the other facets' selections do; never an invisible item.
Expected counts come from tests/contract/oracle.py, which reads the raw items."""

from __future__ import annotations

from typing import Any

import pytest

from suli.search_params import search_request
from suli.validate import parse_item

from . import oracle
from .helpers import T0, MakeSearcher, World, acl, principal

RAW: list[dict[str, Any]] = [
    {
        "id": f"itm_f{n}",
        "workspace": "ws_main",
        "title": f"Release runbook {n}" if n % 3 else f"Payroll note {n}",
        "body": "runbook steps" if n % 3 else "payroll",
        "kind": "artifact" if n % 2 else "work-record",
        "outcome": ["approved", "failed", "completed", None][n % 4],
        "tags": [["t-a"], ["t-b"], ["t-a", "t-b"], []][n % 4],
        "agent": ["prn-bot0", "prn-bot1", None][n % 3],
        "stations": [[{"id": "s0", "name": "Alpha"}], []][n % 2],
        "board": "brd_hidden" if n % 5 == 0 else None,
        "last_activity_at": T0,
    }
    for n in range(20)
]
WHO = oracle.Person("prn_a", "ws_main", frozenset())
ACLS = [oracle.Acl("brd_hidden", "ws_main", frozenset({"prn_z"}), frozenset())]
CASES: list[dict[str, Any]] = [
    {},
    {"outcome": ["approved"]},
    {"outcome": ["approved", "failed"], "kind": ["artifact"]},
    {"tag": ["t-a"], "agent": ["prn-bot0"]},
    {"station": ["s0"], "outcome": ["completed"], "tag": ["t-b"]},
    {"board": ["brd_hidden"]},
]


def _ask(params: dict[str, Any]) -> oracle.Ask:
    return oracle.Ask(
        kinds=tuple(params.get("kind", ())),
        outcomes=tuple(params.get("outcome", ())),
        boards=tuple(params.get("board", ())),
        agents=tuple(params.get("agent", ())),
        stations=tuple(params.get("station", ())),
        tags=tuple(params.get("tag", ())),
    )


def _words(it: dict[str, Any], query: str) -> bool:
    return it["id"] in oracle.word_hits([it], query) | oracle.typo_hits([it], query)


class FacetRules:
    @pytest.fixture(scope="class")
    @classmethod
    def faceted(cls, make_searcher: MakeSearcher) -> World:
        items = [parse_item(d) for d in RAW]
        return make_searcher(items, [principal("prn_a")], [acl("brd_hidden", members=["prn_z"])])

    @pytest.mark.parametrize("params", CASES, ids=[str(sorted(c)) for c in CASES])
    @pytest.mark.parametrize("query", ["", "runbook"])
    def test_each_facet_counts_under_every_filter_but_its_own(
        self, faceted: World, query: str, params: dict[str, Any]
    ) -> None:
        req = search_request(query, mode="text", **params)
        got = faceted.searcher.facets(faceted.who("prn_a"), req=req)
        ask = _ask(params)

        def matches(it: dict[str, Any]) -> bool:
            return not query or _words(it, query)

        want = oracle.disjunctive_facets(WHO, ACLS, RAW, ask, matches)
        assert {k: dict(v) for k, v in got.values.items() if v} == want
        every = [it for it in RAW if oracle.sees(WHO, ACLS, it) and oracle.passes(it, ask)]
        assert got.total == len([it for it in every if matches(it)])
        assert "brd_hidden" not in str(got)  # never a value of an invisible item

    def test_a_search_carries_the_same_disjunctive_counts(self, faceted: World) -> None:
        resp = faceted.search("prn_a", "runbook", mode="text", outcome="approved", facets=True)
        alone = faceted.searcher.facets(
            faceted.who("prn_a"), req=search_request("runbook", mode="text")
        )
        assert resp.facets is not None
        # ticking "approved" leaves every outcome's count as it was without the filter
        assert dict(resp.facets.values["outcome"]) == dict(alone.values["outcome"])
        assert resp.facets.total == resp.total == len(resp.results)
