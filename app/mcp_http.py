"""The service's /mcp endpoint: bearer auth and rate limits, then the SDK's streamable HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

from app.errors import suli_error_response
from app.runtime import Runtime, run_blocking
from suli.auth import authenticate
from suli.errors import BackendUnavailable, SuliError, Unauthorized
from suli.service import Deadline

PRINCIPAL_KEY = "suli.principal"  # ASGI scope key: the principal McpEndpoint authenticated


def _bearer(scope: Scope) -> str | None:
    for key, value in scope.get("headers", []):
        if key == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" and token.strip() else None
    return None


class McpEndpoint:
    """ASGI endpoint at /mcp: bearer auth and rate limit, then the SDK's streamable HTTP.

    Stateless with JSON responses: every POST stands alone (so several uvicorn workers work
    without sticky sessions) and its principal comes from its own bearer token.
    """

    def __init__(self, server: MCPServer, runtime: Runtime) -> None:
        self.server = server
        self.runtime = runtime
        self._handle: Callable[[Scope, Receive, Send], Awaitable[None]] | None = None

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
            searcher = await run_blocking(self.runtime.searcher, deadline=deadline)
            principal, _ = await run_blocking(
                authenticate, searcher.backend, token, deadline=deadline
            )
            self.runtime.limiter.check(principal.id)
        except SuliError as e:
            self.runtime.metrics.rejected.labels(code=e.code).inc()
            response = suli_error_response(e)
            if isinstance(e, Unauthorized):
                response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send)
            return
        await self._handle({**scope, PRINCIPAL_KEY: principal}, receive, send)
