"""One query for one principal: the core, `suli search --json`, HTTP, MCP and the web page agree."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from click.testing import CliRunner

from cli.main import cli
from suli.render import response_json
from suli.service import Searcher
from suli.validate import search_request

from .conftest import Service
from .mcp_client import call, ids, in_memory, over_http

pytestmark = pytest.mark.e2e

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
