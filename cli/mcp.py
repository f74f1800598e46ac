"""`suli mcp --token T`: the MCP tools on stdin/stdout for the token's principal."""

from __future__ import annotations

import click

from cli.context import searcher
from cli.output import handle_errors
from suli.auth import authenticate


@click.command("mcp", short_help="Serve the MCP tools over stdio (for agents).")
@click.option(
    "--token",
    envvar="SULI_TOKEN",
    required=True,
    help="API token; its principal is who the tools search as. Env: SULI_TOKEN.",
)
@click.pass_context
@handle_errors
def mcp_cmd(ctx: click.Context, token: str) -> None:
    """Serve library_search and library_related over MCP stdio (for an agent's MCP client)."""
    from app.mcp_server import run_stdio

    s = searcher(ctx)  # a bad setting ends here: one line, exit 2 (cli.main.SuliGroup)
    # Fail at start with a clear message (exit 1) rather than on the agent's first call.
    principal, _ = authenticate(s.backend, token)
    click.echo(f"suli mcp: serving as {principal.id} ({principal.kind}) on stdio", err=True)
    run_stdio(s, token)
