"""One query for one principal: the core, `suli search --json`, HTTP, MCP and the web page agree."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
from click.testing import CliRunner

from cli.main import cli
from suli.render import facets_json, response_json
from suli.search_params import search_request
from suli.service import Searcher

from .conftest import Service
from .mcp_client import call, ids, in_memory, over_http

QUERY = "deploy rollback"
WHO = "ana"
_RESULT = re.compile(r'<li class="result" data-item-id="([^"]+)"')


def web_ids(service: Service, token: str, query: str) -> list[str]:
    """Sign in through the form, search through the page, read the result ids in page order."""
    with httpx.Client(base_url=service.url) as browser:
        signed_in = browser.post("/signin", data={"token": token, "next": "/"})
        assert signed_in.status_code == 303
        page = browser.get("/", params={"q": query})
        assert page.status_code == 200
        return _RESULT.findall(page.text)


def test_one_query_returns_the_same_ordered_ids_on_every_edge(
    core: Searcher, service: Service
) -> None:
    world = service.world
    token = world.tokens[WHO]

    resp = core.search(core.principal(f"prn_{WHO}"), search_request(QUERY))
    expected = [r["id"] for r in response_json(resp)["results"]]
    assert len(expected) >= 4  # a real ranking, not a trivial one

    run = CliRunner().invoke(
        cli, ["search", "--json", "--as", f"prn_{WHO}", QUERY], env=world.env()
    )
    assert run.exit_code == 0, run.output
    from_cli = [r["id"] for r in json.loads(run.output)["results"]]

    api = httpx.get(
        f"{service.url}/api/v1/search",
        params={"q": QUERY},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert api.status_code == 200, api.text
    from_http = [r["id"] for r in api.json()["results"]]

    from_mcp = ids(call(in_memory(core, token), "library_search", query=QUERY))
    from_mcp_http = ids(call(over_http(f"{service.url}/mcp", token), "library_search", query=QUERY))
    from_web = web_ids(service, token, QUERY)

    assert from_cli == expected
    assert from_http == expected
    assert from_mcp == expected
    assert from_mcp_http == expected
    assert from_web == expected


_COUNT = re.compile(
    r'name="(\w+)" value="([^"]+)"[^>]*>\s*<span class="option-label">[^<]*</span>\s*'
    r'<span class="option-count">(\d+)<'
)


def web_page(service: Service, token: str, params: dict[str, str]) -> str:
    with httpx.Client(base_url=service.url) as browser:
        assert browser.post("/signin", data={"token": token, "next": "/"}).status_code == 303
        page = browser.get("/", params=params)
        assert page.status_code == 200
        return page.text


def counts(facets: dict[str, Any]) -> dict[str, dict[str, int]]:
    return {k: {v["value"]: v["count"] for v in vs} for k, vs in facets["facets"].items() if vs}


def test_page_two_and_facets_are_the_same_on_every_edge(core: Searcher, service: Service) -> None:
    """Cursors made by one edge page the same list on every other; facets follow the query."""
    world = service.world
    token = world.tokens[WHO]
    principal = core.principal(f"prn_{WHO}")
    first = core.search(principal, search_request(QUERY, limit=2))
    assert first.has_more and first.next
    second = core.search(principal, search_request(QUERY, limit=2, cursor=first.next))
    expected = [r.id for r in second.results]
    assert expected and not set(expected) & {r.id for r in first.results}
    want_facets = counts(facets_json(core.facets(principal, req=search_request(QUERY))))

    run = CliRunner().invoke(
        cli,
        ["search", "--json", "--as", f"prn_{WHO}", "--limit", "2", "--page", "2", QUERY],
        env=world.env(),
    )
    assert run.exit_code == 0, run.output
    assert [r["id"] for r in json.loads(run.output)["results"]] == expected
    run = CliRunner().invoke(
        cli, ["facets", "--json", "--as", f"prn_{WHO}", QUERY], env=world.env()
    )
    assert run.exit_code == 0, run.output
    assert counts(json.loads(run.output)) == want_facets

    auth = {"Authorization": f"Bearer {token}"}
    api = f"{service.url}/api/v1"
    page1 = httpx.get(f"{api}/search", params={"q": QUERY, "limit": 2}, headers=auth).json()
    assert page1["next"]
    got = httpx.get(
        f"{api}/search", params={"q": QUERY, "limit": 2, "cursor": page1["next"]}, headers=auth
    ).json()
    assert [r["id"] for r in got["results"]] == expected
    got = httpx.post(
        f"{api}/search", json={"q": QUERY, "limit": 2, "cursor": first.next}, headers=auth
    ).json()
    assert [r["id"] for r in got["results"]] == expected
    facets = httpx.get(f"{api}/facets", params={"q": QUERY}, headers=auth).json()
    assert counts(facets) == want_facets

    mcp1 = call(in_memory(core, token), "library_search", query=QUERY, limit=2, facets=True)
    assert mcp1.structured_content is not None
    assert counts(mcp1.structured_content["facets"]) == want_facets
    nxt = mcp1.structured_content["next"]
    target = over_http(f"{service.url}/mcp", token)
    assert ids(call(target, "library_search", query=QUERY, limit=2, cursor=nxt)) == expected

    html = web_page(service, token, {"q": QUERY, "limit": "2", "cursor": first.next})
    assert _RESULT.findall(html) == expected
    on_page: dict[str, dict[str, int]] = {}
    for name, value, n in _COUNT.findall(html):
        on_page.setdefault(name, {})[value] = int(n)
    assert on_page == want_facets
