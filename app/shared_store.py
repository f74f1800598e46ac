"""The store shared by every service process and replica (Redis): limiters and the cursor secret.

Without one, each process counts its own limits and keeps the cursor secret in a file under
SULI_HOME, which serves the workers of one host; replicas on several hosts need either this
store or one SULI_CURSOR_SECRET set on all of them.

The secret kept in the store is never replaced silently: a running process writes its secret
back when the store lost it (a restart with no persistence, a FLUSHALL), and when another
replica wrote a new one first, every running process takes that one (Runtime.check_shared_store)
and logs that cursors it made before are no longer accepted. SULI_CURSOR_SECRET avoids all of
this and is what production should set.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

from pydantic import SecretStr

from app.ratelimit import Limiter, RateLimiter, SharedRateLimiter, SharedStoreUnavailable
from suli.settings import Settings

log = logging.getLogger(__name__)

SECRET_KEY = "suli:cursor-secret"
STORE_TIMEOUT_S = 2.0  # a readiness check must answer well within a probe's period


def limiters(settings: Settings) -> tuple[Limiter, Limiter]:
    """(searches per principal, invalid tokens per client address); the latter has no day quota."""
    if settings.shared_store is None:
        return (
            RateLimiter(settings.rate_per_minute, settings.rate_per_day),
            RateLimiter(settings.bad_token_per_minute, 10**9),
        )
    uri = settings.shared_store.get_secret_value()
    return (
        SharedRateLimiter(uri, settings.rate_per_minute, settings.rate_per_day, "search"),
        SharedRateLimiter(uri, settings.bad_token_per_minute, 10**9, "bad-token"),
    )


def with_shared_cursor_secret(settings: Settings) -> Settings:
    """Settings whose cursor secret every replica shares: the configured one, else the store's.

    The first replica to start writes a random secret (SET NX); every other one reads it.
    """
    if settings.cursor_secret is not None or settings.shared_store is None:
        return settings
    store = SharedStore(settings.shared_store)
    try:
        value = store.cursor_secret(secrets.token_hex(32))
    finally:
        store.close()
    return settings.model_copy(update={"cursor_secret": SecretStr(value)})


class SharedStore:
    """A client of the shared store for readiness and the cursor secret (the limiters keep
    their own, through the `limits` library)."""

    def __init__(self, url: SecretStr) -> None:
        import redis

        self._client: Any = redis.Redis.from_url(
            url.get_secret_value(),
            socket_timeout=STORE_TIMEOUT_S,
            socket_connect_timeout=STORE_TIMEOUT_S,
        )

    def ping(self) -> None:
        import redis

        try:
            self._client.ping()
        except redis.RedisError as e:
            raise SharedStoreUnavailable() from e

    def cursor_secret(self, mine: str) -> str:
        """The store's cursor secret; `mine` is written first when the store holds none."""
        import redis

        try:
            self._client.set(SECRET_KEY, mine, nx=True)
            value = self._client.get(SECRET_KEY)
        except redis.RedisError as e:
            raise SharedStoreUnavailable(
                "the shared store (SULI_SHARED_STORE) does not answer; cannot read the cursor secret"
            ) from e
        if not isinstance(value, bytes) or not value:
            raise SharedStoreUnavailable(
                "the shared store (SULI_SHARED_STORE) holds no cursor secret"
            )
        return value.decode()

    def close(self) -> None:
        self._client.close()
