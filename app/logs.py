"""Logs an operator can ship: one line per request, as JSON (SULI_LOG_FORMAT=json) or text.

A request line carries time, route template (never the raw path or query string: query text is
a caller's data), method, status, principal, latency, phase timings, the degraded flag and the
request id, which is also echoed as the `X-Request-Id` response header. Tokens, passwords and
query text are never logged.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.metrics import method_label

log = logging.getLogger("suli.request")

# A caller's X-Request-Id is kept when it looks like an id (a balancer's or a tracer's);
# anything else is replaced, so a header cannot write arbitrary text into the logs.
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
# Fields of a request line, in the order a text line prints them.
REQUEST_FIELDS = (
    "request_id",
    "method",
    "route",
    "status",
    "latency_ms",
    "principal",
    "degraded",
    "timings_ms",
)
# What only the routes know (the principal once the token is checked, the degraded legs), for
# the request line of the request being served: the middleware sets a dict, note() fills it.
_NOTES: ContextVar[dict[str, Any] | None] = ContextVar("suli_request_notes", default=None)
# uvicorn's records carry `color_message` (the message with terminal colour codes): not for a
# JSON line.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",
}


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC, RFC 3339), level, logger, message, and any extras."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """Plain lines for people; a request line lists its fields as key=value."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = [f"{k}={getattr(record, k)}" for k in REQUEST_FIELDS if hasattr(record, k)]
        return f"{line} {' '.join(extras)}" if extras else line


def formatter_class(log_format: str) -> str:
    """The dictConfig `()` factory path for a SULI_LOG_FORMAT value."""
    return "app.logs.JsonFormatter" if log_format == "json" else "app.logs.TextFormatter"


def request_id_of(scope: Scope) -> str:
    for key, value in scope.get("headers", []):
        if key == b"x-request-id":
            text = value.decode("latin-1")
            if _REQUEST_ID.match(text):
                return text
    return uuid.uuid4().hex


def _timings(headers: list[tuple[bytes, bytes]]) -> dict[str, float]:
    """Server-Timing `embed;dur=3.2, total;dur=9.1` -> {'embed': 3.2, 'total': 9.1}."""
    out: dict[str, float] = {}
    for key, value in headers:
        if key.lower() != b"server-timing":
            continue
        for part in value.decode("latin-1").split(","):
            name, _, dur = part.strip().partition(";dur=")
            try:
                out[name] = round(float(dur), 1)
            except ValueError:
                continue
    return out


def note(**fields: Any) -> None:
    """Add fields (principal, degraded) to the current request's log line; outside one, nothing."""
    notes = _NOTES.get()
    if notes is not None:
        notes.update(fields)


class RequestLogMiddleware:
    """Gives every request an id (echoed as X-Request-Id) and writes its one line when done."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        rid = request_id_of(scope)
        state: dict[str, Any] = {}
        token = _NOTES.set(state)
        status = 500
        timings: dict[str, float] = {}
        method = method_label(scope.get("method", ""))

        async def send_wrapper(message: Message) -> None:
            nonlocal status, timings
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = list(message.get("headers", []))
                timings = _timings(headers)
                headers.append((b"x-request-id", rid.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            _NOTES.reset(token)
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            fields = {
                "request_id": rid,
                "method": method,
                "route": route,
                "status": status,
                "latency_ms": round((time.perf_counter() - t0) * 1000, 1),
                "principal": state.get("principal"),
                "degraded": state.get("degraded", []),
                # The route's own phases when it noted them (a caller may get only the total).
                "timings_ms": state.get("timings_ms", timings),
            }
            level = logging.ERROR if status >= 500 else logging.INFO
            log.log(level, "%s %s %d", fields["method"], route, status, extra=fields)
