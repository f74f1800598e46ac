"""Auth, bad input, rate limits and the one JSON error shape, over the real OpenSearch."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from suli.auth import revoke_token

from .helpers import Api, assert_error_shape, raw_item

BACKENDS = ("embedded", "opensearch")  # the default store too: no node needed for it

READ_ROUTES = (
    ("GET", "/api/v1/search?q=deploy", None),
    ("POST", "/api/v1/search", {"q": "deploy"}),
    ("POST", "/api/v1/related", {"item_id": "itm_rollback"}),
    ("GET", "/api/v1/items/itm_rollback", None),
    ("GET", "/api/v1/facets", None),
)
ADMIN_ROUTES = (
    ("POST", "/api/v1/items", [raw_item("itm_new", "New")]),
    ("DELETE", "/api/v1/items/itm_rollback", None),
    ("PUT", "/api/v1/boards/brd_eng", {"members": ["prn_bob"]}),
    ("PUT", "/api/v1/principals/prn_bob", {"groups": ["grp_eng"]}),
)


@pytest.mark.parametrize(("method", "path", "body"), READ_ROUTES + ADMIN_ROUTES)
def test_every_api_route_needs_a_bearer_token(
    api: Api, method: str, path: str, body: object
) -> None:
    for headers in (
        {},
        {"Authorization": "Bearer suli_not-a-real-token"},
        {"Authorization": f"Basic {api.tokens['ana']}"},  # the right secret in the wrong scheme
    ):
        r = api.client.request(method, path, json=body, headers=headers)
        assert_error_shape(r, 401, "unauthorized")


def test_a_revoked_token_is_refused_on_the_next_request(
    make_api: Callable[..., Api], fresh_world: object
) -> None:
    api = make_api(on=fresh_world)
    assert api.client.get("/api/v1/facets", headers=api.auth("bob")).status_code == 200
    revoke_token(api.searcher.backend, api.tokens["bob"])
    assert_error_shape(
        api.client.get("/api/v1/facets", headers=api.auth("bob")), 401, "unauthorized"
    )


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ROUTES)
def test_ingestion_and_acl_routes_need_an_admin_token(
    api: Api, method: str, path: str, body: object
) -> None:
    r = api.client.request(method, path, json=body, headers=api.auth("ana"))
    assert_error_shape(r, 403, "forbidden")
    # Nothing changed: the item is still there for the admin's workspace readers.
    assert api.client.get("/api/v1/items/itm_rollback", headers=api.auth("ana")).status_code == 200


def test_unknown_route_and_wrong_method_use_the_error_shape(api: Api) -> None:
    assert_error_shape(api.client.get("/api/v1/nothing", headers=api.auth("ana")), 404, "not_found")
    assert_error_shape(api.client.get("/nothing"), 404, "not_found")
    assert_error_shape(
        api.client.patch("/api/v1/search", headers=api.auth("ana")), 405, "method_not_allowed"
    )


def test_missing_and_invisible_items_are_the_same_404(api: Api) -> None:
    missing = assert_error_shape(
        api.client.get("/api/v1/items/itm_nope", headers=api.auth("ana")), 404, "not_found"
    )
    hidden = assert_error_shape(
        api.client.get("/api/v1/items/itm_secret", headers=api.auth("ana")), 404, "not_found"
    )
    assert missing["message"].replace("itm_nope", "X") == hidden["message"].replace(
        "itm_secret", "X"
    )
    assert api.client.get("/api/v1/items/itm_secret", headers=api.auth("bob")).status_code == 200


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 26}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"kind": "poem"}, "kind"),
        ({"outcome": "approved,great"}, "outcome"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-02-01", "until": "2026-01-01"}, "since"),
        ({"recent_days": 0}, "recent_days"),
        ({"mode": "magic"}, "mode"),
        ({"regex": "(unclosed"}, "regex"),
        ({"q": "x" * 1001}, "query"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_search_parameters_are_422_naming_the_field(
    api: Api, params: dict[str, object], field: str
) -> None:
    r = api.client.get("/api/v1/search", params=params, headers=api.auth("ana"))
    assert_error_shape(r, 422, "invalid_input", field)
    r = api.client.post("/api/v1/search", json=params, headers=api.auth("ana"))
    assert_error_shape(r, 422, "invalid_input", field)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "item_id"),
        ({"item_id": "itm_rollback", "title": "also a card"}, "item_id"),
        ({"item_id": "itm_rollback", "limit": 30}, "limit"),
        ({"title": "t", "references": "itm_rollback"}, "references"),
        ({"title": "t", "extra": 1}, "extra"),
    ],
)
def test_bad_related_bodies_are_422_naming_the_field(
    api: Api, body: dict[str, object], field: str
) -> None:
    r = api.client.post("/api/v1/related", json=body, headers=api.auth("ana"))
    assert_error_shape(r, 422, "invalid_input", field)


def test_a_body_that_is_not_json_is_400(api: Api) -> None:
    r = api.client.post(
        "/api/v1/search",
        content=b"{not json",
        headers={**api.auth("ana"), "Content-Type": "application/json"},
    )
    assert_error_shape(r, 400, "invalid_json", "body")


def test_burst_limit_per_principal_is_429_with_retry_after(make_api: Callable[..., Api]) -> None:
    api = make_api(rate_per_minute=3)
    for _ in range(3):
        assert api.client.get("/api/v1/facets", headers=api.auth("ana")).status_code == 200
    r = api.client.get("/api/v1/facets", headers=api.auth("ana"))
    err = assert_error_shape(r, 429, "rate_limited")
    assert err["limit"] == 3
    assert 1 <= err["retry_after"] <= 60
    assert r.headers["Retry-After"] == str(err["retry_after"])
    # Per principal: another caller is not affected.
    assert api.client.get("/api/v1/facets", headers=api.auth("bob")).status_code == 200


def test_daily_limit_is_429_until_utc_midnight(make_api: Callable[..., Api]) -> None:
    api = make_api(rate_per_day=2)
    for _ in range(2):
        assert api.client.get("/api/v1/facets", headers=api.auth("bob")).status_code == 200
    r = api.client.get("/api/v1/search", headers=api.auth("bob"))
    err = assert_error_shape(r, 429, "rate_limited")
    assert err["limit"] == 2
    assert 1 <= err["retry_after"] <= 86_400
    assert int(r.headers["Retry-After"]) == err["retry_after"]
