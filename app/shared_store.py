"""The store shared by every service process and replica (Redis): limiters and the cursor secret.

Without one, each process counts its own limits and keeps the cursor secret in a file under
SULI_HOME, which serves the workers of one host; replicas on several hosts need either this
store or one SULI_CURSOR_SECRET set on all of them.
"""

from __future__ import annotations

import secrets

from pydantic import SecretStr

from app.ratelimit import Limiter, RateLimiter, SharedRateLimiter
from suli.errors import BackendUnavailable
from suli.settings import Settings

SECRET_KEY = "suli:cursor-secret"


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
    import redis

    client = redis.Redis.from_url(settings.shared_store.get_secret_value())
    try:
        client.set(SECRET_KEY, secrets.token_hex(32), nx=True)
        value = client.get(SECRET_KEY)
    except redis.RedisError as e:
        raise BackendUnavailable(
            "the shared store (SULI_SHARED_STORE) is unreachable; cannot read the cursor secret"
        ) from e
    finally:
        client.close()
    if not isinstance(value, bytes) or not value:
        raise BackendUnavailable("the shared store (SULI_SHARED_STORE) holds no cursor secret")
    return settings.model_copy(update={"cursor_secret": SecretStr(value.decode())})
