"""`suli search`, `show`, `related` and `facets`: parse flags, call the core, print."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import click

from cli.context import embed_query_first, load_model, searcher, settings
from cli.output import emit_json, handle_errors, json_option, print_results
from cli.remote import (
    as_option,
    call,
    need_principal,
    remote_search,
    search_params,
    token_option,
    url_option,
)
from suli.counting import FACET_FILTERS
from suli.render import DERIVED_FIELDS, facets_json, item_json, response_json
from suli.search_params import request_from
from suli.text import words as query_words


@click.command(short_help="Search items by words and meaning (no words: browse).")
@click.argument("words", nargs=-1)
@click.option("--kind", help="artifact or work-record (comma-separated for several).")
@click.option("--outcome", help="Outcomes, comma-separated, e.g. approved,completed.")
@click.option("--board", help="Board id(s).")
@click.option("--agent", help="Agent principal id(s).")
@click.option("--station", help="Station id or name.")
@click.option("--tag", multiple=True, help="Tag (repeat for several; any of them matches).")
@click.option("--since", help="Last activity on or after this UTC date (YYYY-MM-DD).")
@click.option("--until", help="Last activity on or before this UTC date (YYYY-MM-DD).")
@click.option("--recent-days", type=int, help="Only items active in the last N days.")
@click.option("--regex", help="Regular expression over title and body (case-insensitive).")
@click.option("--limit", type=int, default=10, show_default=True, help="1 to 25 results.")
@click.option(
    "--mode", type=click.Choice(["hybrid", "text", "vector"]), default="hybrid", show_default=True
)
@click.option("--hidden", "include_hidden", is_flag=True, help="Include hidden items.")
@click.option("--explain", is_flag=True, help="Show why each result ranks where it does.")
@click.option(
    "--exact-total",
    "exact_total",
    is_flag=True,
    help="Count every match exactly (else: exact up to a limit, 'at least N' past it).",
)
@click.option("--page", type=int, help="Page number (1 = first; pages of --limit results).")
@click.option("--cursor", help="The `next` of an earlier --json answer: its next page.")
@click.option(
    "--as",
    "principal_id",
    envvar="SULI_PRINCIPAL",
    help="The principal to search as (not with --url: the token names it). Env: SULI_PRINCIPAL.",
)
@url_option
@token_option
@json_option
@click.pass_context
@handle_errors
def search(
    ctx: click.Context,
    words: tuple[str, ...],
    principal_id: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
    **flags: Any,
) -> None:
    """Search items by words and meaning; no words browses newest first."""
    query = " ".join(words)
    page = flags.pop("page")
    if url:
        body = remote_search(url, token, query, flags, page=page)
    else:
        if not principal_id:
            raise click.UsageError(
                "Missing option '--as' (or search a service with --url/--token)."
            )
        limits = settings(ctx).max_query_chars  # checked before any backend is opened
        req = request_from({"query": query, **flags, "page": page}, max_query_chars=limits)
        s = searcher(ctx)
        if req.mode != "text" and query_words(req.query):
            embed_query_first(s, req.query)
        body = response_json(s.search(s.principal(principal_id), req))
    if as_json:
        emit_json(body)
        return
    hint = ""
    if body["has_more"]:
        n = body["offset"] // flags["limit"] + 2 if flags["limit"] else 2
        hint = f"--page {n}" if not flags.get("cursor") else "--cursor from --json `next`"
    print_results(body, hint)


@click.command()
@click.argument("item_id")
@as_option
@url_option
@token_option
@json_option
@click.pass_context
@handle_errors
def show(
    ctx: click.Context,
    item_id: str,
    principal_id: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """Show one item you may see."""
    if url:
        body = call(url, token, "GET", f"/items/{quote(item_id, safe='')}")
    else:
        s = searcher(ctx)
        item, res = s.get(s.principal(need_principal(principal_id, url)), item_id)
        body = item_json(item, res)
    if as_json:
        emit_json({**body, "derived": list(DERIVED_FIELDS)})
        return
    click.echo(f"{body['title']}  [{body['outcome'] or '-'}] ({body['scope']})")
    for key in ("id", "kind", "board", "agent", "url", "last_activity_at"):
        if body.get(key):
            click.echo(f"  {key}: {body[key]}")
    if body["superseded"]:
        click.echo(f"  superseded by: {body['superseded_by'] or '(not visible to you)'}")
    if body["tags"]:
        click.echo(f"  tags: {', '.join(body['tags'])}")
    if body["body"]:
        click.echo("")
        click.echo(body["body"])


@click.command(short_help="Items related to an item or to a card.")
@click.argument("item_id", required=False)
@click.option("--title", help="A card's title (for a card with no record).")
@click.option("--spec", default="", help="A card's spec text.")
@click.option("--ref", "refs", multiple=True, help="A card's reference (repeatable).")
@click.option("--limit", type=int, default=10, show_default=True)
@click.option("--explain", is_flag=True)
@as_option
@url_option
@token_option
@json_option
@click.pass_context
@handle_errors
def related(
    ctx: click.Context,
    item_id: str | None,
    title: str | None,
    spec: str,
    refs: tuple[str, ...],
    limit: int,
    explain: bool,
    principal_id: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """Items related to ITEM_ID, or to a card given by --title/--spec/--ref."""
    if item_id and title:
        raise click.UsageError("give ITEM_ID or --title, not both")
    if not item_id and not title:
        raise click.UsageError("give ITEM_ID or --title")
    if url:
        card_json = {"title": title, "spec": spec, "references": list(refs)} if title else {}
        body = call(
            url,
            token,
            "POST",
            "/related",
            json={"item_id": item_id, **card_json, "limit": limit, "explain": explain},
        )
        emit_json(body) if as_json else print_results(body)
        return
    principal_id = need_principal(principal_id, url)
    s = searcher(ctx)
    load_model(s)  # related texts are rarely the same twice: load before the search's budget
    from suli.service import Card

    card = Card(title, spec, refs) if title else None
    resp = s.related(
        s.principal(principal_id), item_id=item_id, card=card, limit=limit, explain=explain
    )
    body = response_json(resp)
    emit_json(body) if as_json else print_results(body)


@click.command(short_help="Filter values you may see, with counts.")
@click.argument("words", nargs=-1)
@click.option(
    "--mode", type=click.Choice(["hybrid", "text", "vector"]), default="hybrid", show_default=True
)
@click.option("--regex", help="Regular expression over title and body (case-insensitive).")
@click.option("--kind")
@click.option("--outcome")
@click.option("--board")
@click.option("--agent")
@click.option("--station")
@click.option("--tag", multiple=True)
@click.option("--since")
@click.option("--until")
@as_option
@url_option
@token_option
@json_option
@click.pass_context
@handle_errors
def facets(
    ctx: click.Context,
    words: tuple[str, ...],
    principal_id: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
    **flags: Any,
) -> None:
    """Filter values you can see, with counts; with WORDS, over what that search matches."""
    query = " ".join(words)
    if url:
        params = {k: v for k, v in search_params(query, flags).items() if v != ""}
        body = call(url, token, "GET", "/facets", params=params)
    else:
        limits = settings(ctx).max_query_chars
        req = request_from({"query": query, **flags}, max_query_chars=limits)
        s = searcher(ctx)
        body = facets_json(s.facets(s.principal(need_principal(principal_id, url)), req=req))
    if as_json:
        emit_json(body)
        return
    click.echo(f"{body['total']} matching items" if query else f"{body['total']} visible items")
    ticked = [name for name in FACET_FILTERS if flags.get(name)]
    if ticked:  # disjunctive counts (DESIGN 3.10): say why a ticked facet shows other values
        click.echo(f"  ({', '.join(ticked)}: counted without their own selection)")
    for name, values in body["facets"].items():
        shown = ", ".join(f"{v['value']} ({v['count']})" for v in values) or "-"
        more = " (and more: narrow the search to see them)" if body["more"].get(name) else ""
        click.echo(f"  {name}: {shown}{more}")
