"""The FastAPI app: create_app(settings) wires the routes, the error table and the lifespan."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import Depends, FastAPI
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from app import api_docs, errors, mcp_server, routes_admin, routes_ops, routes_search, web
from app.bodylimit import BodyLimitMiddleware
from app.deps import single_valued
from app.logs import RequestLogMiddleware
from app.metrics import MetricsMiddleware
from app.runtime import Runtime
from suli.errors import SuliError
from suli.service import Searcher
from suli.settings import Settings

log = logging.getLogger(__name__)


def _open_searcher(settings: Settings) -> Searcher:
    from suli.core import open_searcher

    return open_searcher(settings)


SHARED_CHECK_S = 5.0  # how soon a process notices the shared store lost or changed its secret


async def _watch_shared_store(runtime: Runtime) -> None:
    """Check the shared store every SHARED_CHECK_S, between readiness probes too (a process
    nobody probes still restores or takes the cursor secret: Runtime.check_shared_store)."""
    while True:
        await anyio.sleep(SHARED_CHECK_S)
        try:
            await anyio.to_thread.run_sync(runtime.check_shared_store)
        except SuliError as e:
            log.warning("shared store check failed: %s", e.message)


def create_app(
    settings: Settings | None = None,
    *,
    searcher: Searcher | None = None,
    opener: Callable[[Settings], Searcher] = _open_searcher,
) -> FastAPI:
    """The app over settings (default: SULI_* environment); `searcher` injects a built core."""
    settings = settings or Settings()
    runtime = Runtime(settings, searcher=searcher, opener=opener)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Heavy objects (client, embedding model) are built once, off the event loop.
        await anyio.to_thread.run_sync(runtime.start)
        try:
            async with anyio.create_task_group() as tg:
                if runtime.store is not None:
                    tg.start_soon(_watch_shared_store, runtime)
                try:
                    yield
                finally:
                    tg.cancel_scope.cancel()
        finally:
            await anyio.to_thread.run_sync(runtime.close)

    app = FastAPI(
        title="Suli query service",
        version="1",
        summary="Permission-aware hybrid search over work items.",
        description=(
            "Every `/api/v1` route needs `Authorization: Bearer <token>`; ingestion and ACL "
            "routes need an admin token. Errors share one shape: "
            '`{"error": {"code", "message", "field"?}}`.'
        ),
        lifespan=lifespan,
        dependencies=[Depends(single_valued)],
        docs_url=None,  # served from package files by api_docs (works offline)
        redoc_url=None,
    )
    app.state.runtime = runtime
    errors.install(app)
    # Outermost last: proxies rewrite the client address and scheme first, metrics count every
    # answer, the body limit's included.
    app.add_middleware(BodyLimitMiddleware, runtime=runtime)
    app.add_middleware(MetricsMiddleware, metrics=runtime.metrics)
    app.add_middleware(RequestLogMiddleware)
    if settings.trusted_proxies:
        proxies = [str(n) for n in settings.trusted_proxy_networks]
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=proxies)
    app.include_router(routes_search.router)
    app.include_router(routes_admin.router)
    app.include_router(routes_ops.router)
    api_docs.install(app)
    web.install(app)
    mcp_server.mount(app)
    return app
