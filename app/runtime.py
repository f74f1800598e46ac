"""What one running app holds: settings, the Searcher (built once), limiter and metrics."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread
from pydantic import SecretStr

from app import shared_store
from app.metrics import Metrics
from app.ratelimit import KnownTokens
from suli.errors import BackendUnavailable, DeadlineExceeded
from suli.service import Deadline, Searcher
from suli.settings import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")

RECONNECT_EVERY_S = 5.0  # while the backend was never reached, retry building it this often


async def run_blocking(fn: Callable[..., T], *args: object, deadline: Deadline | None = None) -> T:
    """Run a blocking core call in the thread pool, giving up at the deadline.

    On timeout the caller gets DeadlineExceeded at once; the thread is abandoned but stays
    bounded: the core checks the same Deadline between phases and passes what is left of it to
    OpenSearch as request and search timeouts, so it stops at its next step.
    """
    call = functools.partial(fn, *args)
    if deadline is None:
        return await anyio.to_thread.run_sync(call)
    left = deadline.remaining()  # raises DeadlineExceeded when already past
    try:
        with anyio.fail_after(left):
            # In force in the thread too: its backend calls end by the deadline.
            bounded = functools.partial(deadline.run, call)
            return await anyio.to_thread.run_sync(bounded, abandon_on_cancel=True)
    except TimeoutError:
        raise DeadlineExceeded(f"request exceeded its deadline of {deadline.seconds:g}s") from None


class Runtime:
    """Per-app state; the Searcher is built once and reused by every request."""

    def __init__(
        self,
        settings: Settings,
        searcher: Searcher | None = None,
        opener: Callable[[Settings], Searcher] | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = Metrics()
        # Searches per principal; invalid tokens per client address (app.tokens), no day quota.
        self.limiter, self.bad_tokens = shared_store.limiters(settings)
        self.known_tokens = KnownTokens()  # tokens seen valid lately (app.tokens)
        self._searcher = searcher
        self._opener = opener
        self._owned = False  # close only what this runtime built
        self._lock = threading.Lock()
        self._last_try = 0.0
        self._last_error: BackendUnavailable | None = None  # why the last build failed
        # The shared store, for readiness and the cursor secret it keeps (app.shared_store).
        self.store = (
            shared_store.SharedStore(settings.shared_store) if settings.shared_store else None
        )
        # Whether this process's cursor secret is the store's (not SULI_CURSOR_SECRET's).
        self._secret_shared = settings.shared_store is not None and settings.cursor_secret is None

    def start(self) -> None:
        """Build the Searcher; when the backend is down, start anyway and retry on requests."""
        if self._searcher is not None:
            return
        try:
            self._open()
        except BackendUnavailable as e:
            log.warning("backend unavailable at start-up, will retry: %s", e.message)

    def _open(self) -> Searcher:
        with self._lock:
            if self._searcher is None:
                self._last_try = time.monotonic()
                assert self._opener is not None
                try:
                    self.settings = shared_store.with_shared_cursor_secret(self.settings)
                    self._searcher = self._opener(self.settings)
                except BackendUnavailable as e:
                    self._last_error = e
                    raise
                self._owned = True
            return self._searcher

    @property
    def built(self) -> Searcher | None:
        """The Searcher when it is built already (never blocks)."""
        return self._searcher

    def searcher(self) -> Searcher:
        """The Searcher, or BackendUnavailable while it could never be built (retried, throttled).

        Once built it is kept: its OpenSearch client reconnects by itself when the node returns.
        """
        if self._searcher is not None:
            return self._searcher
        if time.monotonic() - self._last_try < RECONNECT_EVERY_S:
            # The last failure's own words: it names the backend that failed (the embedded
            # store, OpenSearch or the shared store), never "OpenSearch" for all of them.
            last = self._last_error
            if last is not None:
                raise type(last)(last.message)
            raise BackendUnavailable(
                f"the {self.settings.backend} backend could not be opened; the service retries"
            )
        return self._open()

    def check_shared_store(self) -> None:
        """Readiness of the shared store, and this process's cursor secret kept equal to it.

        SharedStoreUnavailable when the store does not answer. A store that lost the secret
        gets this process's back (SET NX); a store holding another one (a replica that started
        after the store came back empty wrote it first) is taken, with a warning: cursors this
        process made before are refused from now on, as they already are on that replica.
        """
        if self.store is None:
            return
        self.store.ping()
        if not self._secret_shared or self.settings.cursor_secret is None:
            return  # SULI_CURSOR_SECRET is set, or the secret was never read (nothing built)
        mine = self.settings.cursor_secret.get_secret_value()
        theirs = self.store.cursor_secret(mine)
        if theirs == mine:
            return
        log.warning(
            "the cursor secret in the shared store changed (emptied, then written by another "
            "replica); this process now signs cursors with it, and refuses cursors it made "
            "before. Set SULI_CURSOR_SECRET on every replica to avoid this"
        )
        self.settings = self.settings.model_copy(update={"cursor_secret": SecretStr(theirs)})
        searcher = self._searcher
        if searcher is not None:
            searcher.settings = self.settings
            # The Searcher reads its secret from its settings once and caches it: forget it.
            searcher._cursor_secret = None

    def close(self) -> None:
        if self._owned and self._searcher is not None:
            self._searcher.backend.close()
        self._searcher = None
        if self.store is not None:
            self.store.close()
