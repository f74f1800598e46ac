"""Data in and out: `suli schema item` (the item format) and `suli export` (items as JSONL)."""

from __future__ import annotations

import json
import sys
from contextlib import nullcontext

import click

from cli.context import searcher, store_name
from cli.output import emit_json, handle_errors
from suli.render import item_input_json
from suli.validate import item_json_schema


@click.group()
def schema() -> None:
    """JSON Schemas of Suli's input formats."""


@schema.command("item")
def schema_item() -> None:
    """The JSON Schema of one `suli index` line, generated from the validator (docs/items.md)."""
    emit_json(item_json_schema())


@click.command("export")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True), default="-")
@click.pass_context
@handle_errors
def export(ctx: click.Context, file: str) -> None:
    """Write every item as JSON lines to FILE (default stdout); `suli index FILE` takes it back.

    All items, whatever their visibility: an admin tool, like `suli index`.
    """
    s = searcher(ctx)
    n = 0
    target = nullcontext(sys.stdout) if file == "-" else open(file, "w", encoding="utf-8")  # noqa: SIM115
    with target as out:
        for item in s.backend.all_items():
            out.write(json.dumps(item_input_json(item), ensure_ascii=False) + "\n")
            n += 1
    click.echo(f"exported {n} items from {store_name(ctx)}", err=True)
