"""On the real node: an HTTP search reads its bearer token in the request of both legs, and
every change to who may see what (revoke, ACL, principal, a hand edit) applies to the very next
request; an unknown token gets the same 401 whatever it asks, after one request and no page.

A token the service has not seen valid yet is looked up on its own first (app.tokens.search_for:
an unknown token then costs no search work), so each test warms its tokens with one search."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contract.helpers import counting
from opensearchpy import OpenSearch

from suli.auth import hash_token, revoke_token
from suli.backends.opensearch import OpenSearchBackend
from suli.models import Principal

from .helpers import ACLS, WS, Api, World

SEARCH = ["POST _msearch", "POST _mget"]  # session and legs, then the page by id
# A token whose boards the service knew from its last search, changed since: the legs went out
# with the known boards inline, the token's check in the same request found others, and the
# legs were asked again with those.
AGAIN = ["POST _msearch", *SEARCH]
UNKNOWN = "suli_" + "x" * 43


def _backend(api: Api) -> OpenSearchBackend:
    backend = api.searcher.backend
    assert isinstance(backend, OpenSearchBackend)
    return backend


def _ids(api: Api, who: str, q: str = "deploy") -> tuple[set[str], list[str]]:
    with counting(_backend(api).client) as sent:
        got = api.search(who, q=q, limit=25)
    return {r["id"] for r in got["results"]}, sent


def _warm(api: Api, *who: str) -> None:
    """One search per token, so the service knows it valid (the one-request path after)."""
    for name in who:
        api.search(name, q="deploy")


def _as(api: Api, token: str, **params: Any) -> Any:
    return api.client.get(
        "/api/v1/search", params=params, headers={"Authorization": f"Bearer {token}"}
    )


def test_a_revoked_token_gets_401_on_the_very_next_request(
    make_api: Callable[..., Api], fresh_world: World, os_client: OpenSearch
) -> None:
    api = make_api(on=fresh_world)
    _warm(api, "bob", "ana")
    ids, sent = _ids(api, "bob")
    assert "itm_secret" in ids and sent == SEARCH
    backend = _backend(api)
    revoke_token(backend, api.tokens["bob"])
    with counting(backend.client) as sent:
        r = _as(api, api.tokens["bob"], q="payroll")
    assert r.status_code == 401
    assert sent == ["POST _msearch"]  # no page: nothing of the legs' answer was read
    # A later visibility rewrite (an ACL change) never makes the revoked token again.
    backend.put_acls([ACLS[1]])
    doc = f"token:{hash_token(api.tokens['bob'])}"
    assert not os_client.exists(index=backend.acl_index, id=doc)
    assert _as(api, api.tokens["bob"], q="payroll").status_code == 401
    assert _ids(api, "ana")[1] == SEARCH  # other tokens untouched


def test_acl_and_principal_changes_apply_to_the_next_http_search(
    make_api: Callable[..., Api], fresh_world: World
) -> None:
    api = make_api(on=fresh_world)
    backend = _backend(api)
    _warm(api, "ana", "bob")
    assert "itm_checklist" in _ids(api, "ana")[0]  # brd_eng through grp_eng
    assert "itm_checklist" not in _ids(api, "bob")[0]
    backend.put_acls([ACLS[0].__class__("brd_eng", WS, "Engineering", ("prn_bob",), ())])
    ids, sent = _ids(api, "bob")  # granted by name
    assert "itm_checklist" in ids and sent == AGAIN
    ids, sent = _ids(api, "ana")  # grp_eng no longer listed
    assert "itm_checklist" not in ids and sent == AGAIN
    assert _ids(api, "ana")[1] == SEARCH  # known again, unchanged: one request for the legs
    backend.put_acls([ACLS[0]])
    backend.put_principals([Principal("prn_ana", WS, "person", ())])  # out of grp_eng
    ids, sent = _ids(api, "ana")
    # Two writes, and the same boards as the known ones (brd_eng not among them): one request.
    assert "itm_checklist" not in ids and sent == SEARCH
    assert backend.claim_principal(Principal("prn_ana", WS, "person", ("grp_eng",)))
    ids, sent = _ids(api, "ana")
    assert "itm_checklist" in ids and sent == AGAIN
    # Moved to another workspace: the next search is of that workspace's items only.
    backend.put_principals([Principal("prn_ana", "ws_other", "person", ())])
    ids, _ = _ids(api, "ana")
    assert ids == {"itm_other"}


def test_a_change_behind_the_tokens_back_applies_at_once(
    make_api: Callable[..., Api], fresh_world: World, os_client: OpenSearch
) -> None:
    """An ACL written without its visibility documents (an older Suli, a hand edit): the
    token's copy no longer matches the state, so the search reads the ACLs instead."""
    api = make_api(on=fresh_world)
    backend = _backend(api)
    acl = {"doc_type": "acl", "board": "brd_secret", "workspace": WS, "name": "Secret"}
    os_client.index(
        index=backend.acl_index,
        id=f"acl:{WS}/brd_secret",
        body={**acl, "members": [], "groups": []},
        refresh=True,
    )
    ids, sent = _ids(api, "bob")
    assert "itm_secret" not in ids and "itm_bobnotes" in ids
    assert len(sent) > len(SEARCH)  # the ACLs read and the legs asked again
    # A token document of an older Suli (no copy at all) is not trusted either ...
    doc = f"token:{hash_token(api.tokens['ana'])}"
    held = os_client.get(index=backend.acl_index, id=doc)["_source"]
    bare = {k: held[k] for k in ("doc_type", "principal_id", "workspace", "admin", "created_at")}
    os_client.index(index=backend.acl_index, id=doc, body=bare, refresh=True)
    ids, sent = _ids(api, "ana")
    assert "itm_checklist" in ids and len(sent) > len(SEARCH)
    backend.ensure_ready()  # ... and start-up gives it one
    ids, sent = _ids(api, "ana")
    assert "itm_checklist" in ids and sent == SEARCH
    assert _ids(api, "bob") == (ids - {"itm_checklist"} | {"itm_bobnotes"}, SEARCH)


def test_a_tokens_principal_gone_gets_401(
    make_api: Callable[..., Api], fresh_world: World, os_client: OpenSearch
) -> None:
    api = make_api(on=fresh_world)
    backend = _backend(api)
    os_client.delete(index=backend.acl_index, id="principal:prn_bob", refresh=True)
    r = _as(api, api.tokens["bob"], q="payroll")
    assert r.status_code == 401
    assert "no longer exists" in r.json()["error"]["message"]


def test_an_unknown_token_gets_the_same_401_whatever_it_asks(api: Api) -> None:
    backend = _backend(api)
    answers = []
    for params in ({"q": "payroll"}, {"q": "zzzz nothing"}, {"q": "deploy", "mode": "vector"}):
        with counting(backend.client) as sent:
            r = _as(api, UNKNOWN, **params)
        assert r.status_code == 401
        assert sent == ["POST _msearch"]  # the one request; no page, no count
        answers.append((r.json(), sorted(r.headers.items())))
    bodies = {str(a[0]) for a in answers}
    assert len(bodies) == 1
    assert "unknown or revoked token" in next(iter(bodies))
    assert _as(api, "", q="payroll").status_code == 401  # no token: no request at all


def test_paths_that_read_the_session_first_are_unchanged(api: Api) -> None:
    """Browse and a cursor's page read the token first (the cursor is checked against its
    principal before any search work): the same results as before, one request more."""
    _warm(api, "bob")
    with counting(_backend(api).client) as sent:
        first = api.search("bob", q="deploy", limit=2)
    assert sent == SEARCH and first["next"]
    with counting(_backend(api).client) as sent:
        nxt = api.search("bob", q="deploy", limit=2, cursor=first["next"])
    assert sent[0] == "POST _msearch" and len(sent) == 3
    assert not {r["id"] for r in nxt["results"]} & {r["id"] for r in first["results"]}
    r = _as(api, api.tokens["ana"], q="deploy", limit=2, cursor=first["next"])
    assert r.status_code == 422  # bob's cursor is not ana's
