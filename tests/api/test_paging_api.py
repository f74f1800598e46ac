"""Paging, honest totals and facets that follow the query, over HTTP (GET and POST)."""

from __future__ import annotations

from typing import Any

import pytest

from .helpers import Api, assert_error_shape


def ids(body: dict[str, Any]) -> list[str]:
    return [r["id"] for r in body["results"]]


def test_next_pages_through_every_match_on_get_and_post(make_api: Any) -> None:
    api: Api = make_api()
    whole = api.search("bob", q="deploy", limit=25)
    assert (whole["total"], whole["total_relation"]) == (len(whole["results"]), "eq")
    assert whole["has_more"] is False and whole["next"] is None
    seen: list[str] = []
    body = api.search("bob", q="deploy", limit=1)
    while True:
        assert body["offset"] == len(seen) and body["total"] == whole["total"]
        seen += ids(body)
        if not body["has_more"]:
            assert body["next"] is None
            break
        posted = api.client.post(
            "/api/v1/search",
            json={"q": "deploy", "limit": 1, "cursor": body["next"]},
            headers=api.auth("bob"),
        ).json()
        body = api.search("bob", q="deploy", limit=1, cursor=body["next"])
        assert ids(posted) == ids(body)
    assert seen == ids(whole) and len(seen) >= 3


@pytest.mark.parametrize(
    "who, params",
    [
        ("ana", {"q": "deploy"}),  # another principal's cursor
        ("bob", {"q": "rollback"}),  # another query
        ("bob", {"q": "deploy", "outcome": "approved"}),  # other filters
        ("bob", {"q": "deploy", "mode": "text"}),  # another mode
    ],
)
def test_a_cursor_of_another_caller_or_search_is_refused(
    make_api: Any, who: str, params: dict[str, str]
) -> None:
    api: Api = make_api()
    cursor = api.search("bob", q="deploy", limit=1)["next"]
    assert cursor
    r = api.client.get("/api/v1/search", params={**params, "cursor": cursor}, headers=api.auth(who))
    assert_error_shape(r, 422, "invalid_input", "cursor")
    r = api.client.post("/api/v1/search", json={**params, "cursor": cursor}, headers=api.auth(who))
    assert_error_shape(r, 422, "invalid_input", "cursor")


def test_a_tampered_cursor_is_refused(make_api: Any) -> None:
    api: Api = make_api()
    cursor = api.search("bob", q="deploy", limit=1)["next"]
    body, sig = cursor.split(".")
    for bad in (f"{body}.{sig[::-1]}", "not-a-cursor", "x" * 600):
        r = api.client.get(
            "/api/v1/search", params={"q": "deploy", "cursor": bad}, headers=api.auth("bob")
        )
        assert_error_shape(r, 422, "invalid_input", "cursor")


def test_facets_follow_the_query_and_filters(make_api: Any) -> None:
    api: Api = make_api()
    h = api.auth("bob")
    everything = api.client.get("/api/v1/facets", headers=h).json()
    found = api.search("bob", q="payroll", limit=25)
    over = api.client.get("/api/v1/facets", params={"q": "payroll"}, headers=h).json()
    assert over["total"] == found["total"] == len(found["results"]) < everything["total"]
    kinds = sum(v["count"] for v in over["facets"]["kind"])
    assert kinds == len(found["results"])  # every item has one kind: counts add up
    assert set(over["more"]) == set(over["facets"]) and not any(over["more"].values())
    narrowed = api.client.get(
        "/api/v1/facets", params={"q": "deploy", "outcome": "approved"}, headers=h
    ).json()
    wide = api.client.get("/api/v1/facets", params={"q": "deploy"}, headers=h).json()
    # disjunctive (DESIGN 3.10): the ticked facet keeps its counts, the others narrow to it
    assert narrowed["facets"]["outcome"] == wide["facets"]["outcome"]
    approved = {v["value"]: v["count"] for v in wide["facets"]["outcome"]}["approved"]
    assert sum(v["count"] for v in narrowed["facets"]["kind"]) == narrowed["total"] == approved
    # the same counts ride on a search that asks for them
    carried = api.search("bob", q="payroll", facets=True)["facets"]
    assert carried["facets"] == over["facets"] and carried["total"] == over["total"]
    # bad input names the field
    r = api.client.get("/api/v1/facets", params={"q": "x", "mode": "fuzzy"}, headers=h)
    assert_error_shape(r, 422, "invalid_input", "mode")


def _walk(api: Api, **params: Any) -> tuple[list[str], list[dict[str, Any]]]:
    seen: list[str] = []
    bodies: list[dict[str, Any]] = []
    body = api.search("bob", **params)
    while True:
        bodies.append(body)
        assert body["offset"] == len(seen)
        seen += ids(body)
        if not body["has_more"]:
            return seen, bodies
        assert len(bodies) < 100
        body = api.search("bob", **params, cursor=body["next"])


@pytest.mark.parametrize("params", [{"q": ""}, {"q": "deploy", "mode": "text"}])
def test_browse_and_text_mode_pages_reach_total_past_the_depth(
    make_api: Any, params: dict[str, str]
) -> None:
    api: Api = make_api(candidate_depth=2)  # far below the matches: paging passes the depth
    seen, bodies = _walk(api, **params, limit=1)
    total = bodies[0]["total"]
    assert total > 2 and bodies[0]["total_relation"] == "eq"
    assert len(seen) == len(set(seen)) == total  # every counted match, once
    assert all(b["paging_limit"] is None for b in bodies)


def test_hybrid_says_where_its_pages_stop(make_api: Any) -> None:
    api: Api = make_api(candidate_depth=2, meaning_floor=0.999)
    seen, bodies = _walk(api, q="deploy", limit=1)
    first = bodies[0]
    assert first["paging_limit"] == len(seen) < first["total"]
    wide = make_api().search("bob", q="deploy", limit=1)
    assert wide["paging_limit"] is None  # the default depth holds every match
