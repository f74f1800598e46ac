"""A small least-recently-used map (the embedded store's per-generation reads, the OpenSearch
backend's boards known per visibility document)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Lru(Generic[T]):
    """A small least-recently-used map (callers hold the lock)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[tuple[Any, ...], T] = OrderedDict()

    def get(self, key: tuple[Any, ...]) -> T | None:
        got = self.data.get(key)
        if got is not None:
            self.data.move_to_end(key)
        return got

    def put(self, key: tuple[Any, ...], value: T) -> None:
        self.data[key] = value
        while len(self.data) > self.size:
            self.data.popitem(last=False)

    def discard(self, key: tuple[Any, ...]) -> None:
        self.data.pop(key, None)
