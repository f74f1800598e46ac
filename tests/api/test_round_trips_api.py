"""Over HTTP on the real node: requests reaching OpenSearch per call, and an ACL change through
the admin route applying to the very next read."""

from __future__ import annotations

from collections.abc import Callable

from contract.helpers import counting
from opensearchpy import OpenSearch

from suli.backends.opensearch import OpenSearchBackend
from suli.search_params import search_request

from .helpers import Api, World


def _client(api: Api) -> OpenSearch:
    """The service's read client (the one searches go through)."""
    backend = api.searcher.backend
    assert isinstance(backend, OpenSearchBackend)
    return backend.client


def test_http_search_costs_what_a_core_search_costs_and_get_two(
    make_api: Callable[..., Api], fresh_world: World
) -> None:
    api = make_api(on=fresh_world)
    api.search("bob", q="payroll")  # warm: the service is built
    with counting(_client(api)) as sent:
        got = api.search("bob", q="payroll")
    assert "itm_secret" in {r["id"] for r in got["results"]}
    # The token's session with both legs (its document holds the boards the legs look up),
    # then the page read by id with the caller's visibility document (items and replacements,
    # checked in the core); `total` needs no count.
    assert sent == ["POST _msearch", "POST _mget"]
    bob = api.searcher.backend.principal("prn_bob")
    assert bob is not None
    with counting(_client(api)) as core:
        resp = api.searcher.search(bob, search_request("payroll"))
    assert core == sent  # the CLI's and MCP's search: the same requests
    assert [r.id for r in resp.results] == [r["id"] for r in got["results"]]
    with counting(_client(api)) as sent:
        browsed = api.search("bob", q="", limit=5)
    assert any(r["superseded"] for r in browsed["results"])
    # The session (the token and its principal), the page with the check of the caller's
    # visibility document riding along, then the check of the replacements its superseded
    # items name (known only from the page itself).
    assert sent == ["POST _msearch", "POST _msearch", "POST _msearch"]
    with counting(_client(api)) as sent:
        r = api.client.get("/api/v1/items/itm_secret", headers=api.auth("bob"))
    assert r.status_code == 200
    assert sent == ["POST _msearch", "POST _msearch"]  # the session, then the item

    # An admin takes bob off the board: his very next read no longer finds the item.
    r = api.client.put(
        "/api/v1/boards/brd_secret",
        json={"name": "Secret", "members": [], "groups": []},
        headers=api.auth("admin"),
    )
    assert r.status_code == 200, r.text
    r = api.client.get("/api/v1/items/itm_secret", headers=api.auth("bob"))
    assert r.status_code == 404
    assert "itm_secret" not in {r["id"] for r in api.search("bob", q="payroll")["results"]}
