"""The shared limiter's edges that need no Redis: a store that does not answer is a clear 503
naming the setting, never a silently skipped limit; bad limits are refused."""

from __future__ import annotations

import socket

import pytest

from app.ratelimit import SharedRateLimiter
from app.shared_store import limiters
from suli.errors import BackendUnavailable
from suli.settings import Settings


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens


def test_an_unreachable_store_refuses_with_the_setting_named() -> None:
    limiter = SharedRateLimiter(f"redis://127.0.0.1:{_closed_port()}/0", 5, 100, "search")
    for call in (limiter.check, limiter.peek):
        with pytest.raises(BackendUnavailable, match="SULI_SHARED_STORE"):
            call("prn_a")


def test_limits_below_one_are_refused() -> None:
    with pytest.raises(ValueError):
        SharedRateLimiter("memory://", 0, 100, "search")


def test_the_store_is_used_only_when_configured() -> None:
    alone, _ = limiters(Settings(backend="embedded"))
    shared, bad = limiters(Settings(backend="embedded", shared_store="memory://"))
    assert type(alone).__name__ == "RateLimiter"
    assert isinstance(shared, SharedRateLimiter) and isinstance(bad, SharedRateLimiter)
    assert (shared.namespace, bad.namespace) == ("search", "bad-token")


def test_a_memory_store_admits_exactly_the_limit_in_a_minute() -> None:
    limiter = SharedRateLimiter("memory://", 3, 100, "search")
    for _ in range(3):
        limiter.check("prn_a")
    with pytest.raises(Exception, match="limit of 3 requests per minute") as refused:
        limiter.check("prn_a")
    assert refused.value.retry_after >= 1  # type: ignore[attr-defined]
    limiter.check("prn_b")  # keys count apart
