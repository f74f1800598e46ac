"""The indexing pipeline shared by `suli index`, the HTTP ingestion route and the demo loader."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from suli.backends.base import Backend
from suli.embedding import Embedder
from suli.errors import InvalidInput
from suli.models import Item
from suli.validate import parse_item

BATCH = 64  # items embedded together (a progress step with a slow model)
WRITE_BATCH = 500  # items per write once embedded: fewer, larger bulk requests (= BULK_CHUNK)


@dataclass
class Rejection:
    line: int
    id: str | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "id": self.id, "reason": self.reason}


@dataclass
class Summary:
    read: int = 0
    indexed: int = 0
    rejected: list[Rejection] = field(default_factory=list)
    retried: int = 0

    @property
    def ok(self) -> bool:
        return not self.rejected and self.read == self.indexed

    def to_json(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "indexed": self.indexed,
            "rejected": len(self.rejected),
            "retried": self.retried,
            "rejects": [r.to_json() for r in self.rejected],
        }


def read_lines(stream: IO[str]) -> Iterator[tuple[int, Item | Rejection]]:
    """Parse JSON lines: each non-blank line becomes an Item or a Rejection with its line number."""
    for n, raw in enumerate(stream, start=1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as e:
            yield n, Rejection(n, None, f"invalid JSON: {e.msg} at column {e.colno}")
            continue
        item_id = (
            data.get("id") if isinstance(data, dict) and isinstance(data.get("id"), str) else None
        )
        try:
            yield n, parse_item(data)
        except InvalidInput as e:
            yield n, Rejection(n, item_id, e.message)


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
) -> Summary:
    """Embed valid items in batches of batch_size and upsert them in batches of write_size;
    count every entry as indexed or rejected."""
    summary = Summary()
    pending: list[tuple[int, Item, Sequence[float]]] = []

    def write() -> None:
        if not pending:
            return
        outcome = backend.upsert([(it, vec) for _, it, vec in pending])
        lines = {it.id: n for n, it, _ in pending}  # a rejected id is reported at its last line
        summary.indexed += len(outcome.indexed)
        summary.retried += outcome.retries
        for item_id, reason in outcome.rejected.items():
            summary.rejected.append(Rejection(lines[item_id], item_id, reason))
        pending.clear()

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
                items[(entry.workspace, entry.id)] = (n, entry)
        if items:
            vectors = embedder.embed_documents([it.embed_text() for _, it in items.values()])
            pending.extend((n, it, vectors[i]) for i, (n, it) in enumerate(items.values()))
        if len(pending) >= write_size:
            write()
        if on_progress:
            on_progress(summary)
    write()
    if on_progress:
        on_progress(summary)
    return summary


def index_stream(stream: IO[str], backend: Backend, embedder: Embedder, **kw: Any) -> Summary:
    return index_items(read_lines(stream), backend, embedder, **kw)


def write_rejects(path: str, rejected: list[Rejection]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in rejected:
            f.write(json.dumps(r.to_json()) + "\n")
