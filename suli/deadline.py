"""A request's time budget, and the one in force for the work running now.

The core checks its Deadline between phases. A deadline is also put "in force" (a context
variable) around the request's work, so the backend can give every call it makes a client
timeout no longer than what is left: a read that hangs (a frozen node) ends at the request's
deadline instead of at the client's default timeout, and no abandoned thread outlives it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from suli.errors import DeadlineExceeded

T = TypeVar("T")

_IN_FORCE: ContextVar[Deadline | None] = ContextVar("suli_deadline", default=None)


class Deadline:
    """A request's time budget; each phase checks it and passes the rest on to the backend."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left (negative once past); never raises."""
        return self.end - time.monotonic()

    def remaining(self) -> float:
        left = self.left()
        if left <= 0:
            raise DeadlineExceeded(f"request exceeded its deadline of {self.seconds:g}s")
        return left

    @contextmanager
    def in_force(self) -> Iterator[Deadline]:
        """Make this deadline the one in force here (the sooner one when one already is)."""
        current = _IN_FORCE.get()
        chosen = self if current is None or self.end <= current.end else current
        token = _IN_FORCE.set(chosen)
        try:
            yield chosen
        finally:
            _IN_FORCE.reset(token)

    def run(self, fn: Callable[..., T], *args: object) -> T:
        """fn(*args) with this deadline in force (for work handed to another thread)."""
        with self.in_force():
            return fn(*args)


def in_force() -> Deadline | None:
    """The deadline in force for the current work, if any."""
    return _IN_FORCE.get()
