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
            click.echo(f"Error: {backend_line(e)}{_where(e)}", err=True)
            sys.exit(code)

    return wrapper  # type: ignore[return-value]


_WHAT = re.compile(
    r"^OpenSearch (?:is unreachable|connection failed|refused[^(:]*) \(([^)]*)\)"
    r"|^OpenSearch refused (?:to )?([^:(]+?)(?: \(\d+\))?:"
)


def backend_line(error: SuliError) -> str:
    """The error's one line. An OpenSearch client fault is said the same way whichever command
    met it (search, status, indices, reindex, ...): the TLS or credential setting to fix
    (suli.backends.opensearch.tls, which the search path uses), or for an unreachable node the
    URL it tried and the setting that names it; never the transport's nested reprs."""
    cause = error.__cause__
    if not isinstance(error, BackendUnavailable) or cause is None:
        return error.message
    if not type(cause).__module__.startswith("opensearchpy"):
        return error.message
    import opensearchpy

    from suli.backends.opensearch import tls

    m = _WHAT.match(error.message)
    what = next((g for g in m.groups() if g), "request") if m else "request"
    if isinstance(cause, opensearchpy.ConnectionError):
        secured = tls.connection_fault(cause)
        if secured:
            return f"OpenSearch connection failed ({what}): {secured}"
        return (
            f"OpenSearch is unreachable ({what}): {_connection_reason(cause)} at "
            f"{_opensearch_url()}; is the node up, and is SULI_OPENSEARCH_URL right?"
        )
    if isinstance(cause, tls.REFUSED):
        return tls.refusal(cause, what)
    return error.message


def _connection_reason(e: Exception) -> str:
    text = str(e)
    for needle, reason in (
        ("Connection refused", "connection refused"),
        ("Name or service not known", "host name not found"),
        ("nodename nor servname", "host name not found"),
        ("timed out", "connection timed out"),
        ("No route to host", "no route to host"),
    ):
        if needle in text:
            return reason
    return "cannot connect"


def _opensearch_url() -> str:
    """The URL the command used (its settings when made, else the environment's)."""
    import os

    ctx = click.get_current_context(silent=True)
    made = (ctx.find_root().obj or {}).get("settings") if ctx is not None else None
    url = getattr(made, "opensearch_url", None) or os.environ.get("SULI_OPENSEARCH_URL", "")
    return str(url) or "(no SULI_OPENSEARCH_URL)"


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


def plural(n: int, one: str, many: str | None = None) -> str:
    """`1 board ACL`, `2 board ACLs`: the count with the word in its number."""
    return f"{n} {one if n == 1 else many or one + 's'}"


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
        from suli.render import rounded  # the one rounding of every edge (HTTP and MCP too)

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
    if body.get("paging_limit") is not None:
        # Hybrid pages through its fused candidates only: say where paging ends before `total`.
        more = (
            f"; hybrid paging reaches only the {body['paging_limit']} best-fused of them "
            f"(--mode text pages through all){more}"
        )
    click.echo(
        f"-- {total_words(body)}{shown}{more}, {body['timings_ms'].get('total', 0):.0f} ms"
        + (f" ({'; '.join(extra)})" if extra else ""),
        err=True,
    )


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"
