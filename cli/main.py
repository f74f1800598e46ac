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


# The group's own options: valid only before the command name.
GLOBAL_OPTIONS = ("--backend", "--opensearch-url", "--db", "--index-alias", "--acl-index")


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
        except click.NoSuchOption as e:
            if e.option_name not in GLOBAL_OPTIONS:
                raise
            # Click would suggest the command's look-alikes (--db: "--kind, --mode?").
            raise click.UsageError(
                f"{e.option_name} is a global option: give it before the command, e.g. "
                f"`suli {e.option_name} VALUE {ctx.invoked_subcommand or 'COMMAND'} ...`",
                e.ctx,
            ) from None
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
@click.option(
    "--index-alias",
    help="The items' alias on OpenSearch (default suli-items). Env: SULI_INDEX_ALIAS.",
)
@click.option(
    "--acl-index",
    help="The ACL index on OpenSearch (default suli-acl). Env: SULI_ACL_INDEX.",
)
@click.pass_context
def cli(
    ctx: click.Context,
    backend: str | None,
    opensearch_url: str | None,
    embedded_path: str | None,
    index_alias: str | None,
    acl_index: str | None,
) -> None:
    """Suli: permission-aware hybrid search for work items."""
    _refuse_conflicts(backend, opensearch_url, embedded_path, index_alias, acl_index)
    ctx.ensure_object(dict)["overrides"] = {
        "backend": backend,
        "opensearch_url": opensearch_url,
        "embedded_path": embedded_path,
        "index_alias": index_alias,
        "acl_index": acl_index,
    }


def _refuse_conflicts(
    backend: str | None,
    opensearch_url: str | None,
    embedded_path: str | None,
    index_alias: str | None,
    acl_index: str | None,
) -> None:
    """An option of the backend not in use is a usage error, never ignored: `--db` once
    SULI_OPENSEARCH_URL picks OpenSearch searched OpenSearch without a word (docs/decisions.md)."""
    chosen = backend or os.environ.get("SULI_BACKEND") or None
    if chosen is None:
        url_set = opensearch_url or os.environ.get("SULI_OPENSEARCH_URL")
        chosen = "opensearch" if url_set else "embedded"
    if chosen == "opensearch" and embedded_path:
        why = "--backend opensearch" if backend else (
            "SULI_BACKEND=opensearch" if os.environ.get("SULI_BACKEND") else
            "SULI_OPENSEARCH_URL is set, which picks OpenSearch"
        )  # fmt: skip
        raise click.UsageError(
            f"--db is the embedded store's file, but {why}: add --backend embedded to read "
            "the file, or leave --db out"
        )
    if chosen == "embedded" and (index_alias or acl_index):
        raise click.UsageError(
            f"{'--index-alias' if index_alias else '--acl-index'} names an OpenSearch index, "
            "but the embedded store is in use: add --backend opensearch (and --opensearch-url)"
        )
