"""Per-principal rate limits: a burst limit per minute and a daily quota.

Two implementations with one interface (`check`, `peek`):
- RateLimiter counts in the process (a token bucket and a day counter). With several workers
  or replicas each counts on its own, so the effective limits multiply; `suli serve` says so.
- SharedRateLimiter counts in a store every process and replica reads (Redis through the
  `limits` library, whose moving window is one atomic script per hit), so a limit of N admits
  at most N in any minute across all of them.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from suli.errors import BackendUnavailable, RateLimited

log = logging.getLogger(__name__)

DAY_S = 86_400


class SharedStoreUnavailable(BackendUnavailable):
    """The shared store does not answer. Its message names the setting, never the URL, so a
    caller may read it: it says which backend failed (not the search backend)."""

    public = True

    def __init__(
        self, message: str = "the shared store (SULI_SHARED_STORE) does not answer"
    ) -> None:
        super().__init__(message)


class Limiter(Protocol):
    """What the edges call: count one request for a key, or only ask whether it would pass."""

    def check(self, key: str) -> None: ...

    def peek(self, key: str) -> None: ...


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


class SharedRateLimiter:
    """The same limits counted in a shared store (`limits` moving windows, e.g. on Redis).

    The daily quota is tested before and counted after the minute window, so a request refused
    by either is never admitted: a refusal may spend one minute slot, never add one.
    """

    def __init__(self, uri: str, per_minute: int, per_day: int, namespace: str) -> None:
        if per_minute < 1 or per_day < 1:
            raise ValueError("limits must be >= 1")
        from limits import RateLimitItemPerDay, RateLimitItemPerMinute, storage, strategies

        self.per_minute = per_minute
        self.per_day = per_day
        self.namespace = namespace
        self._minute = RateLimitItemPerMinute(per_minute)
        self._day = RateLimitItemPerDay(per_day)
        self._store = storage.storage_from_string(uri, wrap_exceptions=True)
        self._limiter = strategies.MovingWindowRateLimiter(self._store)

    def check(self, key: str) -> None:
        self._admit(key, count=True)

    def peek(self, key: str) -> None:
        self._admit(key, count=False)

    def _admit(self, key: str, *, count: bool) -> None:
        from limits.errors import StorageError

        try:
            if not self._limiter.test(self._day, self.namespace, key):
                raise self._refused(self._day, key, "daily limit", self.per_day)
            if not count:
                if not self._limiter.test(self._minute, self.namespace, key):
                    raise self._refused(self._minute, key, "limit", self.per_minute)
                return
            if not self._limiter.hit(self._minute, self.namespace, key):
                raise self._refused(self._minute, key, "limit", self.per_minute)
            if not self._limiter.hit(self._day, self.namespace, key):
                raise self._refused(self._day, key, "daily limit", self.per_day)
        except StorageError as e:
            log.warning("the shared rate-limit store (SULI_SHARED_STORE) is unreachable: %s", e)
            raise SharedStoreUnavailable(
                "the shared store (SULI_SHARED_STORE) does not answer; cannot count rate limits"
            ) from e

    def _refused(self, item: object, key: str, what: str, limit: int) -> RateLimited:
        stats = self._limiter.get_window_stats(item, self.namespace, key)  # type: ignore[arg-type]
        wait = max(1, math.ceil(stats.reset_time - time.time()))
        per = "" if what == "daily limit" else " per minute"
        return RateLimited(
            f"{what} of {limit} requests{per} reached; retry after {wait}s",
            limit=limit,
            retry_after=wait,
        )


KNOWN_TOKEN_S = 86_400.0  # a token seen valid stays exempt from its address's budget this long
KNOWN_TOKENS_MAX = 100_000  # hashes kept (~15 MB at most), least recently seen dropped first


class KnownTokens:
    """Hashes of tokens this process has seen open a session recently (a bounded LRU).

    Membership only picks a path (exempt from the guessing budget, the one-request search): the
    token is still checked on every request, and a failed check forgets it.
    """

    def __init__(
        self,
        capacity: int = KNOWN_TOKENS_MAX,
        ttl_s: float = KNOWN_TOKEN_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity, self.ttl_s, self.clock = capacity, ttl_s, clock
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, float] = OrderedDict()

    def add(self, token_hash: str) -> None:
        with self._lock:
            self._seen[token_hash] = self.clock()
            self._seen.move_to_end(token_hash)
            while len(self._seen) > self.capacity:
                self._seen.popitem(last=False)

    def recent(self, token_hash: str) -> bool:
        with self._lock:
            at = self._seen.get(token_hash)
            return at is not None and self.clock() - at < self.ttl_s

    def forget(self, token_hash: str) -> None:
        with self._lock:
            self._seen.pop(token_hash, None)

    def __len__(self) -> int:
        return len(self._seen)
