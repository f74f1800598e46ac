"""Request bodies at the door: the API token is checked before a body byte is read, and every
body is capped, by its Content-Length at once or by counting its bytes as they stream in.

Why at the ASGI layer: FastAPI reads and parses a whole body before any dependency runs, so a
tokenless 300 MB POST used to cost ~900 MB of memory (the bytes, the text, the parsed JSON)
before its 401. Until this middleware calls `receive`, the server reads at most its flow-control
window of a body (uvicorn pauses the socket at 64 KiB), so an answer given here costs nothing.

- /api/v1/* with a body: the token is checked first, by the routes' own rule
  (app.deps.authenticate), the principal's rate limit is charged, and an admin-only route
  refuses a token that is not an admin's (403): a non-admin's 15.7 MB post to /api/v1/items
  used to cost +217 MB and 3.1 s of parsing before its 403. The session is handed on so the
  route neither looks it up nor charges the limit again.
- /signin takes a small form and no token: only its size is checked.
- Every body: past its cap, 413 `too_large` naming `body`; Content-Length over the cap is
  refused before reading, a chunked body as soon as its bytes pass the cap.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import logs
from app.deps import DEADLINE_KEY, SESSION_KEY, authenticate, bearer
from app.errors import BodyTooLarge, suli_error_response, too_large_response
from app.runtime import Runtime
from app.tokens import client_address
from suli.errors import Forbidden, SuliError
from suli.service import Deadline
from suli.settings import Settings

API_PREFIX = "/api/v1/"
INGEST_PATH = "/api/v1/items"
SIGNIN_PATH = "/signin"
SIGNIN_MAX_BYTES = 4096  # the sign-in form holds one token and a path to return to
# The API routes that take a body and an admin token (app.routes_admin; a test keeps this equal
# to the routes that depend on app.deps.get_admin): (method, path prefix).
ADMIN_BODY_ROUTES = (
    ("POST", "/api/v1/items"),
    ("DELETE", "/api/v1/items/"),
    ("PUT", "/api/v1/boards/"),
    ("PUT", "/api/v1/principals/"),
)


def needs_admin(method: str, path: str) -> bool:
    """Whether a request with a body goes to an admin-only route."""
    return any(
        method == m and (path == p or (p.endswith("/") and path.startswith(p)))
        for m, p in ADMIN_BODY_ROUTES
    )


def body_cap(settings: Settings, method: str, path: str) -> int:
    """The most bytes a request's body may have."""
    if path == SIGNIN_PATH:
        return SIGNIN_MAX_BYTES
    if method == "POST" and path == INGEST_PATH:
        return settings.max_ingest_body_bytes
    return settings.max_body_bytes


def declared_length(headers: Headers) -> int | None:
    """Content-Length as a number; None when absent or unreadable (then the bytes are counted)."""
    value = headers.get("content-length")
    if value is None or not value.strip().isdigit():
        return None
    return int(value)


class BodyLimitMiddleware:
    """Token before body on the API, and a size cap on every body (see the module docstring)."""

    def __init__(self, app: ASGIApp, runtime: Runtime) -> None:
        self.app = app
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        length = declared_length(headers)
        has_body = "transfer-encoding" in headers or ("content-length" in headers and length != 0)
        if not has_body:
            await self.app(scope, receive, send)  # no body: nothing to bound or to guard
            return
        cap = body_cap(self.runtime.settings, scope["method"], scope["path"])
        if length is not None and length > cap:
            self._count("too_large")
            await too_large_response(cap)(scope, receive, send)
            return
        if scope["path"].startswith(API_PREFIX):
            try:
                await self._authenticate(scope)
            except SuliError as e:
                self._count(e.code)
                await suli_error_response(e)(scope, receive, send)
                return
        await self._capped(scope, receive, send, cap)

    async def _authenticate(self, scope: Scope) -> None:
        deadline = Deadline(self.runtime.settings.deadline_s)
        scope[DEADLINE_KEY] = deadline
        credentials = await bearer(Request(scope))
        session = await authenticate(self.runtime, credentials, client_address(scope), deadline)
        assert credentials is not None and session.principal is not None
        logs.note(principal=session.principal.id)
        self.runtime.limiter.check(session.principal.id)
        if needs_admin(scope["method"], scope["path"]) and not session.admin:
            raise Forbidden("this route needs an admin token")
        scope[SESSION_KEY] = (credentials.credentials, session)

    async def _capped(self, scope: Scope, receive: Receive, send: Send, cap: int) -> None:
        """Run the app with a receive that counts the body and answers 413 past the cap."""
        received = 0
        started = answered = False

        async def counted_receive() -> Message:
            nonlocal received, answered
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > cap:
                    if not started:
                        self._count("too_large")
                        await too_large_response(cap)(scope, receive, send)
                        answered = True
                    # Whatever reads the body stops here; the app's own error answer is dropped.
                    raise BodyTooLarge(cap)
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if answered:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, guarded_send)
        except BodyTooLarge:
            if not answered:  # the app had answered already and then read on: end the stream
                raise

    def _count(self, code: str) -> None:
        self.runtime.metrics.rejected.labels(code=code).inc()
