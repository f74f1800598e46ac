"""Pure pieces of the HTTP edge: rate limiter arithmetic, Server-Timing, size trimming."""

from __future__ import annotations

import pytest

from app.metrics import server_timing
from app.ratelimit import DAY_S, RateLimiter
from app.respond import fit
from suli.errors import RateLimited


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_burst_then_refill_at_the_per_minute_rate() -> None:
    clock = Clock(DAY_S * 100 + 10)
    rl = RateLimiter(per_minute=6, per_day=1000, clock=clock)
    for _ in range(6):
        rl.check("p")
    with pytest.raises(RateLimited) as e:
        rl.check("p")
    assert (e.value.limit, e.value.retry_after) == (6, 10)  # one token per 10 s
    rl.check("q")  # per key
    clock.t += 10
    rl.check("p")
    with pytest.raises(RateLimited):
        rl.check("p")


def test_daily_quota_resets_at_utc_midnight() -> None:
    clock = Clock(DAY_S * 100 + DAY_S - 30)  # 30 s before midnight
    rl = RateLimiter(per_minute=100, per_day=2, clock=clock)
    rl.check("p")
    rl.check("p")
    with pytest.raises(RateLimited) as e:
        rl.check("p")
    assert (e.value.limit, e.value.retry_after) == (2, 30)
    clock.t += 30
    rl.check("p")


def test_refused_requests_are_not_counted() -> None:
    clock = Clock(DAY_S * 5)
    rl = RateLimiter(per_minute=1, per_day=2, clock=clock)
    rl.check("p")
    for _ in range(5):
        with pytest.raises(RateLimited):
            rl.check("p")
    clock.t += 60
    rl.check("p")  # the 5 refusals did not use up the daily quota


def test_server_timing_uses_plain_decimals() -> None:
    assert server_timing({"embed": 3.0, "search": 1234567.8912, "total": 0.25}) == (
        "embed;dur=3, search;dur=1234567.891, total;dur=0.25"
    )


def test_fit_drops_lowest_ranked_results_until_the_body_fits() -> None:
    body = {
        "results": [{"id": f"r{i}", "snippet": "x" * 300} for i in range(10)],
        "truncated": False,
    }
    small = fit(body, 1200)
    assert small["truncated"] is True
    assert [r["id"] for r in small["results"]] == ["r0", "r1", "r2"]
    assert fit(body, 100_000) is body
