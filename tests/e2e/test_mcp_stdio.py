"""`suli mcp --token T` as a subprocess, driven over stdio by the SDK's real client."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mcp.client.stdio import StdioServerParameters

from suli.render import response_json
from suli.search_params import search_request
from suli.service import Searcher

from .mcp_client import ids, session, text
from .world import VISIBLE, World

SULI = str(Path(sys.executable).with_name("suli"))  # the console script of this venv


def stdio(world: World, token: str) -> StdioServerParameters:
    return StdioServerParameters(command=SULI, args=["mcp", "--token", token], env=world.env())


def test_stdio_serves_both_tools_as_the_tokens_principal(core: Searcher, e2e_world: World) -> None:
    tools, (search, browse, filtered, related, bad) = session(
        stdio(e2e_world, e2e_world.tokens["bot"]),
        [
            ("library_search", {"query": "deploy"}),
            ("library_search", {"max_results": 25}),
            ("library_search", {"query": "deploy", "outcome": ["superseded"]}),
            ("library_related", {"item_id": "itm_canary", "limit": 3}),
            ("library_search", {"query": "deploy", "limit": 26}),
        ],
    )
    assert {t.name for t in tools.tools} == {"library_search", "library_related"}
    bot = core.principal("prn_bot")
    expected = response_json(core.search(bot, search_request("deploy")))["results"]
    assert ids(search) == [r["id"] for r in expected]
    assert set(ids(browse)) == VISIBLE["bot"]
    assert set(ids(filtered)) == {"itm_old", "itm_legacy"}
    assert ids(related)[0] == "itm_rollback" and "itm_canary" not in ids(related)
    assert len(ids(related)) == 3
    assert bad.is_error and text(bad).startswith("Invalid argument `limit`")


def test_stdio_refuses_to_start_with_a_bad_token(e2e_world: World) -> None:
    done = subprocess.run(
        [SULI, "mcp", "--token", "suli_not-a-token"],
        env={**e2e_world.env(), "PATH": str(Path(sys.executable).parent)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "unknown or revoked token" in done.stderr
    assert done.stdout == ""  # stdout belongs to the MCP protocol: nothing else is printed there
