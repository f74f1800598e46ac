"""The indexing pipeline: embed in small batches, write in large ones, account for every line."""

from __future__ import annotations

import io
from collections.abc import Sequence

from indexer.pipeline import Rejection, index_items, index_stream
from suli.backends.base import BulkOutcome
from suli.embedding import FakeEmbedder
from suli.models import Item


class RecordingStore:
    """Records each upsert's ids; refuses the ids it is told to (as a mapping would)."""

    def __init__(self, refuse: Sequence[str] = ()) -> None:
        self.calls: list[list[str]] = []
        self.refuse = set(refuse)

    def upsert(self, items: Sequence[tuple[Item, Sequence[float]]]) -> BulkOutcome:
        ids = [it.id for it, _ in items]
        self.calls.append(ids)
        return BulkOutcome(
            indexed=tuple(i for i in ids if i not in self.refuse),
            rejected={i: "refused" for i in ids if i in self.refuse},
        )


def item(n: int) -> Item:
    return Item(id=f"itm_{n}", workspace="ws", title=f"title {n}")


def test_embeds_in_small_batches_and_writes_in_large_ones() -> None:
    store = RecordingStore()
    progress: list[int] = []
    summary = index_items(
        ((n, item(n)) for n in range(130)),
        store,  # type: ignore[arg-type]
        FakeEmbedder(),
        on_progress=lambda s: progress.append(s.read),
        batch_size=64,
        write_size=100,
    )
    # 64 pending < 100, then 128 >= 100 are written together, then the last 2 at the end.
    assert [len(c) for c in store.calls] == [128, 2]
    assert [i for c in store.calls for i in c] == [f"itm_{n}" for n in range(130)]
    assert (summary.read, summary.indexed, summary.rejected) == (130, 130, [])
    assert progress[:3] == [64, 128, 130]  # progress follows what was read and embedded


def test_every_line_ends_indexed_or_rejected_with_its_line() -> None:
    store = RecordingStore(refuse=["itm_3"])
    entries: list[tuple[int, Item | Rejection]] = [
        (1, item(1)),
        (2, Rejection(2, None, "invalid JSON")),
        (3, item(3)),
        (4, item(1)),  # the same id again: both go in one write, in order (the later wins)
    ]
    summary = index_items(entries, store, FakeEmbedder(), batch_size=2, write_size=10)  # type: ignore[arg-type]
    assert store.calls == [["itm_1", "itm_3", "itm_1"]]
    assert summary.read == 4
    assert summary.indexed == 2  # lines 1 and 4 (each an upsert)
    assert sorted((r.line, r.id, r.reason) for r in summary.rejected) == [
        (2, None, "invalid JSON"),
        (3, "itm_3", "refused"),
    ]


def test_a_line_the_store_refuses_is_reported_with_its_text() -> None:
    lines = [f'{{"id": "itm_{n}", "workspace": "ws", "title": "title {n}"}}' for n in range(1, 5)]
    store = RecordingStore(refuse=["itm_3"])
    summary = index_stream(
        io.BytesIO("\n".join(lines).encode()),
        store,  # type: ignore[arg-type]
        FakeEmbedder(),
        batch_size=2,
        write_size=2,
    )
    [rej] = summary.rejected
    assert (rej.line, rej.id, rej.text) == (3, "itm_3", lines[2])
    assert rej.to_json() == {"line": 3, "id": "itm_3", "reason": "refused", "text": lines[2]}
