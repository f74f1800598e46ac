"""Finishing a response body: timings rounded, size limit, Server-Timing header, metrics.

`timings_ms` is rounded by suli.render.rounded, the one rounding of every edge: HTTP (here), MCP
(app.mcp_tools), the web page and the CLI's `--json` (cli.output).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from app import logs
from app.metrics import server_timing
from suli.render import rounded

if TYPE_CHECKING:
    from fastapi import Response

    from app.runtime import Runtime

# What a caller who is not an admin learns of a response's time: its total, in whole
# milliseconds (DESIGN 3.11). The phases (`text_took` at 0.1 ms told whether a typo'd word
# occurred only in items the caller cannot see, 3 rounds in 4) go to admins, logs and metrics.
CALLER_TOTAL_DECIMALS = 0


def for_caller(timings: Mapping[str, float], admin: bool) -> dict[str, float]:
    """The timings a caller gets: every phase for an admin, else only a coarse total."""
    if admin:
        return dict(timings)
    return {"total": float(round(timings.get("total", 0.0), CALLER_TOTAL_DECIMALS))}


def shown_to(body: dict[str, Any], admin: bool) -> dict[str, Any]:
    """The body with its `timings_ms` as the caller may see them."""
    return {**body, "timings_ms": for_caller(body["timings_ms"], admin)}


def _size(body: dict[str, Any]) -> int:
    # The same encoding as Starlette's JSONResponse, so the count matches what is sent.
    return len(
        json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    )


CursorAt = Callable[[int], str]  # the cursor of the page starting at an offset


def fit(body: dict[str, Any], max_bytes: int, cursor_at: CursorAt | None = None) -> dict[str, Any]:
    """Drop the lowest-ranked results until the body fits max_bytes; say `truncated: true`.

    With `cursor_at`, `next` then starts at the first dropped result: paging skips nothing."""
    if _size(body) <= max_bytes:
        return body
    every = body["results"]
    body = {**body, "truncated": True}

    def shaped(results: list[Any]) -> dict[str, Any]:
        out = {**body, "results": results}
        if cursor_at is not None and "offset" in body and len(results) < len(every):
            out.update(has_more=True, next=cursor_at(body["offset"] + len(results)))
        return out

    results = list(every)
    while results and _size(shaped(results)) > max_bytes:
        results.pop()
    return shaped(results)


def finish_search(
    body: dict[str, Any],
    response: Response,
    runtime: Runtime,
    route: str,
    cursor_at: CursorAt | None = None,
    *,
    admin: bool,
) -> dict[str, Any]:
    """A search/related body: timings rounded, trimmed to size, timed in a header, counted.

    The metrics and the request's log line get every phase; the caller what for_caller allows.
    """
    body = fit(rounded(body), runtime.settings.max_response_bytes, cursor_at)
    record(runtime, route, body)
    body = shown_to(body, admin)
    response.headers["Server-Timing"] = server_timing(body["timings_ms"])
    return body


def record(runtime: Runtime, route: str, body: Mapping[str, Any]) -> None:
    """A search/related answer's phases and degraded legs, to the metrics and the log line."""
    timings = body["timings_ms"]
    runtime.metrics.observe_phases(route, timings)
    for d in body["degraded"]:
        runtime.metrics.degraded.labels(leg=d["leg"]).inc()
    logs.note(degraded=[d["leg"] for d in body["degraded"]], timings_ms=dict(timings))


class Timer:
    """Total time of a route that has no core phases of its own."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def done(self, body: dict[str, Any], response: Response) -> dict[str, Any]:
        out = rounded({**body, "timings_ms": {"total": (time.perf_counter() - self.t0) * 1000}})
        response.headers["Server-Timing"] = server_timing(out["timings_ms"])
        return out
