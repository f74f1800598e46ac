"""The one error table of the HTTP edge: every 4xx/5xx body is {"error": {code, message, field?}}."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from suli.errors import (
    BackendUnavailable,
    DeadlineExceeded,
    Forbidden,
    IndexingError,
    InvalidInput,
    NotFound,
    RateLimited,
    SuliError,
    Unauthorized,
)

log = logging.getLogger(__name__)

# Core error -> HTTP status. Checked in order, so a subclass must come before its base.
STATUS: dict[type[SuliError], int] = {
    InvalidInput: 422,
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    RateLimited: 429,
    BackendUnavailable: 503,
    DeadlineExceeded: 504,
    IndexingError: 502,
}

# Statuses Starlette raises itself (unknown route, wrong method, ...) -> our error code.
HTTP_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 413: "too_large"}


class BodyTooLarge(StarletteHTTPException):
    """A request body past its cap (app.bodylimit raises it from `receive`, after answering)."""

    def __init__(self, cap: int) -> None:
        super().__init__(413, f"body: the request body is over the limit of {cap} bytes")
        self.cap = cap


def error_body(code: str, message: str, field: str | None = None, **extra: Any) -> dict[str, Any]:
    """The one JSON error shape."""
    err: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        err["field"] = field
    err.update(extra)
    return {"error": err}


def too_large_response(cap: int) -> JSONResponse:
    """413 naming the body: the one shape, from the middleware that enforces the cap."""
    exc = BodyTooLarge(cap)
    return JSONResponse(error_body("too_large", str(exc.detail), "body"), status_code=413)


def status_of(exc: SuliError) -> int:
    return next((s for t, s in STATUS.items() if isinstance(exc, t)), 500)


# What a caller is told when the backend fails. The backend's own message can hold its URL, the
# store's path or an index name (internals, and this answer also goes to callers without a
# valid token); it is logged instead (on_suli_error, the MCP edge).
UNAVAILABLE = "the search backend is unavailable; the service retries by itself, retry shortly"


def public_error(exc: SuliError) -> SuliError:
    """The error as a caller may see it: backend faults without their internals."""
    if isinstance(exc, BackendUnavailable) and not getattr(exc, "public", False):
        return BackendUnavailable(UNAVAILABLE)
    return exc


def suli_error_response(exc: SuliError) -> JSONResponse:
    """The response for a core error, with Retry-After for rate limits."""
    exc = public_error(exc)
    headers: dict[str, str] = {}
    extra: dict[str, Any] = {}
    if isinstance(exc, RateLimited):
        extra = {"limit": exc.limit, "retry_after": exc.retry_after}
        headers["Retry-After"] = str(exc.retry_after)
    field = exc.field if isinstance(exc, InvalidInput) else None
    body = error_body(exc.code, exc.message, field, **extra)
    return JSONResponse(body, status_code=status_of(exc), headers=headers)


def _count(request: Request, code: str) -> None:
    runtime = getattr(request.app.state, "runtime", None)
    if runtime is not None:
        runtime.metrics.rejected.labels(code=code).inc()


async def on_suli_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, SuliError)
    _count(request, exc.code)
    if status_of(exc) >= 500:
        log.warning("%s %s -> %s: %s", request.method, request.url.path, exc.code, exc.message)
    return suli_error_response(exc)


def _field(loc: Sequence[Any]) -> str | None:
    """('query', 'limit') -> 'limit'; ('body', 'items', 3, 'id') -> 'items.3.id'."""
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("query", "body", "path", "header", "cookie"):
        parts = parts[1:]
    return ".".join(parts) or None


async def on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's own validation: 400 for a body that is not JSON, 422 naming the field else."""
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid request", "type": "invalid"}
    if first.get("type") == "json_invalid":
        _count(request, "invalid_json")
        body = error_body(
            "invalid_json", f"request body is not valid JSON: {first.get('msg')}", "body"
        )
        return JSONResponse(body, status_code=400)
    field = _field(first.get("loc", ()))
    msg = "unknown field" if first.get("type") == "extra_forbidden" else str(first.get("msg"))
    if first.get("type") == "missing" and field is None:
        field, msg = "body", "request body is required"
    _count(request, "invalid_input")
    message = f"{field}: {msg}" if field else msg
    return JSONResponse(error_body("invalid_input", message, field), status_code=422)


async def on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if isinstance(exc, BodyTooLarge):  # answered and counted by the middleware already
        return too_large_response(exc.cap)
    code = HTTP_CODES.get(exc.status_code, "error")
    _count(request, code)
    message = str(exc.detail) if exc.detail else code.replace("_", " ")
    if exc.status_code == 404:
        message = f"no route {request.method} {request.url.path}"
    return JSONResponse(
        error_body(code, message), status_code=exc.status_code, headers=exc.headers or None
    )


async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    """A bug: log it with its traceback; the caller gets the same shape, no internals."""
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    _count(request, "internal_error")
    return JSONResponse(error_body("internal_error", "internal server error"), status_code=500)


def install(app: FastAPI) -> None:
    """Register the handlers: core errors, validation, Starlette's HTTP errors, and bugs."""
    app.add_exception_handler(SuliError, on_suli_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(Exception, on_unexpected)
