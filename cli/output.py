"""Shared CLI plumbing: options, error-to-exit-code table, and human output."""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from suli.errors import (
    BackendUnavailable,
    DeadlineExceeded,
    Forbidden,
    InvalidInput,
    NotFound,
    RateLimited,
    SuliError,
    Unauthorized,
)
from suli.render import total_words

F = TypeVar("F", bound=Callable[..., Any])

# One table: core error -> exit code (0 ok, 1 failure, 2 usage error).
EXIT_CODES: dict[type[SuliError], int] = {
    InvalidInput: 2,
    NotFound: 1,
    Forbidden: 1,
    Unauthorized: 1,
    RateLimited: 1,
    BackendUnavailable: 1,
    DeadlineExceeded: 1,
}


def handle_errors(fn: F) -> F:
    """Print a core error as one line on stderr and exit with its code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SuliError as e:
            code = next((c for t, c in EXIT_CODES.items() if isinstance(e, t)), 1)
            click.echo(f"Error: {e.message}{_where(e)}", err=True)
            sys.exit(code)

    return wrapper  # type: ignore[return-value]


def _where(error: SuliError) -> str:
    """For a not-found: which backend and store (or service) was asked, so an empty or wrong
    store is not mistaken for a missing item or principal."""
    ctx = click.get_current_context(silent=True)
    unknown_principal = isinstance(error, InvalidInput) and error.field == "principal"
    if not (isinstance(error, NotFound) or unknown_principal) or ctx is None:
        return ""
    if ctx.params.get("url"):
        return f" (asked the service at {ctx.params['url']})"
    if "settings" not in (ctx.find_root().obj or {}):
        return ""
    from cli.context import store_name

    return f" (looked in {store_name(ctx)})"


json_option = click.option(
    "--json", "as_json", is_flag=True, help="Machine output (the API's JSON body) on stdout."
)
principal_option = click.option(
    "--as",
    "principal_id",
    envvar="SULI_PRINCIPAL",
    required=True,
    help="The principal to search as (id, e.g. prn_ana). Env: SULI_PRINCIPAL.",
)


def emit_json(data: Any) -> None:
    if isinstance(data, dict) and "timings_ms" in data:
        from app.respond import rounded  # the one rounding of every edge (HTTP and MCP too)

        data = rounded(data)
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


_MARK = re.compile(r"</?mark>")


def human_snippet(snippet: str) -> str:
    """<mark>word</mark> -> bold in a terminal; HTML entities back to characters."""
    import html

    parts = _MARK.split(snippet)
    tags = _MARK.findall(snippet)
    out = parts[0]
    for tag, part in zip(tags, parts[1:], strict=True):
        out += ("\x1b[1m" if tag == "<mark>" else "\x1b[0m") + part
    if not sys.stdout.isatty():
        out = _MARK.sub("", snippet)
    return html.unescape(out)


def print_results(body: dict[str, Any], page_hint: str = "") -> None:
    """Results, then a footer on stderr: how many match (exact or "at least"), which part
    this page shows, and how to get the next (`page_hint`)."""
    results = body["results"]
    offset = body.get("offset", 0)
    if not results:
        click.echo("No results." if not offset else "No more results.")
    for n, r in enumerate(results, start=offset + 1):
        badge = r["outcome"] or "-"
        click.echo(
            f"{n:>2}. {r['title']}  [{badge}] ({r['scope']}{': ' + r['board'] if r.get('board') else ''})"
        )
        click.echo(f"    id: {r['id']}" + (f"  url: {r['url']}" if r.get("url") else ""))
        if r.get("superseded"):
            click.echo(f"    superseded by: {r['superseded_by'] or '(not visible to you)'}")
        if r.get("snippet"):
            click.echo(f"    {human_snippet(r['snippet'])}")
        if "explain" in r:
            e = r["explain"]
            click.echo(
                "    explain: text #{}, vector #{} (sim {}), rrf {:.5f}, outcome x{}, kept: {}".format(
                    e["text_rank"],
                    e["vector_rank"],
                    _f(e["vector_similarity"]),
                    e["rrf"],
                    e["outcome_weight"],
                    e["kept"],
                )
            )
    if body.get("dropped"):  # --explain: the hits the gates left out, and why
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(body["dropped"].items()))
        click.echo(f"    explain: left out {why}")
    extra = []
    if body.get("degraded"):
        extra.append("degraded: " + ", ".join(d["leg"] for d in body["degraded"]))
    if body.get("truncated"):
        extra.append("truncated")
    shown = f"; showing {offset + 1}-{offset + len(results)}" if results else ""
    more = f"; more: {page_hint}" if body.get("has_more") and page_hint else ""
    click.echo(
        f"-- {total_words(body)}{shown}{more}, {body['timings_ms'].get('total', 0):.0f} ms"
        + (f" ({'; '.join(extra)})" if extra else ""),
        err=True,
    )


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"
