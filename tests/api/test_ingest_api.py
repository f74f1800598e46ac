"""Admin writes over HTTP: bulk upsert with per-item outcome, delete, board ACLs, principals."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from suli.models import BoardAcl, Principal
from suli.visibility import Visibility

from .helpers import OTHER_WS, Api, World, assert_error_shape, raw_item


@pytest.fixture
def admin(make_api: Callable[..., Api], fresh_world: World) -> Api:
    return make_api(on=fresh_world)


def ids(body: dict[str, Any]) -> list[str]:
    return [r["id"] for r in body["results"]]


def upsert(api: Api, items: list[Any]) -> Any:
    return api.client.post(
        "/api/v1/items", params={"refresh": True}, json=items, headers=api.auth("admin")
    )


def test_bulk_upsert_indexes_the_valid_items_and_reports_each_one(admin: Api) -> None:
    batch = [
        raw_item("itm_kite", "Kite festival deploy", "Kites everywhere", outcome="approved"),
        raw_item("itm_bad", "", "no title"),  # invalid: empty title
        {"title": "no id at all", "workspace": "ws_main"},
        raw_item("itm_foreign", "Other workspace kite", workspace=OTHER_WS),
        raw_item(
            "itm_kite2", "Kite repair notes", "kite strings", board="brd_eng", outcome="bogus"
        ),
        raw_item("itm_kite3", "Kite storage", "kite storage shelf", board="brd_eng"),
    ]
    r = upsert(admin, batch)
    assert r.status_code == 207, r.text  # Multi-Status: not everything went in
    body = r.json()
    assert (body["indexed"], body["rejected"]) == (2, 4)
    by_index = {o["index"]: o for o in body["items"]}
    assert [by_index[i]["status"] for i in range(6)] == [
        "indexed",
        "rejected",
        "rejected",
        "rejected",
        "rejected",
        "indexed",
    ]
    assert by_index[0] == {"index": 0, "id": "itm_kite", "status": "indexed", "reason": None}
    assert by_index[1]["id"] == "itm_bad" and by_index[1]["reason"].startswith("title")
    assert by_index[2]["id"] is None and by_index[2]["reason"].startswith("id")
    assert by_index[3]["reason"].startswith("workspace")
    assert by_index[4]["reason"].startswith("outcome")
    assert set(ids(admin.search("ana", q="kite", limit=25))) == {"itm_kite", "itm_kite3"}
    assert ids(admin.search("bob", q="kite", limit=25)) == ["itm_kite"]  # not on brd_eng
    for rejected_id in ("itm_bad", "itm_foreign", "itm_kite2"):
        assert (
            admin.client.get(f"/api/v1/items/{rejected_id}", headers=admin.auth("ana")).status_code
            == 404
        )


def test_upsert_replaces_an_item(admin: Api) -> None:
    assert (
        upsert(admin, [raw_item("itm_rollback", "Rollback guide v2", "Rewritten")]).json()[
            "indexed"
        ]
        == 1
    )
    got = admin.client.get("/api/v1/items/itm_rollback", headers=admin.auth("ana")).json()
    assert (got["title"], got["body"]) == ("Rollback guide v2", "Rewritten")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([1, 2], "0"),
        ([raw_item(f"itm_{i}", "t") for i in range(1001)], None),
    ],
)
def test_malformed_batches_are_422_and_change_nothing(
    api: Api, body: Any, field: str | None
) -> None:
    r = api.client.post("/api/v1/items", json=body, headers=api.auth("admin"))
    assert_error_shape(r, 422, "invalid_input", field)
    assert api.searcher.backend.count() == 7


def test_a_single_object_is_a_batch_of_one(admin: Api) -> None:
    one = raw_item("itm_single", "Single deploy note", "One object, not an array.")
    r = admin.client.post(
        "/api/v1/items", params={"refresh": True}, json=one, headers=admin.auth("admin")
    )
    assert r.status_code == 200, r.text
    assert r.json()["items"] == [
        {"index": 0, "id": "itm_single", "status": "indexed", "reason": None}
    ]
    got = admin.client.get("/api/v1/items/itm_single", headers=admin.auth("ana"))
    assert got.status_code == 200 and got.json()["title"] == "Single deploy note"
    bad = admin.client.post("/api/v1/items", json={"id": "itm_x"}, headers=admin.auth("admin"))
    assert bad.status_code == 207 and bad.json()["rejected"] == 1


@pytest.mark.parametrize(
    ("batch", "status", "counts"),
    [
        ([], 200, (0, 0)),  # nothing asked, nothing failed
        ([raw_item("itm_a1", "All in one"), raw_item("itm_a2", "All in two")], 200, (2, 0)),
        ([raw_item("itm_m1", "Mixed in"), raw_item("itm_m2", "")], 207, (1, 1)),
        ([raw_item("itm_n1", ""), {"title": "no id"}], 207, (0, 2)),
    ],
)
def test_the_status_says_whether_every_item_went_in(
    admin: Api, batch: list[Any], status: int, counts: tuple[int, int]
) -> None:
    """200 only when all were indexed; 207 with the same per-item body when any was rejected,
    even all of them (a 4xx would mean the request changed nothing, which a mixed one did not)."""
    r = upsert(admin, batch)
    assert r.status_code == status, r.text
    body = r.json()
    assert (body["indexed"], body["rejected"]) == counts
    assert [o["status"] for o in body["items"]].count("rejected") == counts[1]
    assert set(body) == {"indexed", "rejected", "items", "timings_ms"}


def test_delete_removes_the_item(admin: Api) -> None:
    r = admin.client.delete("/api/v1/items/itm_rollback", headers=admin.auth("admin"))
    assert r.status_code == 200
    assert r.json()["status"] == "deleted"
    admin.searcher.backend.refresh()
    assert_error_shape(
        admin.client.get("/api/v1/items/itm_rollback", headers=admin.auth("ana")), 404, "not_found"
    )
    assert "itm_rollback" not in ids(admin.search("ana", q="rollback"))
    # Honest: a second delete finds nothing to delete.
    r = admin.client.delete("/api/v1/items/itm_rollback", headers=admin.auth("admin"))
    assert_error_shape(r, 404, "not_found")


def test_board_acl_changes_apply_to_the_next_query(admin: Api) -> None:
    assert "itm_checklist" not in ids(admin.search("bob", q="checklist"))
    r = admin.client.put(
        "/api/v1/boards/brd_eng",
        json={"name": "Eng", "groups": ["grp_eng"], "members": ["prn_bob"]},
        headers=admin.auth("admin"),
    )
    assert r.status_code == 200, r.text
    assert r.json()["workspace"] == "ws_main"
    assert "itm_checklist" in ids(admin.search("bob", q="checklist"))
    admin.client.put("/api/v1/boards/brd_eng", json={"groups": []}, headers=admin.auth("admin"))
    assert "itm_checklist" not in ids(admin.search("ana", q="checklist"))


def test_principal_groups_grant_board_access(admin: Api) -> None:
    r = admin.client.put(
        "/api/v1/principals/prn_bob", json={"groups": ["grp_eng"]}, headers=admin.auth("admin")
    )
    assert r.status_code == 200
    assert r.json() == {
        **r.json(),
        "id": "prn_bob",
        "workspace": "ws_main",
        "kind": "person",
        "groups": ["grp_eng"],
    }
    assert "itm_checklist" in ids(admin.search("bob", q="checklist"))


def test_admins_write_only_their_own_workspace(api: Api) -> None:
    h = api.auth("admin")
    r = api.client.put("/api/v1/boards/brd_x", json={"workspace": OTHER_WS}, headers=h)
    assert_error_shape(r, 403, "forbidden")
    r = api.client.put("/api/v1/principals/prn_z", json={"workspace": OTHER_WS}, headers=h)
    assert_error_shape(r, 403, "forbidden")
    r = api.client.put("/api/v1/principals/bad id!", json={}, headers=h)
    assert_error_shape(r, 422, "invalid_input", "id")
    assert api.searcher.backend.principal("prn_z") is None


def test_an_id_used_by_another_workspace_is_a_new_item_here_and_never_touches_theirs(
    admin: Api,
) -> None:
    """Ids are per workspace: no rejection that would tell the id is used elsewhere, no
    overwrite, and a delete of an id this workspace lacks is 404 exactly like an unused id."""
    backend = admin.searcher.backend
    theirs = Visibility(OTHER_WS, "prn_someone", frozenset())
    before = backend.get_many(theirs, ["itm_other"])["itm_other"]
    r = upsert(admin, [raw_item("itm_other", "Our own other", "ours")])
    assert r.json()["items"][0] == {"index": 0, "id": "itm_other", "status": "indexed",
                                    "reason": None}  # fmt: skip
    got = admin.client.get("/api/v1/items/itm_other", headers=admin.auth("ana")).json()
    assert got["title"] == "Our own other"
    assert backend.get_many(theirs, ["itm_other"])["itm_other"] == before
    h = admin.auth("admin")
    assert admin.client.delete("/api/v1/items/itm_other", headers=h).status_code == 200
    backend.refresh()
    # Now ws_main holds no itm_other: the answer equals the one for an id nobody ever used.
    elsewhere = admin.client.delete("/api/v1/items/itm_other", headers=h)
    nowhere = admin.client.delete("/api/v1/items/itm_unused", headers=h)
    assert_error_shape(elsewhere, 404, "not_found")
    assert elsewhere.json()["error"]["message"].replace("itm_other", "X") == nowhere.json()[
        "error"
    ]["message"].replace("itm_unused", "X")
    assert backend.get_many(theirs, ["itm_other"])["itm_other"] == before


def test_a_board_id_of_another_workspace_is_this_workspaces_own_board(admin: Api) -> None:
    """Board ids are per workspace: writing one never fails (no oracle), never moves or
    replaces another workspace's board, so an unclaimed id cannot be squatted either."""
    backend = admin.searcher.backend
    backend.put_acls([BoardAcl("brd_theirs", OTHER_WS, "Theirs", ("prn_eve",), ())])
    h = admin.auth("admin")
    r = admin.client.put("/api/v1/boards/brd_theirs", json={"members": ["prn_ana"]}, headers=h)
    assert r.status_code == 200, r.text
    r = admin.client.put("/api/v1/boards/brd_unclaimed", json={"members": ["prn_ana"]}, headers=h)
    assert r.status_code == 200, r.text
    assert backend.acl(OTHER_WS, "brd_theirs") == BoardAcl(
        "brd_theirs", OTHER_WS, "Theirs", ("prn_eve",)
    )
    assert backend.acl("ws_main", "brd_theirs") == BoardAcl(
        "brd_theirs", "ws_main", "", ("prn_ana",)
    )
    assert backend.acl(OTHER_WS, "brd_unclaimed") is None  # theirs to create later
    backend.put_acls([BoardAcl("brd_unclaimed", OTHER_WS, "Later", ("prn_eve",), ())])
    assert backend.acl("ws_main", "brd_unclaimed") == BoardAcl(
        "brd_unclaimed", "ws_main", "", ("prn_ana",)
    )


def test_an_admin_cannot_take_over_another_workspaces_principal(admin: Api) -> None:
    """Principal ids stay global (tokens name them): the claim is atomic and refused."""
    backend = admin.searcher.backend
    h = admin.auth("admin")
    r = admin.client.put("/api/v1/principals/prn_eve", json={"groups": ["grp_eng"]}, headers=h)
    err = assert_error_shape(r, 403, "forbidden")
    assert "principal" in err["message"]
    assert backend.principal("prn_eve") == Principal("prn_eve", OTHER_WS, "person", ())
    # Its own board and principal are still replaced as before.
    r = admin.client.put("/api/v1/principals/prn_bob", json={"groups": ["g"]}, headers=h)
    assert r.status_code == 200, r.text
    assert backend.principal("prn_bob") == Principal("prn_bob", "ws_main", "person", ("g",))
