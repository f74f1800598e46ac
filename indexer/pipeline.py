"""The indexing pipeline shared by `suli index`, the HTTP ingestion route and the demo loader."""

from __future__ import annotations

import hashlib
import json
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from indexer.workers import EmbedPool, Job
from suli.backends.base import KEEP_GONE, Backend
from suli.embedding import Embedder, FloatArray, embed_hash
from suli.errors import IndexingError, InvalidInput
from suli.models import Item
from suli.validate import check_structure, parse_item

BATCH = 64  # items embedded together (a progress step with a slow model)
WRITE_BATCH = 500  # items per write once embedded: fewer, larger bulk requests (= BULK_CHUNK)
# The longest line read: a maximal valid item (a 1M-character body, \u-escaped) fits; a
# longer one is rejected without being held in memory whole.
MAX_LINE_BYTES = 8 << 20
REJECT_TEXT_CHARS = 65_536  # what a rejects file keeps of a line too long to read whole
BOM = "\ufeff"
# Containers a line may nest (the item object is level 1): deeper lines are refused as a whole
# before validation, the same on every Python (json's own limit moved in 3.12). Below it, an
# over-deep field gets its own reason from validation (16 levels, see suli.validate).
MAX_LINE_DEPTH = 512


@dataclass
class Rejection:
    line: int
    id: str | None
    reason: str
    text: str | None = None  # the line as read (invalid UTF-8 replaced); None when not a line

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "id": self.id, "reason": self.reason, "text": self.text}


@dataclass(frozen=True)
class Supplied:
    """A vector an input line brings (`vector`, made by `vector_model`), not yet checked."""

    vector: Any
    model: Any

    def check(self, model: str, dimension: int) -> list[float] | str:
        """The vector, or why it cannot be used (the line is then rejected)."""
        if self.model != model:
            return f"vector_model: vectors here come from {model!r}, the line says {self.model!r}"
        v = self.vector
        if not isinstance(v, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in v
        ):
            return "vector: must be a list of numbers"
        if len(v) != dimension:
            return f"vector: expected {dimension} dimensions, got {len(v)}"
        if not all(math.isfinite(x) for x in v):
            return "vector: NaN or infinite values"
        return [float(x) for x in v]


@dataclass
class Summary:
    read: int = 0
    indexed: int = 0
    rejected: list[Rejection] = field(default_factory=list)
    retried: int = 0
    embedded: int = 0  # items the model embedded
    reused: int = 0  # items whose stored vector was made from the same text: no model call
    supplied: int = 0  # items that brought their own vector (`vector` + `vector_model`)
    stopped: str | None = None  # why the run stopped before the end (Ctrl-C, a dead worker)

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
            "supplied": self.supplied,
            "stopped": self.stopped,
            "unwritten": self.unwritten,
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
    stream: IO[bytes] | IO[str],
    texts: dict[int, str] | None = None,
    supplied: dict[int, Supplied] | None = None,
) -> Iterator[tuple[int, Item | Rejection]]:
    """Parse JSON lines: each non-blank line becomes an Item or a Rejection with its line number.

    Read as bytes and decoded line by line, so one bad line never stops the run: invalid
    UTF-8, JSON nested past the parser's limit and over-long lines are rejected like any
    other bad line. A byte-order mark starts line 1 of files some editors write: dropped
    there (elsewhere it is not a file's marker, and json refuses it). JSON error columns are
    json's (1-based characters of the line as an editor shows it, BOM not counted).
    texts: where the lines of valid items are kept until written (see index_items).
    supplied: where a line's own `vector` and `vector_model` go (checked by index_items).
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
        try:
            # json's own limit differs between Python versions (3.12+ parses far deeper):
            # one limit for every Python, before validation walks the structure.
            check_structure(data, MAX_LINE_DEPTH, None)
        except ValueError as e:
            yield n, Rejection(n, None, f"invalid JSON: the line {e}", text)
            continue
        item_id = (
            data.get("id") if isinstance(data, dict) and isinstance(data.get("id"), str) else None
        )
        own = None
        if isinstance(data, dict) and ("vector" in data or "vector_model" in data):
            own = Supplied(data.pop("vector", None), data.pop("vector_model", None))
        try:
            parsed = parse_item(data)
        except InvalidInput as e:
            yield n, Rejection(n, item_id, e.message, text)
            continue
        if texts is not None:
            texts[n] = text
        if own is not None and supplied is not None:
            supplied[n] = own
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
    pool: EmbedPool | None = None,
    supplied: dict[int, Supplied] | None = None,
) -> Summary:
    """Embed valid items in batches of batch_size and upsert them in batches of write_size;
    count every entry as indexed or rejected.

    texts: the lines of the items read and not yet written, by line number (read_lines fills
    it); an item the store refuses is reported with its line, and written lines are dropped.
    pool: embed in its worker processes instead of calling embedder here; at most two batches
    per worker are in flight, so reading waits for the model (bounded memory on a stream).
    A run stopped by Ctrl-C or a dead worker returns what it wrote, with `stopped` set.
    supplied: vectors that lines brought (read_lines fills it): used as given when they fit
    the model and dimension, else the line is rejected with the reason."""
    texts = {} if texts is None else texts
    supplied = {} if supplied is None else supplied
    summary = Summary()
    pending: list[tuple[int, Item, Sequence[float] | None]] = []
    in_flight: deque[tuple[Planned, Job | None]] = deque()
    limit = 2 * pool.workers if pool else 0

    def write() -> None:
        if not pending:
            return
        outcome = backend.upsert([(it, vec) for _, it, vec in pending])
        lines = {it.id: n for n, it, _ in pending}  # a rejected id is reported at its last line
        summary.indexed += len(outcome.indexed)
        summary.retried += outcome.retries
        rejected = dict(outcome.rejected)
        # A kept vector the store refused (the item was rewritten, deleted or its primary moved
        # since its hash was read): embed it after all and write it whole, once.
        again = [it for _, it, vec in pending if vec is None and rejected.get(it.id) == KEEP_GONE]
        if again:
            vectors = embedder.embed_documents([it.embed_text() for it in again])
            summary.embedded += len(again)
            summary.reused -= len(again)
            retry = backend.upsert(list(zip(again, vectors, strict=True)))
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
                planned = Planned.of(list(items.values()), backend, summary, given)
                if pool is None:
                    found = embedder.embed_documents(planned.texts) if planned.texts else None
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
    except (KeyboardInterrupt, IndexingError) as e:
        summary.stopped = "interrupted" if isinstance(e, KeyboardInterrupt) else e.message
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
        backend: Backend,
        summary: Summary,
        given: Mapping[int, Sequence[float]],
    ) -> Planned:
        """Take a vector the line brought (checked), else reuse a stored one made from the
        same text by the same model (its embed hash matches); count what the model embeds."""
        stored = backend.stored_hashes([(it.workspace, it.id) for _, it in items])
        ready: dict[int, Sequence[float] | None] = {}
        todo: list[int] = []
        for k, (n, it) in enumerate(items):
            got = stored.get((it.workspace, it.id))
            if n in given:
                ready[k] = given[n]
                summary.supplied += 1
            elif got == embed_hash(backend.model, it.embed_text()):
                ready[k] = None  # the store keeps its vector: nothing to send
                summary.reused += 1
            else:
                todo.append(k)
        summary.embedded += len(todo)
        return cls(items, ready, todo, [items[k][1].embed_text() for k in todo])

    def rows(self, vectors: FloatArray | None) -> list[tuple[int, Item, Sequence[float] | None]]:
        """(line, item, vector) in input order, given the model's vectors for `texts`."""
        made = dict(zip(self.todo, vectors if vectors is not None else [], strict=True))
        return [(n, it, self.ready[k] if k in self.ready else made[k])
                for k, (n, it) in enumerate(self.items)]  # fmt: skip


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


def write_rejects(path: str, rejected: list[Rejection]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in rejected:
            f.write(json.dumps(r.to_json()) + "\n")
