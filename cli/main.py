"""`suli`: one Click group; each sub-command parses input, calls the core and formats output.

Sub-commands are imported when they are called, not when `suli` starts: the whole stack
(FastAPI, MCP, uvicorn, onnxruntime, opensearch-py) takes over a CPU-second to import, and
`suli --version` or `suli search` on the embedded store need none of most of it.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os
import sys
from typing import Any

import click

from suli import __version__

# At exit, the interpreter's last garbage collections walk every object the imports made
# (pydantic's schemas, numpy, the backend): a tenth of a second of a `suli search` that takes
# half a second. Frozen objects are skipped; files and connections are closed by their owners
# before this runs (with-blocks), so nothing is lost by not collecting them.
atexit.register(gc.freeze)

# name -> "module:attribute", in the order `suli --help` lists them.
COMMANDS = {
    "search": "cli.search:search",
    "show": "cli.search:show",
    "related": "cli.search:related",
    "facets": "cli.search:facets",
    "index": "cli.admin:index_cmd",
    "delete": "cli.admin:delete",
    "acl": "cli.admin:acl",
    "principal": "cli.admin:principal",
    "token": "cli.admin:token",
    "access": "cli.access:access",
    "cluster": "cli.cluster:cluster",
    "security": "cli.security:security",
    "eval": "cli.evaluate:evaluate",
    "serve": "cli.serve:serve",
    "demo": "cli.demo:demo",
    "mcp": "cli.mcp:mcp_cmd",
    "reindex": "cli.ops:reindex",
    "status": "cli.ops:status",
    "indices": "cli.ops:indices",
    "schema": "cli.data:schema",
    "export": "cli.data:export",
    "config": "cli.config:config_cmd",
}


def load_command(name: str) -> click.Command:
    """Import one sub-command by its name in COMMANDS."""
    module, attr = COMMANDS[name].split(":")
    command = getattr(importlib.import_module(module), attr)
    if not isinstance(command, click.Command):
        raise TypeError(f"{COMMANDS[name]} is not a click command")
    return command


def _warn_unknown_settings(ctx: click.Context) -> None:
    """A mistyped SULI_* variable is named on stderr (with the closest setting), not ignored."""
    if ctx.invoked_subcommand == "config" or not any(k.startswith("SULI_") for k in os.environ):
        return  # `suli config` reports them itself
    from suli.config_ref import unknown_lines

    for line in unknown_lines():
        click.echo(line, err=True)


class SuliGroup(click.Group):
    """The CLI's edge: sub-commands load on first use, and a bad SULI_* setting, wherever a
    command reads Settings, is one line naming the variable and its fix, exit 2, never a
    traceback."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return load_command(cmd_name) if cmd_name in COMMANDS else None

    def invoke(self, ctx: click.Context) -> Any:
        _warn_unknown_settings(ctx)
        try:
            return super().invoke(ctx)
        except ValueError as e:  # pydantic's ValidationError and SettingsError are ValueErrors
            from suli.settings import is_settings_error, settings_error_line

            if not is_settings_error(e):
                raise
            click.echo(f"Error: {settings_error_line(e)}", err=True)  # type: ignore[arg-type]
            sys.exit(2)


@click.group(cls=SuliGroup)
@click.version_option(version=__version__)
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
