"""Data in and out: `suli schema item|principal|board` (the input formats) and `suli export`
(items as JSONL)."""

from __future__ import annotations

import json
import sys
from contextlib import nullcontext

import click

from cli.context import searcher, settings, store_name
from cli.output import emit_json, handle_errors
from suli.backends.base import as_store
from suli.files import open_private
from suli.render import item_input_json
from suli.validate import lookup_id


@click.group()
def schema() -> None:
    """JSON Schemas of Suli's input formats: item, principal, board."""


@schema.command("item", short_help="One `suli index` line (docs/items.md).")
@click.pass_context
def schema_item(ctx: click.Context) -> None:
    """One `suli index` line, generated from the validator (docs/items.md); `vector` and
    `vector_model` follow the configured model (SULI_EMBEDDER)."""
    from cli.schemas import expected_model, item_schema

    emit_json(item_schema(*expected_model(settings(ctx))))


@schema.command("principal", short_help="One entry of `suli principal load`.")
def schema_principal() -> None:
    """One principal of `suli principal load` (docs/sample-principals.json)."""
    from cli.schemas import principal_schema

    emit_json(principal_schema())


@schema.command("board")
def schema_board() -> None:
    """One board ACL of `suli acl load` (docs/sample-boards.json)."""
    from cli.schemas import board_schema

    emit_json(board_schema())


@click.command("export", short_help="Write every item as JSON lines.")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True), default="-")
@click.option(
    "--workspace",
    "-w",
    "workspaces",
    multiple=True,
    help="Export only this workspace (repeat for several; default: every workspace).",
)
@click.pass_context
@handle_errors
def export(ctx: click.Context, file: str, workspaces: tuple[str, ...]) -> None:
    """Write every item as JSON lines to FILE (default stdout); `suli index FILE` takes it back.

    All items, whatever their visibility (personal uploads and hidden items too): an admin
    tool, like `suli index`. FILE is created readable by its owner only (mode 0600).
    """
    for w in workspaces:
        lookup_id(w, "workspace")
    wanted = set(workspaces)
    s = searcher(ctx)
    n = 0
    target = nullcontext(sys.stdout) if file == "-" else open_private(file)
    with target as out:
        for item in as_store(s.backend).all_items():
            if wanted and item.workspace not in wanted:
                continue
            out.write(json.dumps(item_input_json(item), ensure_ascii=False) + "\n")
            n += 1
    where = f"workspace {', '.join(sorted(wanted))} of " if wanted else ""
    click.echo(f"exported {n} items from {where}{store_name(ctx)}", err=True)
