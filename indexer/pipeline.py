"""The indexing pipeline shared by `suli index`, the HTTP ingestion route and the demo loader."""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, cast

import opensearchpy

from indexer.lines import (
    MAX_LINE_BYTES,
    Rejection,
    Supplied,
    raw_lines,
    read_lines,
    write_rejects,
)
from indexer.workers import EmbedPool, Job
from suli.backends.base import KEEP_GONE, Backend, BulkOutcome
from suli.embedding import CachedEmbedder, Embedder, FloatArray, VectorCache, embed_hash
from suli.errors import IndexingError, SuliError
from suli.models import Item

__all__ = [
    "MAX_LINE_BYTES",
    "Rejection",
    "Summary",
    "Supplied",
    "in_part",
    "index_items",
    "index_stream",
    "raw_lines",
    "read_lines",
    "write_rejects",
]


class WriteFailed(IndexingError):
    """The store did not take a write after the backend's retries: the run stops."""


BATCH = 64  # items embedded together (a progress step with a slow model)
WRITE_BATCH = 500  # items per write once embedded: fewer, larger bulk requests (= BULK_CHUNK)


@dataclass
class Summary:
    read: int = 0
    indexed: int = 0
    rejected: list[Rejection] = field(default_factory=list)
    retried: int = 0
    embedded: int = 0  # items the model embedded
    reused: int = 0  # items whose stored vector was made from the same text: no model call
    cached: int = 0  # items whose vector came from the vector cache (SULI_VECTOR_CACHE)
    supplied: int = 0  # items that brought their own vector (`vector` + `vector_model`)
    stopped: str | None = None  # why the run stopped early (Ctrl-C, a dead worker, failed writes)

    @property
    def ok(self) -> bool:
        return not self.rejected and self.read == self.indexed and self.stopped is None

    @property
    def unwritten(self) -> int:
        """Lines read but neither written nor rejected (only when the run stopped early)."""
        return self.read - self.indexed - len(self.rejected)

    def to_json(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "indexed": self.indexed,
            "rejected": len(self.rejected),
            "retried": self.retried,
            "embedded": self.embedded,
            "reused": self.reused,
            "cached": self.cached,
            "supplied": self.supplied,
            "stopped": self.stopped,
            "unwritten": self.unwritten,
            "rejects": [r.to_json() for r in self.rejected],
        }


def _batches(
    it: Iterable[tuple[int, Item | Rejection]], size: int
) -> Iterator[list[tuple[int, Item | Rejection]]]:
    batch: list[tuple[int, Item | Rejection]] = []
    for x in it:
        batch.append(x)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def index_items(
    entries: Iterable[tuple[int, Item | Rejection]],
    backend: Backend,
    embedder: Embedder,
    on_progress: Callable[[Summary], None] | None = None,
    batch_size: int = BATCH,
    write_size: int = WRITE_BATCH,
    texts: dict[int, str] | None = None,
    pool: EmbedPool | None = None,
    supplied: dict[int, Supplied] | None = None,
) -> Summary:
    """Embed valid items in batches of batch_size and upsert them in batches of write_size;
    count every entry as indexed or rejected.

    texts: the lines of the items read and not yet written, by line number (read_lines fills
    it); an item the store refuses is reported with its line, and written lines are dropped.
    pool: embed in its worker processes instead of calling embedder here; at most two batches
    per worker are in flight, so reading waits for the model (bounded memory on a stream).
    A run stopped by Ctrl-C, a dead worker or a store that no longer takes writes (after the
    backend's own retries) returns what it wrote, with `stopped` set.
    supplied: vectors that lines brought (read_lines fills it): used at unit length when they
    fit the model and dimension, else the line is rejected with the reason.
    The embedder's vector cache (a CachedEmbedder) is read and written here, in this process,
    so worker processes fill the same cache and the summary tells cached from embedded."""
    texts = {} if texts is None else texts
    supplied = {} if supplied is None else supplied
    summary = Summary()
    cache = embedder.cache if isinstance(embedder, CachedEmbedder) else None
    model = embedder.inner if isinstance(embedder, CachedEmbedder) else embedder

    def embed_now(texts_: list[str]) -> FloatArray:
        vectors = model.embed_documents(texts_)
        if cache is not None:
            cache.put_many(embedder.name, texts_, vectors)
        return vectors

    pending: list[tuple[int, Item, Sequence[float] | None]] = []
    in_flight: deque[tuple[Planned, Job | None]] = deque()
    limit = 2 * pool.workers if pool else 0

    def write() -> None:
        if not pending:
            return
        outcome = _upsert(backend, [(it, vec) for _, it, vec in pending])
        lines = {it.id: n for n, it, _ in pending}  # a rejected id is reported at its last line
        summary.indexed += len(outcome.indexed)
        summary.retried += outcome.retries
        rejected = dict(outcome.rejected)
        # A kept vector the store refused (the item was rewritten, deleted or its primary moved
        # since its hash was read): embed it after all and write it whole, once.
        again = [it for _, it, vec in pending if vec is None and rejected.get(it.id) == KEEP_GONE]
        if again:
            redo = Planned.of([(0, it) for it in again], None, summary, {}, cache, embedder.name)
            summary.reused -= len(again)
            rows = redo.rows(embed_now(redo.texts) if redo.texts else None)
            retry = _upsert(backend, [(it, vec) for _, it, vec in rows])
            for it in again:
                rejected.pop(it.id)
            summary.indexed += len(retry.indexed)
            summary.retried += retry.retries + len(again)
            rejected.update(retry.rejected)
        for item_id, reason in rejected.items():
            n = lines[item_id]
            summary.rejected.append(Rejection(n, item_id, reason, texts.get(n)))
        for n, _, _ in pending:
            texts.pop(n, None)
        pending.clear()

    def finish_oldest() -> None:
        planned, future = in_flight.popleft()
        vectors = EmbedPool.result(future) if future is not None else None
        if vectors is not None and cache is not None:
            cache.put_many(embedder.name, planned.texts, vectors)
        pending.extend(planned.rows(vectors))
        if len(pending) >= write_size:
            write()

    try:
        for batch in _batches(entries, batch_size):
            summary.read += len(batch)
            # Within one batch the last line for an item wins, as it would across batches; an
            # item is (workspace, id): the same id in two workspaces is two items.
            items: dict[tuple[str, str], tuple[int, Item]] = {}
            for n, entry in batch:
                if isinstance(entry, Rejection):
                    summary.rejected.append(entry)
                else:
                    if (entry.workspace, entry.id) in items:
                        summary.indexed += 1  # the earlier line is replaced by this upsert
                        replaced = items[(entry.workspace, entry.id)][0]
                        texts.pop(replaced, None)
                        supplied.pop(replaced, None)
                    items[(entry.workspace, entry.id)] = (n, entry)
            given: dict[int, list[float]] = {}  # checked vectors the lines brought
            for key, (n, it) in list(items.items()):
                if n not in supplied:
                    continue
                got = supplied.pop(n).check(embedder.name, backend.dimension)
                if isinstance(got, str):
                    summary.rejected.append(Rejection(n, it.id, got, texts.pop(n, None)))
                    del items[key]
                else:
                    given[n] = got
            if items:
                planned = Planned.of(
                    list(items.values()), backend, summary, given, cache, embedder.name
                )
                if pool is None:
                    found = embed_now(planned.texts) if planned.texts else None
                    pending.extend(planned.rows(found))
                else:
                    future = pool.submit(planned.texts) if planned.texts else None
                    in_flight.append((planned, future))
                    while len(in_flight) > limit:
                        finish_oldest()
            if len(pending) >= write_size:
                write()
            if on_progress:
                on_progress(summary)
        while in_flight:
            finish_oldest()
        write()
    except (KeyboardInterrupt, SuliError) as e:
        summary.stopped = "interrupted" if isinstance(e, KeyboardInterrupt) else e.message
    summary.rejected.sort(key=lambda r: r.line)  # in file order, whichever step refused a line
    if on_progress:
        on_progress(summary)
    return summary


@dataclass
class Planned:
    """One batch's items: the vectors they brought or the store holds, and the texts left
    for the model."""

    items: list[tuple[int, Item]]
    ready: dict[int, Sequence[float] | None]  # position -> vector brought, None: keep stored
    todo: list[int]  # positions in items the model must embed
    texts: list[str]

    @classmethod
    def of(
        cls,
        items: list[tuple[int, Item]],
        backend: Backend | None,
        summary: Summary,
        given: Mapping[int, Sequence[float]],
        cache: VectorCache | None = None,
        model: str = "",
    ) -> Planned:
        """Take a vector the line brought (checked), else reuse a stored one made from the
        same text by the same model (its embed hash matches; no backend: none is), else one
        the vector cache holds for the text; count what is left for the model."""
        stored = (
            backend.stored_hashes([(it.workspace, it.id) for _, it in items]) if backend else {}
        )
        ready: dict[int, Sequence[float] | None] = {}
        todo: list[int] = []
        for k, (n, it) in enumerate(items):
            got = stored.get((it.workspace, it.id))
            if n in given:
                ready[k] = given[n]
                summary.supplied += 1
            elif backend is not None and got == embed_hash(backend.model, it.embed_text()):
                ready[k] = None  # the store keeps its vector: nothing to send
                summary.reused += 1
            else:
                todo.append(k)
        if cache is not None and todo:
            found = cache.get_many(model, [items[k][1].embed_text() for k in todo])
            left = []
            for k, vec in zip(todo, found, strict=True):
                if vec is None:
                    left.append(k)
                else:
                    ready[k] = cast(Sequence[float], vec)  # a row of float32, as the model's
            summary.cached += len(todo) - len(left)
            todo = left
        summary.embedded += len(todo)
        return cls(items, ready, todo, [items[k][1].embed_text() for k in todo])

    def rows(self, vectors: FloatArray | None) -> list[tuple[int, Item, Sequence[float] | None]]:
        """(line, item, vector) in input order, given the model's vectors for `texts`."""
        made = dict(zip(self.todo, vectors if vectors is not None else [], strict=True))
        return [(n, it, self.ready[k] if k in self.ready else made[k])
                for k, (n, it) in enumerate(self.items)]  # fmt: skip


def _upsert(backend: Backend, rows: list[tuple[Item, Sequence[float] | None]]) -> BulkOutcome:
    """One write; a store that still fails after its own retries (connection errors and
    timeouts are retried with back-off inside the backend) stops the run with the reason
    as one line, never a traceback."""
    try:
        return backend.upsert(rows)
    except SuliError:
        raise
    except opensearchpy.ConnectionTimeout as e:
        raise WriteFailed(f"OpenSearch did not answer a write of {len(rows)} items in time, "
                          "after retries with back-off") from e  # fmt: skip
    except opensearchpy.OpenSearchException as e:
        raise WriteFailed(
            f"OpenSearch refused a write of {len(rows)} items after retries: {_brief(e)}"
        ) from e


def _brief(e: Exception) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 200 else text[:199] + "…"


def in_part(entry: Item | Rejection, n: int, part: int, parts: int) -> bool:
    """Whether a line belongs to part `part` (1-based) of `parts`: items by a stable hash of
    (workspace, id), so every process agrees and a re-run takes the same lines; a line with no
    item (rejected before its id was known) by its line number, so it is reported once."""
    if isinstance(entry, Item):
        digest = hashlib.sha256(f"{entry.workspace}\0{entry.id}".encode()).digest()
        return int.from_bytes(digest[:8], "big") % parts == part - 1
    return (n - 1) % parts == part - 1


def index_stream(
    stream: IO[bytes] | IO[str],
    backend: Backend,
    embedder: Embedder,
    part: tuple[int, int] = (1, 1),
    **kw: Any,
) -> Summary:
    """Index a JSON-lines stream; part (i, n) takes only the i-th of n stable shares of it."""
    texts: dict[int, str] = {}
    supplied: dict[int, Supplied] = {}
    entries = read_lines(stream, texts, supplied)
    if part[1] > 1:
        entries = _only_part(entries, texts, *part)
    return index_items(entries, backend, embedder, texts=texts, supplied=supplied, **kw)


def _only_part(
    entries: Iterable[tuple[int, Item | Rejection]], texts: dict[int, str], part: int, parts: int
) -> Iterator[tuple[int, Item | Rejection]]:
    for n, entry in entries:
        if in_part(entry, n, part, parts):
            yield n, entry
        else:
            texts.pop(n, None)  # another part's line: not ours to keep or report
