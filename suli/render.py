"""Plain-JSON forms of core results: the one body shared by HTTP, `--json` and MCP."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from datetime import datetime
from typing import Any

from suli.backends.base import Facets
from suli.models import Item, Result, SearchResponse

# 0.1 ms: the clocks and the scheduler make finer digits noise, and a client should not get
# 17-digit floats that differ on every call.
TIMING_DECIMALS = 1


def rounded(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body with each `timings_ms` value rounded to 0.1 ms (other fields untouched): the
    one rounding of every edge (HTTP, MCP, the web page, the CLI's --json)."""
    timings = body.get("timings_ms")
    if not isinstance(timings, Mapping):
        return dict(body)
    return {**body, "timings_ms": {k: round(v, TIMING_DECIMALS) for k, v in timings.items()}}


def _dt(d: datetime | None) -> str | None:
    return d.isoformat().replace("+00:00", "Z") if d else None


def result_json(r: Result) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": r.id,
        "kind": r.kind,
        "title": r.title,
        "outcome": r.outcome,
        "scope": r.scope,
        "board": r.board,
        "provenance": r.provenance,
        "snippet": r.snippet,
        "url": r.url,
        "superseded": r.superseded,
        "superseded_by": r.superseded_by,
        "last_activity_at": _dt(r.last_activity_at),
        "score": round(r.score, 6),
    }
    if r.explain is not None:
        out["explain"] = asdict(r.explain)
    return out


def response_json(resp: SearchResponse) -> dict[str, Any]:
    out: dict[str, Any] = {
        "results": [result_json(r) for r in resp.results],
        "total": resp.total,
        "total_relation": resp.total_relation,
        "offset": resp.offset,
        "has_more": resp.has_more,
        "next": resp.next,
        "paging_limit": resp.paging_limit,
        "degraded": [{"leg": d.leg, "reason": d.reason} for d in resp.degraded],
        "truncated": resp.truncated,
        "rerank": resp.rerank,
        "timings_ms": resp.timings_ms,
    }
    if resp.facets is not None:
        out["facets"] = facets_json(resp.facets)
    if resp.dropped is not None:
        out["dropped"] = dict(resp.dropped)
    return out


def total_words(body: dict[str, Any]) -> str:
    """`total` as a person reads it: "12 matches", "at least 100 matches"."""
    n = body["total"]
    noun = "match" if n == 1 else "matches"
    return f"at least {n} {noun}" if body.get("total_relation") == "gte" else f"{n} {noun}"


def item_json(item: Item, shown: Result) -> dict[str, Any]:
    """A visible item for `get` (Searcher.get's pair): no vector, no ACL data. `superseded`
    and `superseded_by` come from its shown Result, where the core already applied the one
    rule (an invisible replacement: `superseded` true, no id), as for search results."""
    out = _stored_fields(item)
    del out["uploader"]  # who uploaded a personal item is not shown
    out["scope"] = item.scope
    out["superseded"] = shown.superseded
    out["superseded_by"] = shown.superseded_by
    return out


# Fields of an item's JSON (GET /items/{id}, `suli show --json`) that Suli computes rather than
# stores as given: scope from board/uploader, superseded from superseded_by/outcome. An item's
# superseded_by is also shown only when the caller may see the replacement.
DERIVED_FIELDS = ("scope", "superseded")


def item_input_json(item: Item) -> dict[str, Any]:
    """An item as the JSON line `suli index` takes (docs/items.md): what export writes."""
    return {k: v for k, v in _stored_fields(item).items() if v is not None}


def _stored_fields(item: Item) -> dict[str, Any]:
    """The item's own fields as given at indexing (nothing derived, nothing checked)."""
    return {
        "id": item.id,
        "workspace": item.workspace,
        "kind": item.kind,
        "title": item.title,
        "body": item.body,
        "outcome": item.outcome,
        "board": item.board,
        "uploader": item.uploader,
        "agent": item.agent,
        "stations": [{"id": s.id, "name": s.name} for s in item.stations],
        "superseded_by": item.superseded_by,
        "references": list(item.references),
        "tags": list(item.tags),
        "media_type": item.media_type,
        "path": item.path,
        "caption": item.caption,
        "provenance": item.provenance,
        "created_at": _dt(item.created_at),
        "updated_at": _dt(item.updated_at),
        "last_activity_at": _dt(item.last_activity_at),
        "url": item.url,
        "hidden": item.hidden,
    }


def facets_json(f: Facets) -> dict[str, Any]:
    return {
        "total": f.total,
        "facets": {k: [{"value": v, "count": c} for v, c in vals] for k, vals in f.values.items()},
        "more": {k: bool(f.more.get(k)) for k in f.values},
    }
