"""Issue 11.4 over HTTP on the real node: requests reaching OpenSearch per call, and an ACL
change through the admin route applying to the very next read."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from suli.backends.opensearch import OpenSearchBackend

from .helpers import Api, World


@contextmanager
def counting(api: Api) -> Iterator[list[str]]:
    """The endpoints of the requests the service's read client sends while inside."""
    backend = api.searcher.backend
    assert isinstance(backend, OpenSearchBackend)
    sent: list[str] = []
    conns = list(backend.client.transport.connection_pool.connections)
    for conn in conns:
        real = conn.perform_request

        def counted(method: str, url: str, *a: Any, _real: Any = real, **kw: Any) -> Any:
            sent.append(url.split("?")[0].rsplit("/", 1)[-1])
            return _real(method, url, *a, **kw)

        conn.perform_request = counted  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        for conn in conns:
            del conn.perform_request


def test_http_search_is_two_round_trips_and_get_drops_its_acl_read(
    make_api: Callable[..., Api], fresh_world: World
) -> None:
    api = make_api(on=fresh_world)
    api.search("bob", q="payroll")  # warm: the service is built
    with counting(api) as sent:
        got = api.search("bob", q="payroll")
    assert "itm_secret" in {r["id"] for r in got["results"]}
    assert sent == ["_msearch", "_msearch"]  # the token's session, then both legs
    with counting(api) as sent:
        r = api.client.get("/api/v1/items/itm_secret", headers=api.auth("bob"))
    assert r.status_code == 200
    assert sent == ["_msearch", "_msearch"]  # was 3: the session, the ACLs, the item

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
