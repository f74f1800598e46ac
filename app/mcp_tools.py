"""The MCP tools' plumbing: argument checks, the limit/max_results cap, output model, text form.

The tools themselves live in app.mcp_server; everything here is plain and testable on its own.
Both tools answer with the HTTP API's search body (suli.render.response_json, trimmed by
app.respond.fit) plus how the cap applied, as structured content and as text for the model.
"""

from __future__ import annotations

import difflib
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from mcp.types import CallToolResult, TextContent
from pydantic import Field

from app import schemas
from app.errors import error_body, public_error
from app.respond import CursorAt, fit
from suli.errors import (
    BackendUnavailable,
    DeadlineExceeded,
    InvalidInput,
    NotFound,
    RateLimited,
    SuliError,
    Unauthorized,
)
from suli.models import SearchResponse
from suli.render import response_json, rounded
from suli.search_params import MAX_LIMIT

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 10
# Argument names agents often guess, mapped to ours, for the "did you mean" of an unknown one.
_GUESSES = {
    "q": "query",
    "text": "query",
    "search": "query",
    "top_k": "limit",
    "k": "limit",
    "n": "limit",
    "count": "limit",
    "size": "limit",
    "id": "item_id",
    "body": "spec",
    "refs": "references",
    "kinds": "kind",
    "outcomes": "outcome",
    "boards": "board",
    "agents": "agent",
    "stations": "station",
    "tags": "tag",
}


class ToolSearchOut(schemas.SearchResponse):
    """What library_search and library_related return: the HTTP body plus how the cap applied."""

    limit: int = Field(description="The cap that applied (the tighter of limit and max_results).")
    has_more: bool = Field(
        description="A next page exists: call library_search again with cursor set to `next`."
    )
    notes: list[str] = Field(
        description="Plain-language notes on the cap, truncation, degraded legs."
    )


def check_arguments(arguments: Mapping[str, Any] | None, allowed: Iterable[str]) -> None:
    """Refuse argument names the tool does not know, so a misspelt filter is never ignored."""
    known = list(allowed)
    for name in arguments or {}:
        if name in known:
            continue
        guess = _GUESSES.get(name.lower())
        if guess not in known:
            close = difflib.get_close_matches(name, known, n=1)
            guess = close[0] if close else None
        hint = f" (did you mean `{guess}`?)" if guess else ""
        raise InvalidInput(
            f"{name}: unknown argument{hint}; this tool takes {', '.join(known)}", name
        )


def _cap(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise InvalidInput(f"{name}: must be an integer from 1 to {MAX_LIMIT}", name)
    return value


def pick_limit(limit: int | None, max_results: int | None) -> tuple[int, list[str]]:
    """The cap from `limit` and its alias `max_results`: the tighter one wins when both are set."""
    given = {
        n: _cap(v, n) for n, v in (("limit", limit), ("max_results", max_results)) if v is not None
    }
    if not given:
        return DEFAULT_LIMIT, []
    cap = min(given.values())
    notes: list[str] = []
    if len(given) == 2 and limit != max_results:
        notes.append(
            f"limit={limit} and max_results={max_results} were both given; "
            f"the tighter cap, {cap}, applied."
        )
    return cap, notes


def tool_body(
    resp: SearchResponse,
    cap: int,
    notes: list[str],
    max_bytes: int,
    cursor_at: CursorAt | None = None,
) -> dict[str, Any]:
    """The structured result: the HTTP search body (same fit to size) plus cap, has_more, notes."""
    body = fit(rounded(response_json(resp)), max_bytes, cursor_at)
    shown = len(body["results"])
    notes = list(notes)
    if body["truncated"]:
        notes.append(
            f"Cut to {shown} results to fit the response size; ask for fewer or narrow the filters."
        )
    has_more = body["has_more"]
    first = body["offset"] + 1
    of = ("at least " if body["total_relation"] == "gte" else "") + str(body["total"])
    if has_more and body["next"]:
        notes.append(
            f"Showing results {first}-{first + shown - 1} of {of} matches; "
            "pass cursor=<next> (same query and filters) for the next page."
        )
    elif body["total"] > body["offset"] + shown and shown:
        notes.append(
            f"Showing results {first}-{first + shown - 1} of {of} matches; the rest lie past "
            "the ranked candidates: add words or filters to reach them."
        )
    for d in body["degraded"]:
        notes.append(
            f"Degraded: the {d['leg']} search failed ({d['reason']}); results may miss some."
        )
    out = {**body, "limit": cap, "has_more": has_more, "notes": notes}
    # Through the schema, as HTTP does: a field the model does not name cannot leak.
    return ToolSearchOut.model_validate(out).model_dump(mode="json", exclude_unset=True)


def _result_lines(n: int, r: Mapping[str, Any]) -> list[str]:
    lines = [
        f"{n}. {r['title']}",
        f"   id: {r['id']} | kind: {r['kind']} | outcome: {r['outcome'] or 'none'} | "
        f"scope: {r['scope']}" + (f" (board {r['board']})" if r["board"] else ""),
    ]
    if r["url"]:
        lines.append(f"   url: {r['url']}")
    if r["snippet"]:
        lines.append(f"   snippet: {r['snippet']}")
    if r["superseded_by"]:
        lines.append(f"   superseded_by: {r['superseded_by']} (prefer the replacement)")
    elif r["superseded"]:
        lines.append("   superseded_by: none you may see (this item is superseded)")
    if r["last_activity_at"]:
        lines.append(f"   last_activity_at: {r['last_activity_at']}")
    if r["provenance"]:
        lines.append(f"   provenance: {json.dumps(r['provenance'], ensure_ascii=False)}")
    return lines


def render_text(heading: str, body: Mapping[str, Any]) -> str:
    """The text content for the model: every fact of the structured body, one result a block."""
    results = body["results"]
    more = f"; next page: cursor={body['next']}" if body["has_more"] and body["next"] else ""
    of = ("at least " if body["total_relation"] == "gte" else "") + str(body["total"])
    lines = [
        f"{heading}: {len(results)} result(s) of {of} visible match(es) "
        f"(limit {body['limit']}{more})."
    ]
    lines += [f"Note: {note}" for note in body["notes"]]
    for n, r in enumerate(results, body["offset"] + 1):
        lines += _result_lines(n, r)
    if not results:
        lines.append(
            "No visible item matches. Try other words, fewer filters or no query (browse)."
        )
    if body.get("facets"):
        lines.append(f"facets over the {body['facets']['total']} matches:")
        for name, values in body["facets"]["facets"].items():
            if values:
                more = " (and more)" if body["facets"]["more"].get(name) else ""
                listed = ", ".join(f"{v['value']} ({v['count']})" for v in values)
                lines.append(f"  {name}: {listed}{more}")
    degraded = "; ".join(f"{d['leg']} ({d['reason']})" for d in body["degraded"]) or "no"
    lines.append(f"degraded: {degraded}")
    lines.append(f"truncated: {'yes' if body['truncated'] else 'no'}")
    lines.append(f"rerank: {body['rerank']}")
    timings = body["timings_ms"]
    phases = ", ".join(f"{k} {v:g}" for k, v in timings.items() if k != "total")
    lines.append(
        f"timing_ms: total {timings.get('total', 0):g}" + (f" ({phases})" if phases else "")
    )
    return "\n".join(lines)


def success(heading: str, body: dict[str, Any]) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=render_text(heading, body))],
        structured_content=body,
    )


def _advice(e: SuliError) -> str:
    if isinstance(e, InvalidInput):
        return "Fix that argument and call again."
    if isinstance(e, NotFound):
        return "The id is wrong or the item is not visible to you; search for it first."
    if isinstance(e, RateLimited):
        return f"Wait {e.retry_after} s before calling again."
    if isinstance(e, BackendUnavailable | DeadlineExceeded):
        return "This is temporary: try again shortly, perhaps with a narrower query."
    if isinstance(e, Unauthorized):
        return "The token is not valid: ask the user for a new one."
    return "Try again."


def failure(e: SuliError) -> CallToolResult:
    """A tool error the model can act on: what was wrong (naming the field) and what to do.

    The structured content is the HTTP API's one error shape (clients skip output-schema
    checks on error results).
    """
    if isinstance(e, BackendUnavailable):
        log.warning("MCP tool call failed: %s", e.message)
    e = public_error(e)
    field = e.field if isinstance(e, InvalidInput) else None
    extra: dict[str, Any] = {}
    if isinstance(e, RateLimited):
        extra = {"limit": e.limit, "retry_after": e.retry_after}
    message = e.message.removeprefix(f"{field}: ") if field else e.message
    prefix = f"Invalid argument `{field}`" if field else e.code.replace("_", " ").capitalize()
    text = f"{prefix}: {message}. {_advice(e)}"
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=error_body(e.code, e.message, field, **extra),
        is_error=True,
    )
