"""The leak property over the edges: HTTP and MCP under uvicorn, token -> principal -> ACL.

The same random worlds and oracle as tests/contract/rules_property.py, fewer examples (each
costs a token per principal and some twenty requests). Principals and tokens are stored, so
every request finds its principal and the ACLs from its bearer token, as in production.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import date
from typing import Any
from uuid import uuid4

import httpx
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from api.helpers import drop, opener, settings_for
from contract import rules_property as rp
from contract.helpers import World
from hypothesis import given
from mcp import Client

from app.main import create_app
from suli.auth import create_token
from suli.embedding import FakeEmbedder
from suli.errors import NotFound
from suli.models import Principal
from suli.service import Card

from .conftest import running
from .mcp_client import over_http

EXAMPLES = {"embedded": 12, "opensearch": 5}


def _wire(params: dict[str, Any]) -> dict[str, Any]:
    """Request parameters as a client sends them (dates as strings, `hidden` by its API name)."""
    out = {k: v.isoformat() if isinstance(v, date) else v for k, v in params.items()}
    if "include_hidden" in out:
        out["hidden"] = out.pop("include_hidden")
    return out


@dataclass
class HttpProbe:
    """The HTTP API with one principal's bearer token; GET and POST search take turns."""

    client: httpx.Client
    token: str
    post: bool

    def _h(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def _ok(self, r: httpx.Response) -> dict[str, Any]:
        if r.status_code == 404:
            assert r.json()["error"]["code"] == "not_found", r.text
            raise NotFound(r.text)
        assert r.status_code == 200, r.text
        return r.json()

    def search(self, query: str, mode: str, params: dict[str, Any]) -> dict[str, Any]:
        p = {**_wire(params), "q": query, "mode": "hybrid" if mode == "browse" else mode}
        p["explain"] = True
        if self.post:
            return self._ok(self.client.post("/api/v1/search", json=p, headers=self._h()))
        return self._ok(self.client.get("/api/v1/search", params=p, headers=self._h()))

    def facets(self, params: dict[str, Any]) -> dict[str, Any] | None:
        return self._ok(self.client.get("/api/v1/facets", params=_wire(params), headers=self._h()))

    def get(self, item_id: str) -> dict[str, Any] | None:
        return self._ok(self.client.get(f"/api/v1/items/{item_id}", headers=self._h()))

    def related(self, item_id: str | None = None, card: Card | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"limit": 25, "explain": True}
        if card is None:
            body["item_id"] = item_id
        else:
            body.update(title=card.title, spec=card.spec, references=list(card.references))
        return self._ok(self.client.post("/api/v1/related", json=body, headers=self._h()))


@dataclass
class McpProbe:
    """The MCP tools over streamable HTTP at /mcp (no facets, no get: the tools have none).
    One client session per principal, held open by a blocking portal (a session costs more
    than the calls)."""

    portal: BlockingPortal
    client: Client

    def _ok(self, name: str, **args: Any) -> dict[str, Any]:
        res = self.portal.call(self.client.call_tool, name, args)
        assert res.structured_content is not None
        if res.is_error:
            assert res.structured_content["error"]["code"] == "not_found", res.content
            raise NotFound(str(res.content))
        return res.structured_content

    def search(self, query: str, mode: str, params: dict[str, Any]) -> dict[str, Any]:
        assert mode in ("browse", "hybrid") and not params.get("include_hidden")
        args = _wire({k: v for k, v in params.items() if k != "include_hidden"})
        return self._ok("library_search", query=query, **args)

    def facets(self, params: dict[str, Any]) -> dict[str, Any] | None:
        return None

    def get(self, item_id: str) -> dict[str, Any] | None:
        return None

    def related(self, item_id: str | None = None, card: Card | None = None) -> dict[str, Any]:
        if card is None:
            return self._ok("library_related", item_id=item_id, limit=25)
        return self._ok(
            "library_related",
            title=card.title,
            spec=card.spec,
            references=list(card.references),
            limit=25,
        )


@pytest.fixture(scope="module", params=["embedded", "opensearch"])
def edge(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[World, str]]:
    """A fresh store, loaded in-process, served by the whole app under uvicorn. A vector-mode
    search keeps every meaning match (margin 2, no floor), so its visible set is checked whole."""
    wide = {"meaning_margin": 2.0, "meaning_floor": -1.0}
    home = tmp_path_factory.mktemp("edges")
    os_client = request.getfixturevalue("os_client") if request.param == "opensearch" else None
    name = f"test-{uuid4().hex}"
    if request.param == "opensearch":
        url = request.getfixturevalue("opensearch_url")
        settings = settings_for(url, name, home, **wide)
    else:
        settings = settings_for("http://unused", name, home, backend="embedded", **wide)
    searcher = opener()(settings)
    world = World(searcher.backend, searcher.embedder, settings, searcher.backend.refresh)
    try:
        with running(create_app(settings, opener=opener())) as url:
            yield world, url
    finally:
        searcher.backend.close()
        if os_client is not None:
            drop(os_client, name)


def test_no_leaks_through_http_and_mcp(edge: tuple[World, str]) -> None:
    world, url = edge
    backend = world.settings.backend
    n = max(1, round(EXAMPLES[str(backend)] * rp.SCALE))
    ran: list[str] = []
    assert isinstance(world.embedder, FakeEmbedder)  # the service embeds queries the same way

    with httpx.Client(base_url=url, timeout=60) as client, start_blocking_portal() as portal:

        @rp.property_settings(n)
        @given(sc=rp.scenarios())
        def prop(sc: rp.Scenario) -> None:
            world.backend.put_principals(sc.principals)
            rp.load(world, sc)
            tokens = {p.id: create_token(world.backend, p.id) for p in sc.principals}
            world.refresh()

            def http(p: Principal) -> HttpProbe:
                return HttpProbe(client, tokens[p.id], post=len(ran) % 2 == 1)

            rp.check_scenario(http, sc)
            # MCP: the drawn request without the options its tools do not take
            plain = replace(
                sc,
                mode="browse" if sc.mode == "browse" else "hybrid",
                params={**sc.params, "include_hidden": False},
            )
            session = Client(over_http(f"{url}/mcp", tokens[sc.who.id]))
            with portal.wrap_async_context_manager(session) as mcp_client:
                mcp = McpProbe(portal, mcp_client)
                rp.check_scenario(lambda p: mcp, plain, census=False)
            ran.append(sc.mode)

        prop()
    assert len(ran) == n
