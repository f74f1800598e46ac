"""Small wrappers around the MCP SDK's real client for synchronous tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult, ListToolsResult

from app.mcp_server import TokenAccess, build_server
from suli.service import Searcher

Call = tuple[str, dict[str, Any]]


def in_memory(core: Searcher, token: str) -> MCPServer:
    """The server `suli mcp --token` runs, for the SDK's in-memory client."""
    return build_server(TokenAccess(core, token))


def over_http(url: str, token: str | None) -> Any:
    """A streamable-HTTP transport to the service's /mcp with a bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))


def session(
    target: MCPServer | StdioServerParameters | Any, calls: Sequence[Call]
) -> tuple[ListToolsResult, list[CallToolResult]]:
    """Connect once, list the tools, make the calls in order, disconnect."""

    async def go() -> tuple[ListToolsResult, list[CallToolResult]]:
        raise_exceptions = isinstance(target, MCPServer)  # only meaningful in-process
        async with Client(target, raise_exceptions=raise_exceptions) as client:
            tools = await client.list_tools()
            return tools, [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(go)


def call(target: MCPServer | StdioServerParameters | Any, name: str, **args: Any) -> CallToolResult:
    return session(target, [(name, args)])[1][0]


def ids(result: CallToolResult) -> list[str]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return [r["id"] for r in result.structured_content["results"]]


def text(result: CallToolResult) -> str:
    [block] = result.content
    assert block.type == "text"
    return block.text
