"""Search, items and facets over HTTP: same core answers, visibility everywhere, timings, limits."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from suli.render import response_json
from suli.search_params import search_request

from .helpers import Api, raw_item

# What each principal may see of ITEMS (search for "deploy" reaches every item).
VISIBLE = {
    "ana": {"itm_rollback", "itm_checklist", "itm_old"},
    "bob": {"itm_rollback", "itm_secret", "itm_bobnotes", "itm_old"},
    "eve": {"itm_other"},
}
ALL_IDS = {
    "itm_rollback",
    "itm_checklist",
    "itm_secret",
    "itm_bobnotes",
    "itm_old",
    "itm_other",
    "itm_hidden",
}


def ids(body: dict[str, Any]) -> list[str]:
    return [r["id"] for r in body["results"]]


def test_get_and_post_return_what_the_core_returns(api: Api) -> None:
    params = {"q": "deploy guide", "limit": 5, "explain": True}
    got = api.search("ana", **params)
    posted = api.client.post("/api/v1/search", json=params, headers=api.auth("ana")).json()
    s = api.searcher
    core = response_json(
        s.search(s.principal("prn_ana"), search_request("deploy guide", limit=5, explain=True))
    )
    assert ids(got) == ids(posted) == ids(core)
    strip = ("timings_ms",)
    assert {k: v for k, v in got.items() if k not in strip} == {
        k: v for k, v in core.items() if k not in strip
    }


@pytest.mark.parametrize("who", ["ana", "bob", "eve"])
def test_search_and_browse_show_only_visible_items(api: Api, who: str) -> None:
    for q in ("deploy", "", "payroll confidential", "notes timing"):
        for mode in ("hybrid", "text", "vector"):
            body = api.search(who, q=q, mode=mode, limit=25, hidden=True)
            assert set(ids(body)) <= VISIBLE[who] | {"itm_hidden"}, (q, mode)
            assert body["total"] <= len(VISIBLE[who]) + 1
    assert set(ids(api.search(who, q="deploy", limit=25))) == VISIBLE[who]


def test_invisible_items_leak_through_no_route(api: Api) -> None:
    h = api.auth("ana")
    secret = ALL_IDS - VISIBLE["ana"] - {"itm_hidden"}
    bodies = [
        api.client.get(
            "/api/v1/search", params={"q": "payroll secret confidential bob"}, headers=h
        ).text,
        api.client.get("/api/v1/search", params={"regex": "payroll|Bob|workspace"}, headers=h).text,
        api.client.get("/api/v1/facets", params={"hidden": True}, headers=h).text,
        api.client.post("/api/v1/related", json={"item_id": "itm_checklist"}, headers=h).text,
        api.client.post(
            "/api/v1/related",
            json={"title": "Secret deploy plan for payroll", "references": ["itm_secret"]},
            headers=h,
        ).text,
        api.client.get("/api/v1/items/itm_old", headers=h).text,
        api.client.get("/api/v1/items/itm_checklist", headers=h).text,
    ]
    for text in bodies:
        for item_id in secret:
            assert item_id not in text
        assert "brd_secret" not in text and "payroll" not in text.lower() and "ws_other" not in text
    # itm_checklist references itm_secret: the reference is dropped for ana, kept for bob's view
    # of an item he can see (itm_old is superseded by itm_secret).
    old_for_ana = api.client.get("/api/v1/items/itm_old", headers=h).json()
    old_for_bob = api.client.get("/api/v1/items/itm_old", headers=api.auth("bob")).json()
    assert (old_for_ana["superseded"], old_for_ana["superseded_by"]) == (True, None)
    assert old_for_bob["superseded_by"] == "itm_secret"
    assert api.client.get("/api/v1/items/itm_checklist", headers=h).json()["references"] == [
        "itm_rollback"
    ]


def test_facets_count_only_visible_items(api: Api) -> None:
    body = api.client.get("/api/v1/facets", headers=api.auth("ana")).json()
    assert body["total"] == len(VISIBLE["ana"])
    boards = {v["value"]: v["count"] for v in body["facets"]["board"]}
    assert boards == {"brd_eng": 1}
    assert "payroll" not in {v["value"] for v in body["facets"]["tag"]}
    eve = api.client.get("/api/v1/facets", headers=api.auth("eve")).json()
    assert eve["total"] == 1


def test_filters_take_repeated_or_comma_values(api: Api) -> None:
    both = api.search("ana", q="deploy", outcome="approved,completed")
    repeated = api.client.get(
        "/api/v1/search",
        params=[("q", "deploy"), ("outcome", "approved"), ("outcome", "completed")],
        headers=api.auth("ana"),
    ).json()
    posted = api.client.post(
        "/api/v1/search",
        json={"q": "deploy", "outcome": ["approved", "completed"]},
        headers=api.auth("ana"),
    ).json()
    assert (
        set(ids(both))
        == set(ids(repeated))
        == set(ids(posted))
        == {"itm_rollback", "itm_checklist"}
    )
    assert ids(api.search("ana", q="deploy", board="brd_eng")) == ["itm_checklist"]


def test_hidden_items_only_on_request(api: Api) -> None:
    assert "itm_hidden" not in ids(api.search("ana", q="hidden deploy draft"))
    assert "itm_hidden" in ids(api.search("ana", q="hidden deploy draft", hidden=True))


def test_limit_bounds(api: Api) -> None:
    assert len(api.search("bob", q="deploy", limit=1)["results"]) == 1
    assert len(api.search("bob", q="deploy", limit=25)["results"]) == 4


def parse_server_timing(header: str) -> dict[str, float]:
    out = {}
    for part in header.split(","):
        name, _, dur = part.strip().partition(";dur=")
        out[name] = float(dur)
    return out


def test_every_response_carries_timings(api: Api) -> None:
    # Phases go to admins only (tests/api/test_edge_round4.py: a caller gets the total).
    r = api.client.get("/api/v1/search", params={"q": "deploy"}, headers=api.auth("admin"))
    timings = r.json()["timings_ms"]
    for phase in ("acl", "embed", "search", "text_took", "vector_took", "fuse", "fetch", "total"):
        assert phase in timings, timings
    assert parse_server_timing(r.headers["Server-Timing"]) == pytest.approx(timings, abs=0.001)
    for method, path, body in (
        ("GET", "/api/v1/items/itm_rollback", None),
        ("GET", "/api/v1/facets", None),
        ("POST", "/api/v1/related", {"item_id": "itm_rollback"}),
    ):
        r = api.client.request(method, path, json=body, headers=api.auth("ana"))
        assert r.status_code == 200
        assert "total" in r.json()["timings_ms"]
        assert "total" in parse_server_timing(r.headers["Server-Timing"])
    # Errors and operational routes carry the header too.
    for r in (api.client.get("/api/v1/search"), api.client.get("/healthz")):
        assert "app" in parse_server_timing(r.headers["Server-Timing"])


def test_large_answers_are_trimmed_from_the_bottom(
    make_api: Callable[..., Api], fresh_world: Any
) -> None:
    admin = make_api(on=fresh_world)
    long_body = "deploy " + "lorem ipsum dolor sit amet " * 20
    batch = [
        raw_item(f"itm_big{i:02d}", f"Deploy note {i}", long_body, provenance={"blob": "x" * 300})
        for i in range(12)
    ]
    r = admin.client.post(
        "/api/v1/items", params={"refresh": True}, json=batch, headers=admin.auth("admin")
    )
    assert r.status_code == 200 and r.json()["indexed"] == 12
    full = admin.search("ana", q="deploy note", limit=25, explain=True)
    assert not full["truncated"]

    small = make_api(on=fresh_world, max_response_bytes=4096)
    r = small.client.get(
        "/api/v1/search",
        params={"q": "deploy note", "limit": 25, "explain": True},
        headers=small.auth("ana"),
    )
    body = r.json()
    assert body["truncated"] is True
    assert len(r.content) <= 4096
    assert 0 < len(body["results"]) < len(full["results"])
    # the next page starts at the first result cut: paging skips nothing
    assert body["has_more"] is True and body["next"]
    rest = small.client.get(
        "/api/v1/search",
        params={"q": "deploy note", "limit": 25, "explain": True, "cursor": body["next"]},
        headers=small.auth("ana"),
    ).json()
    assert rest["results"][0]["id"] == full["results"][len(body["results"])]["id"]
    assert ids(body) == ids(full)[: len(body["results"])]  # the lowest-ranked went first
    assert body["total"] == full["total"]
    assert json.loads(r.content) == body
