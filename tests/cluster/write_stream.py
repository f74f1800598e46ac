"""A continuous stream of JSON lines through the real indexing pipeline, and its final count.

Each line has a unique id and a unique nonce in its body, so the count at the end can be made
by id and by content: a duplicate stored under another `_id` cannot hide. Every `bad_every`-th
line is malformed on purpose: the indexer must report it rejected, and index the rest.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, cast

from opensearchpy import OpenSearch, helpers
from ops_support import item_line

from cli import sample
from indexer.pipeline import Summary, index_items, read_lines
from suli.backends.base import BulkOutcome
from suli.backends.opensearch import OpenSearchBackend
from suli.embedding import FakeEmbedder
from suli.models import Item

NONCE = "nonce-"


class Feed:
    """Lines made on the fly, `rate` per second, until stop(); remembers what it gave."""

    def __init__(self, rate: float, prefix: str, bad_every: int = 97) -> None:
        self.rate = rate
        self.prefix = prefix
        self.bad_every = bad_every
        self.valid: dict[str, str] = {}  # id -> nonce of every well-formed line given
        self.bad_lines: set[int] = set()  # 1-based line numbers of the malformed lines
        self.given = 0
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def __iter__(self) -> Iterator[str]:
        start = time.monotonic()
        n = 0
        while not self._halt.is_set():
            n += 1
            wait = start + n / self.rate - time.monotonic()
            if wait > 0 and self._halt.wait(wait):
                break
            if n % self.bad_every == 0:
                self.bad_lines.add(n)
                line = '{"id": "' + f"{self.prefix}_{n}" + '", "title": '  # cut short
            else:
                item_id, nonce = f"{self.prefix}_{n}", f"{NONCE}{uuid.uuid4().hex}"
                self.valid[item_id] = nonce
                item = Item(item_id, sample.WORKSPACE, f"streamed line {n}", body=nonce)
                line = item_line(item)
            self.given = n
            yield line + "\n"


class Tracked:
    """The real backend; knows when a bulk (an upsert) is in flight, counts them and re-sends."""

    def __init__(self, backend: OpenSearchBackend) -> None:
        self.backend = backend
        self.in_flight = 0
        self.started = threading.Event()  # set when a bulk starts
        self.completed = 0
        self.retries = 0
        self._lock = threading.Lock()

    def upsert(self, items: Sequence[tuple[Item, Sequence[float]]]) -> BulkOutcome:
        with self._lock:
            self.in_flight += 1
        self.started.set()
        try:
            out = self.backend.upsert(items)
        finally:
            with self._lock:
                self.in_flight -= 1
        self.completed += 1
        self.retries += out.retries
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)


class FeedStream:
    """The feed as the text stream `suli index -` reads (read_lines asks readline)."""

    def __init__(self, lines: Iterator[str]) -> None:
        self._lines = lines

    def readline(self, limit: int = -1) -> str:
        return next(self._lines, "")


class StreamIndexer(threading.Thread):
    """index_items over read_lines(feed): the code path of `suli index -`, in a thread."""

    def __init__(
        self, feed: Feed, backend: OpenSearchBackend, batch_size: int = 16, write_size: int = 64
    ) -> None:
        super().__init__(daemon=True)
        self.feed = feed
        self.tracked = Tracked(backend)
        self.batch_size = batch_size
        self.write_size = write_size
        self.summary: Summary | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            lines = read_lines(cast(IO[str], FeedStream(iter(self.feed))))
            self.summary = index_items(
                lines,
                self.tracked,  # type: ignore[arg-type]
                FakeEmbedder(),
                batch_size=self.batch_size,
                write_size=self.write_size,
            )
        except BaseException as e:  # reported by the test
            self.error = e

    def finish(self, timeout: float = 300) -> Summary:
        self.feed.stop()
        self.join(timeout)
        assert not self.is_alive(), "the indexer did not finish"
        assert self.error is None, repr(self.error)
        assert self.summary is not None
        return self.summary


@dataclass
class StreamCount:
    lines: int
    indexed: int
    rejected: int
    lost: list[str] = field(default_factory=list)
    duplicated_ids: list[str] = field(default_factory=list)
    duplicated_nonces: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    wrong_nonce: list[str] = field(default_factory=list)


def count_stream(client: OpenSearch, alias: str, feed: Feed, summary: Summary) -> StreamCount:
    """The indexer's accounting and the stored documents, by id and by nonce."""
    client.indices.refresh(index=alias)
    by_id: Counter[str] = Counter()
    by_nonce: Counter[str] = Counter()
    nonce_of: dict[str, str] = {}
    query = {"query": {"prefix": {"id": f"{feed.prefix}_"}}, "_source": ["id", "body"]}
    for hit in helpers.scan(client, index=alias, query=query, size=1000):
        src = hit["_source"]
        by_id[src["id"]] += 1
        by_nonce[src["body"]] += 1
        nonce_of[src["id"]] = src["body"]
    assert not [n for n in by_nonce if not n.startswith(NONCE)]
    rejected_lines = {r.line for r in summary.rejected}
    assert rejected_lines == feed.bad_lines, sorted(rejected_lines ^ feed.bad_lines)[:10]
    assert summary.read == feed.given
    return StreamCount(
        lines=summary.read,
        indexed=summary.indexed,
        rejected=len(summary.rejected),
        lost=sorted(set(feed.valid) - set(by_id)),
        duplicated_ids=sorted(i for i, c in by_id.items() if c > 1),
        duplicated_nonces=sorted(n for n, c in by_nonce.items() if c > 1),
        unexpected=sorted(set(by_id) - set(feed.valid)),
        wrong_nonce=sorted(i for i, n in nonce_of.items() if feed.valid.get(i) != n),
    )


def assert_exact(count: StreamCount, feed: Feed) -> None:
    """0 lost, 0 duplicated (by id or by content), every line indexed or rejected."""
    assert count.lost == [], f"{len(count.lost)} lost: {count.lost[:10]}"
    assert count.duplicated_ids == [] and count.duplicated_nonces == []
    assert count.unexpected == [] and count.wrong_nonce == []
    assert count.indexed == len(feed.valid)
    assert count.indexed + count.rejected == count.lines
