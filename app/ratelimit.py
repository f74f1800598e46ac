"""Per-principal rate limits: a burst limit per minute (token bucket) and a daily quota.

The counters live in the process: with several uvicorn workers each worker counts on its own,
so the effective limits are the configured ones times the number of workers.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from suli.errors import RateLimited

DAY_S = 86_400


class RateLimiter:
    """Admits a request for a key, or raises RateLimited with the limit and seconds to wait."""

    def __init__(
        self, per_minute: int, per_day: int, clock: Callable[[], float] = time.time
    ) -> None:
        if per_minute < 1 or per_day < 1:
            raise ValueError("limits must be >= 1")
        self.per_minute = per_minute
        self.per_day = per_day
        self.clock = clock
        self._rate = per_minute / 60.0  # tokens per second
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)
        self._days: dict[str, tuple[int, int]] = {}  # key -> (UTC day number, requests)

    def check(self, key: str) -> None:
        """Count one request for key; nothing is counted when it is refused."""
        self._admit(key, count=True)

    def peek(self, key: str) -> None:
        """Raise RateLimited when key's next request would be refused; count nothing."""
        self._admit(key, count=False)

    def _admit(self, key: str, *, count: bool) -> None:
        with self._lock:
            now = self.clock()
            day = int(now // DAY_S)
            seen_day, used = self._days.get(key, (day, 0))
            if seen_day != day:
                used = 0
            if used >= self.per_day:
                wait = max(1, math.ceil((day + 1) * DAY_S - now))
                raise RateLimited(
                    f"daily limit of {self.per_day} requests reached; retry after {wait}s",
                    limit=self.per_day,
                    retry_after=wait,
                )
            tokens, at = self._buckets.get(key, (float(self.per_minute), now))
            # A full bucket allows a burst of per_minute requests; it refills evenly over a minute.
            tokens = min(float(self.per_minute), tokens + (now - at) * self._rate)
            if tokens < 1.0:
                wait = max(1, math.ceil((1.0 - tokens) / self._rate))
                if count:
                    self._buckets[key] = (tokens, now)
                raise RateLimited(
                    f"limit of {self.per_minute} requests per minute reached; retry after {wait}s",
                    limit=self.per_minute,
                    retry_after=wait,
                )
            if count:
                self._buckets[key] = (tokens - 1.0, now)
                self._days[key] = (day, used + 1)
