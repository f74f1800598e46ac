"""GET /api/v1/admin/access: an admin's "why can't she see it?", for its own workspace only."""

from __future__ import annotations

from collections.abc import Callable

from suli.auth import create_token

from .helpers import Api, World, assert_error_shape

ROUTE = "/api/v1/admin/access"


def test_one_principal_the_rule_and_what_a_search_shows(api: Api) -> None:
    r = api.client.get(ROUTE, params={"item": "itm_checklist", "principal": "prn_ana"},
                       headers=api.auth("admin"))  # fmt: skip
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["visible"], body["rule"], body["groups"]) == (True, "board-group", ["grp_eng"])
    assert body["reason"] == "board brd_eng lists group grp_eng, which prn_ana holds"
    r = api.client.get(ROUTE, params={"item": "itm_secret", "principal": "prn_ana"},
                       headers=api.auth("admin"))  # fmt: skip
    assert (r.json()["visible"], r.json()["rule"]) == (False, "board-not-listed")


def test_without_a_principal_everyone_who_may_see_it(api: Api) -> None:
    r = api.client.get(ROUTE, params={"item": "itm_bobnotes"}, headers=api.auth("admin"))
    assert [(v["rule"], v["principal"]) for v in r.json()["audience"]] == [("uploader", "prn_bob")]


def test_admin_only(api: Api) -> None:
    r = api.client.get(ROUTE, params={"item": "itm_rollback"}, headers=api.auth("ana"))
    assert_error_shape(r, 403, "forbidden")


def test_bad_input_names_the_field(api: Api) -> None:
    r = api.client.get(ROUTE, params={"item": " "}, headers=api.auth("admin"))
    assert_error_shape(r, 422, "invalid_input")
    assert r.json()["error"]["field"] == "item"


def test_another_workspaces_admin_learns_nothing(
    make_api: Callable[..., Api], fresh_world: World
) -> None:
    """prn_eve administers ws_other: ws_main's item is answered like an id nobody uses, and
    ws_main's principal like a principal nobody has."""
    api = make_api(on=fresh_world)
    eve = create_token(api.searcher.backend, "prn_eve", admin=True)
    auth = {"Authorization": f"Bearer {eve}"}
    theirs = api.client.get(ROUTE, params={"item": "itm_rollback"}, headers=auth)
    nobody = api.client.get(ROUTE, params={"item": "itm_nobody"}, headers=auth)
    assert theirs.status_code == nobody.status_code == 404
    assert theirs.json()["error"]["message"].replace("itm_rollback", "X") == nobody.json()["error"][
        "message"
    ].replace("itm_nobody", "X")
    own = api.client.get(ROUTE, params={"item": "itm_other", "principal": "prn_eve"}, headers=auth)
    assert own.status_code == 200 and own.json()["rule"] == "workspace-wide"
    for who in ("prn_ana", "prn_nobody"):
        r = api.client.get(ROUTE, params={"item": "itm_other", "principal": who}, headers=auth)
        assert_error_shape(r, 422, "invalid_input")
        assert r.json()["error"]["message"] == f"principal: unknown principal {who!r}"
