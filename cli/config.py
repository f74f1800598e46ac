"""`suli config`: every SULI_* setting with its type, default and current value (secrets masked)."""

from __future__ import annotations

import click

from cli.context import settings as get_settings
from cli.output import emit_json, handle_errors, json_option
from suli.config_ref import OTHER_VARIABLES, current_values, unknown_lines, variables


@click.command("config", short_help="Every SULI_* setting: type, default, value.")
@json_option
@click.pass_context
@handle_errors
def config_cmd(ctx: click.Context, as_json: bool) -> None:
    """List every SULI_* setting: type, default and the value in force (secrets masked)."""
    current = current_values(get_settings(ctx))
    rows = [
        {"name": v.name, "type": v.type, "default": v.default, "current": current[v.name]}
        for v in variables()
    ]
    unknown = unknown_lines()
    if as_json:
        emit_json({"settings": rows, "other": OTHER_VARIABLES, "warnings": unknown})
        return
    width = max(len(r["name"]) for r in rows)
    for row in rows:
        default = f" (default {row['default']})" if row["default"] else ""
        click.echo(f"{row['name']:<{width}}  {row['current'] or '-'}    [{row['type']}]{default}")
    click.echo("\nAlso read (CLI options and devcluster):")
    for name, what in OTHER_VARIABLES.items():
        click.echo(f"  {name}: {what}")
    for line in unknown:
        click.echo(line, err=True)
