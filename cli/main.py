"""`suli`: one Click group; each sub-command parses input, calls the core and formats output."""

from __future__ import annotations

import sys
from typing import Any

import click

from cli.admin import acl, delete, index_cmd, principal, token
from cli.cluster import cluster
from cli.data import export, schema
from cli.demo import demo
from cli.evaluate import evaluate
from cli.mcp import mcp_cmd
from cli.ops import indices, reindex, status
from cli.search import facets, related, search, show
from cli.serve import serve
from suli.settings import is_settings_error, settings_error_line


class SuliGroup(click.Group):
    """The CLI's edge: a bad SULI_* setting, wherever a command reads Settings, is one line
    naming the variable and its fix, exit 2, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ValueError as e:  # pydantic's ValidationError and SettingsError are ValueErrors
            if not is_settings_error(e):
                raise
            click.echo(f"Error: {settings_error_line(e)}", err=True)  # type: ignore[arg-type]
            sys.exit(2)


@click.group(cls=SuliGroup)
@click.version_option(package_name="suli")
@click.option("--backend", type=click.Choice(["embedded", "opensearch"]), help="Env: SULI_BACKEND.")
@click.option("--opensearch-url", help="Comma-separated node URLs. Env: SULI_OPENSEARCH_URL.")
@click.option(
    "--db",
    "embedded_path",
    type=click.Path(dir_okay=False),
    help="Embedded store file. Env: SULI_EMBEDDED_PATH.",
)
@click.pass_context
def cli(
    ctx: click.Context, backend: str | None, opensearch_url: str | None, embedded_path: str | None
) -> None:
    """Suli: permission-aware hybrid search for work items."""
    ctx.ensure_object(dict)["overrides"] = {
        "backend": backend,
        "opensearch_url": opensearch_url,
        "embedded_path": embedded_path,
    }


for command in (
    search,
    show,
    related,
    facets,
    index_cmd,
    delete,
    acl,
    principal,
    token,
    cluster,
    evaluate,
    serve,
    demo,
    mcp_cmd,
    reindex,
    status,
    indices,
    schema,
    export,
):
    cli.add_command(command)
