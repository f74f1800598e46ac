"""The service's /mcp endpoint: bearer auth and rate limits, then the SDK's streamable HTTP.

Long-lived GET streams are bounded: a few per principal, re-authenticated and charged against
the rate limit while open, closed when their token stops being good.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Message, Receive, Scope, Send

from app import logs
from app.errors import suli_error_response
from app.runtime import Runtime, run_blocking
from app.tokens import client_address, session_for
from suli.auth import authenticate
from suli.errors import BackendUnavailable, RateLimited, SuliError, Unauthorized
from suli.models import Principal
from suli.service import Deadline

log = logging.getLogger(__name__)

PRINCIPAL_KEY = "suli.principal"  # ASGI scope key: the principal McpEndpoint authenticated
ADMIN_KEY = "suli.admin"  # ASGI scope key: whether its token is an admin's (timings: app.respond)


def _bearer(scope: Scope) -> str | None:
    for key, value in scope.get("headers", []):
        if key == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" and token.strip() else None
    return None


class OpenStreams:
    """How many GET /mcp streams each principal holds open (per worker process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: Counter[str] = Counter()

    def try_open(self, key: str, cap: int) -> bool:
        with self._lock:
            if self._open[key] >= cap:
                return False
            self._open[key] += 1
            return True

    def close(self, key: str) -> None:
        with self._lock:
            self._open[key] -= 1
            if self._open[key] <= 0:
                del self._open[key]


class McpEndpoint:
    """ASGI endpoint at /mcp: bearer auth and rate limit, then the SDK's streamable HTTP.

    Stateless with JSON responses: every POST stands alone (so several uvicorn workers work
    without sticky sessions) and its principal comes from its own bearer token.
    """

    def __init__(self, server: MCPServer, runtime: Runtime) -> None:
        self.server = server
        self.runtime = runtime
        self._handle: Callable[[Scope, Receive, Send], Awaitable[None]] | None = None
        self.streams = OpenStreams()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run a fresh session manager for one app lifespan (the SDK's runs only once)."""
        self.server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            # Auth is a bearer header only (no cookie), which a DNS-rebinding page cannot
            # send, so the Host allow-list (which would refuse every non-loopback name) is off.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = self.server.session_manager
        async with manager.run():
            self._handle = manager.handle_request
            try:
                yield
            finally:
                self._handle = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        deadline = Deadline(self.runtime.settings.deadline_s)
        try:
            if self._handle is None:
                raise BackendUnavailable(
                    "the MCP endpoint is not running (app lifespan not started)"
                )
            token = _bearer(scope)
            if token is None:
                raise Unauthorized("missing bearer token (header `Authorization: Bearer <token>`)")
            session = await session_for(self.runtime, token, client_address(scope), deadline)
            principal = session.principal
            assert principal is not None
            logs.note(principal=principal.id)
            self.runtime.limiter.check(principal.id)
            stream = scope.get("method") == "GET"
            cap = self.runtime.settings.mcp_streams_per_principal
            if stream and not self.streams.try_open(principal.id, cap):
                raise RateLimited(
                    f"at most {cap} open MCP streams per principal; close one first",
                    limit=cap,
                    retry_after=max(1, math.ceil(self.runtime.settings.mcp_stream_check_s)),
                )
        except SuliError as e:
            await self._refuse(e, scope, receive, send)
            return
        scope = {**scope, PRINCIPAL_KEY: principal, ADMIN_KEY: session.admin}
        if not stream:
            await self._handle(scope, receive, send)
            return
        try:
            await self._watched(scope, receive, send, token, principal)
        finally:
            self.streams.close(principal.id)

    async def _refuse(self, e: SuliError, scope: Scope, receive: Receive, send: Send) -> None:
        self.runtime.metrics.rejected.labels(code=e.code).inc()
        if isinstance(e, BackendUnavailable):
            log.warning("MCP request refused: %s", e.message)
        response = suli_error_response(e)
        if isinstance(e, Unauthorized):
            response.headers["WWW-Authenticate"] = "Bearer"
        await response(scope, receive, send)

    async def _watched(
        self, scope: Scope, receive: Receive, send: Send, token: str, principal: Principal
    ) -> None:
        """Serve a long-lived SSE stream while its token stays good.

        Every mcp_stream_check_s the token is authenticated again (a revoked token's streams
        close within that period) and the stream is counted as one more request against the
        principal's rate limit, so holding streams open is not free. When either check fails
        the SDK's handler is cancelled and the chunked response is ended cleanly.
        """
        assert self._handle is not None
        handle = self._handle
        started = ended = False

        async def tracked(message: Message) -> None:
            nonlocal started, ended
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                ended = True
            await send(message)

        stopped: SuliError | None = None

        async with anyio.create_task_group() as tg:

            async def serve() -> None:
                await handle(scope, receive, tracked)
                tg.cancel_scope.cancel()

            async def watch() -> None:
                nonlocal stopped
                settings = self.runtime.settings
                while True:
                    await anyio.sleep(settings.mcp_stream_check_s)
                    try:
                        deadline = Deadline(settings.deadline_s)
                        searcher = await run_blocking(self.runtime.searcher, deadline=deadline)
                        await run_blocking(authenticate, searcher.backend, token, deadline=deadline)
                        self.runtime.limiter.check(principal.id)
                    except SuliError as e:  # revoked, rate-limited or unverifiable: fail closed
                        stopped = e
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(serve)
            tg.start_soon(watch)
        if stopped is not None:
            log.info("closed an MCP stream of %s: %s", principal.id, stopped.message)
            self.runtime.metrics.rejected.labels(code=stopped.code).inc()
            if not started:
                await self._refuse(stopped, scope, receive, send)
                return
        if started and not ended:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
