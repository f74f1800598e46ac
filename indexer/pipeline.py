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
# The longest line read: a maximal valid item (a 1M-character body, \u-escaped) fits; a
# longer one is rejected without being held in memory whole.
MAX_LINE_BYTES = 8 << 20
REJECT_TEXT_CHARS = 65_536  # what a rejects file keeps of a line too long to read whole
BOM = "\ufeff"


@dataclass
class Rejection:
    line: int
    id: str | None
    reason: str
    text: str | None = None  # the line as read (invalid UTF-8 replaced); None when not a line

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "id": self.id, "reason": self.reason, "text": self.text}


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


def raw_lines(stream: IO[bytes] | IO[str]) -> Iterator[tuple[int, bytes | str, bool]]:
    """(line number, line, too long) for every line; a line over MAX_LINE_BYTES is cut there
    and the rest of it skipped in bounded reads, so memory stays bounded."""
    n = 0
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        n += 1
        nl = b"\n" if isinstance(raw, bytes) else "\n"
        too_long = len(raw) > MAX_LINE_BYTES and not raw.endswith(nl)  # type: ignore[arg-type]
        if too_long:
            rest = raw
            while rest and not rest.endswith(nl):  # type: ignore[arg-type]
                rest = stream.readline(MAX_LINE_BYTES)
        yield n, raw, too_long


def _decode(n: int, raw: bytes | str) -> str | Rejection:
    """A line as text, or a Rejection naming the first byte that is not UTF-8."""
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        text = raw.decode("utf-8", "replace").rstrip("\r\n")
        return Rejection(n, None, f"invalid UTF-8: byte 0x{raw[e.start]:02x} at byte {e.start + 1}",
                         text)  # fmt: skip


def read_lines(
    stream: IO[bytes] | IO[str], texts: dict[int, str] | None = None
) -> Iterator[tuple[int, Item | Rejection]]:
    """Parse JSON lines: each non-blank line becomes an Item or a Rejection with its line number.

    Read as bytes and decoded line by line, so one bad line never stops the run: invalid
    UTF-8, JSON nested past the parser's limit and over-long lines are rejected like any
    other bad line. A byte-order mark starts line 1 of files some editors write: dropped
    there (elsewhere it is not a file's marker, and json refuses it). JSON error columns are
    json's (1-based characters of the line as an editor shows it, BOM not counted).
    texts: where the lines of valid items are kept until written (see index_items).
    """
    for n, raw, too_long in raw_lines(stream):
        if too_long:
            text = raw[:REJECT_TEXT_CHARS]
            if isinstance(text, bytes):
                text = text.decode("utf-8", "replace")
            yield n, Rejection(n, None, f"line longer than {MAX_LINE_BYTES} bytes", text)
            continue
        line = _decode(n, raw)
        if isinstance(line, Rejection):
            yield n, line
            continue
        if n == 1:
            line = line.removeprefix(BOM)
        if not line.strip():
            continue
        text = line.rstrip("\r\n")
        try:
            data = json.loads(line)
        except json.JSONDecodeError as e:
            yield n, Rejection(n, None, f"invalid JSON: {e.msg} at column {e.colno}", text)
            continue
        except RecursionError:
            reason = "invalid JSON: nested deeper than the parser allows"
            yield n, Rejection(n, None, reason, text)
            continue
        item_id = (
            data.get("id") if isinstance(data, dict) and isinstance(data.get("id"), str) else None
        )
        try:
            parsed = parse_item(data)
        except InvalidInput as e:
            yield n, Rejection(n, item_id, e.message, text)
            continue
        if texts is not None:
            texts[n] = text
        yield n, parsed


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
) -> Summary:
    """Embed valid items in batches of batch_size and upsert them in batches of write_size;
    count every entry as indexed or rejected.

    texts: the lines of the items read and not yet written, by line number (read_lines fills
    it); an item the store refuses is reported with its line, and written lines are dropped."""
    texts = {} if texts is None else texts
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
            n = lines[item_id]
            summary.rejected.append(Rejection(n, item_id, reason, texts.get(n)))
        for n, _, _ in pending:
            texts.pop(n, None)
        pending.clear()

    for batch in _batches(entries, batch_size):
        summary.read += len(batch)
        # Within one batch the last line for an id wins, as it would across batches.
        items: dict[str, tuple[int, Item]] = {}
        for n, entry in batch:
            if isinstance(entry, Rejection):
                summary.rejected.append(entry)
            else:
                if entry.id in items:
                    summary.indexed += 1  # the earlier line is replaced by this upsert
                    texts.pop(items[entry.id][0], None)
                items[entry.id] = (n, entry)
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


def index_stream(
    stream: IO[bytes] | IO[str], backend: Backend, embedder: Embedder, **kw: Any
) -> Summary:
    texts: dict[int, str] = {}
    return index_items(read_lines(stream, texts), backend, embedder, texts=texts, **kw)


def write_rejects(path: str, rejected: list[Rejection]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in rejected:
            f.write(json.dumps(r.to_json()) + "\n")
