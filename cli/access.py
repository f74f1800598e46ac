"""`suli access ITEM_ID [--as PRINCIPAL]`: who may see an item, and why (suli.access)."""

from __future__ import annotations

from typing import Any

import click

from cli.context import searcher
from cli.output import emit_json, handle_errors, json_option
from cli.remote import call, token_option, url_option
from suli.backends.base import as_store
from suli.errors import InvalidInput
from suli.validate import lookup_id

# How `suli access` names each rule when it lists who may see an item.
RULE_TITLES = {
    "workspace-wide": "workspace-wide (every principal of the workspace)",
    "board-member": "board member",
    "board-group": "through a group",
    "uploader": "uploader",
}


@click.command("access")
@click.argument("item_id")
@click.option(
    "--as",
    "principal_id",
    help="The principal asked about (id, e.g. prn_ana); without it, everyone who may see it.",
)
@click.option(
    "--workspace",
    help="The item's workspace (default: the --as principal's, or the only one holding ITEM_ID).",
)
@url_option
@token_option
@json_option
@click.pass_context
@handle_errors
def access(
    ctx: click.Context,
    item_id: str,
    principal_id: str | None,
    workspace: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """Who may see an item and why (admin; --as: one principal)."""
    lookup_id(item_id)
    if url:  # the service answers for the token's workspace (an admin token)
        if workspace:
            raise click.UsageError("--workspace is the admin token's with --url: leave it out")
        params = {"item": item_id, **({"principal": principal_id} if principal_id else {})}
        body = call(url, token, "GET", "/admin/access", params=params)
    else:
        body = _local(ctx, item_id, principal_id, workspace)
    if as_json:
        emit_json(body)
    elif "audience" in body:
        _print_audience(body)
    else:
        _print_one(body)


def _local(
    ctx: click.Context, item_id: str, principal_id: str | None, workspace: str | None
) -> dict[str, Any]:
    from suli.access import access_json, audience, audience_json, explain

    s = searcher(ctx)
    who = s.principal(principal_id) if principal_id else None
    ws = workspace or _holder(ctx, item_id, who.workspace if who else None)
    if who is not None:
        return access_json(explain(s, ws, item_id, who))
    return audience_json(audience(s, ws, item_id))


def _holder(ctx: click.Context, item_id: str, preferred: str | None) -> str:
    """The workspace to look in: `preferred` (the principal's) when it holds the item, else
    the one workspace that does (the operator's CLI sees every workspace)."""
    backend = as_store(searcher(ctx).backend)
    known = {p.workspace for p in backend.list_principals()}
    known |= {a.workspace for a in backend.list_acls()}
    if preferred is not None:
        known.add(preferred)
    holders = sorted(w for w, _ in backend.stored_hashes([(w, item_id) for w in sorted(known)]))
    if preferred is not None and (preferred in holders or not holders):
        return preferred
    if len(holders) == 1:
        return holders[0]
    if not holders:
        raise InvalidInput(
            f"--workspace: no workspace of the directory holds {item_id!r}; name it", "workspace"
        )
    raise InvalidInput(
        f"--workspace: {item_id!r} is an id in {', '.join(holders)}: name one", "workspace"
    )


def _item_line(item: dict[str, Any]) -> str:
    where = {
        "board": f"on board {item['board']}",
        "personal": f"personal upload of {item['uploader']}",
        "workspace": "workspace-wide",
    }[item["scope"]]
    return f"{item['id']} ({item['workspace']}, {where}): {item['title']}"


def _print_one(body: dict[str, Any]) -> None:
    click.echo(_item_line(body["item"]))
    click.echo(f"{'visible' if body['visible'] else 'not visible'}: {body['reason']}")
    who = body["principal"]
    search = body["search"]
    if search == "shown":
        click.echo(f"search: {who}'s searches show it when it matches")
    elif search == "hidden":
        click.echo("hidden: shown only when hidden items are asked for (--hidden)")
    else:
        click.echo(f"search: never shown to {who}, in any form")
    sup = body["item"]["superseded_by"]
    if sup and body["replacement_visible"] is not None:
        if body["replacement_visible"]:
            click.echo(f"superseded by {sup}, which {who} may see: results name it")
        else:
            click.echo(
                f"superseded by {sup}, which {who} may not see: results say only "
                "that it is superseded"
            )
    for note in body["notes"]:
        click.echo(f"note: {note}")


def _print_audience(body: dict[str, Any]) -> None:
    item = body["item"]
    click.echo(_item_line(item))
    rows = body["audience"]
    if not rows:
        click.echo("nobody of the workspace may see it")
    for rule, title in RULE_TITLES.items():
        mine = [r for r in rows if r["rule"] == rule]
        if not mine:
            continue
        click.echo(f"{title}: {len(mine)}")
        for r in mine:
            via = f" (via {', '.join(r['groups'])})" if r["groups"] else ""
            click.echo(f"  {r['principal']}{via}")
    if item["hidden"]:
        click.echo("hidden: shown only when hidden items are asked for (--hidden)")
    if item["superseded_by"]:
        click.echo(
            f"superseded by {item['superseded_by']}: results name it only to whoever may see it"
        )
    for note in body["notes"]:
        click.echo(f"note: {note}")
