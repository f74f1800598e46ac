"""The MCP server says which Suli it is (the SDK's default version is an empty string)."""

from __future__ import annotations

import anyio
from contract.helpers import memory_world
from mcp import Client

from app.mcp_server import TokenAccess, build_server
from suli import __version__


def test_the_server_reports_suli_s_version() -> None:
    server = build_server(TokenAccess(memory_world().searcher, "suli_not-checked-until-a-call"))

    async def info() -> tuple[str, str]:
        async with Client(server) as client:
            return client.server_info.name, client.server_info.version

    assert anyio.run(info) == ("suli", __version__)
    assert __version__  # not the empty string the SDK defaults to
