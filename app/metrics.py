"""Prometheus metrics: requests and latency per route, per-phase latency, degraded and rejected.

Each app gets its own registry, so several apps in one process (tests) do not collide.
With several uvicorn workers each worker exposes its own counters.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from http import HTTPStatus

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Every label takes its values from a known set: a label copied from the request (the raw method,
# the raw path) let one client add series without end (3,000 invented methods took /metrics from
# 77 kB to 5.5 MB, 10,000 long ones to 401 MB, and the memory was never freed).
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
OTHER_METHOD = "other"
UNMATCHED_ROUTE = "unmatched"
STATUSES = frozenset(s.value for s in HTTPStatus)

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0)


class Metrics:
    """The service's collectors, registered in one registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "suli_http_requests",
            "HTTP requests by route template, method and status.",
            ("route", "method", "status"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "suli_http_request_duration_seconds",
            "HTTP request latency by route template.",
            ("route", "method"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.phase = Histogram(
            "suli_phase_duration_seconds",
            "Per-phase latency of search and related requests (acl, embed, legs, fuse, ...).",
            ("route", "phase"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.degraded = Counter(
            "suli_degraded_responses",
            "Responses served without one of their legs, by leg.",
            ("leg",),
            registry=self.registry,
        )
        self.rejected = Counter(
            "suli_rejected_requests",
            "Requests answered with an error, by error code.",
            ("code",),
            registry=self.registry,
        )
        self.items = Counter(
            "suli_ingested_items",
            "Items sent to the ingestion route, by outcome (indexed or rejected).",
            ("status",),
            registry=self.registry,
        )

    def observe_phases(self, route: str, timings_ms: Mapping[str, float]) -> None:
        for phase, ms in timings_ms.items():
            self.phase.labels(route=route, phase=phase).observe(ms / 1000.0)


def server_timing(timings_ms: Mapping[str, float]) -> str:
    """{'embed': 3.2, 'total': 9.1} -> 'embed;dur=3.2, total;dur=9.1' (W3C Server-Timing).

    Plain decimals (never exponent notation, which the header's number grammar does not allow).
    """
    return ", ".join(
        f"{name};dur={ms:.3f}".rstrip("0").rstrip(".") for name, ms in timings_ms.items()
    )


def method_label(method: str) -> str:
    """The standard methods by name, any other as one value."""
    return method if method in METHODS else OTHER_METHOD


def route_label(scope: Scope) -> str:
    """The matched route's template (a bounded set: the app's routes), else one value."""
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) and path else UNMATCHED_ROUTE


def status_label(status: int) -> str:
    """A registered HTTP status by its code, any other by its class (`5xx`)."""
    return str(status) if status in STATUSES else f"{max(1, min(status // 100, 5))}xx"


class MetricsMiddleware:
    """Counts and times every HTTP request by its route template (not its raw path).

    It also adds `Server-Timing: app;dur=…` to responses that carry none of their own, so
    every response has a timing, errors included.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = list(message.get("headers", []))
                if not any(k.lower() == b"server-timing" for k, _ in headers):
                    ms = (time.perf_counter() - t0) * 1000
                    headers.append((b"server-timing", f"app;dur={ms:.3f}".encode()))
                    message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            name, method = route_label(scope), method_label(scope.get("method", ""))
            self.metrics.requests.labels(
                route=name, method=method, status=status_label(status)
            ).inc()
            self.metrics.latency.labels(route=name, method=method).observe(time.perf_counter() - t0)
