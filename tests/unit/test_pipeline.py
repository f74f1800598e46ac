"""The indexing pipeline: embed in small batches, write in large ones, account for every line."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence

from indexer.pipeline import Rejection, in_part, index_items, index_stream
from suli.backends.base import KEEP_GONE, BulkOutcome
from suli.embedding import FakeEmbedder, embed_hash
from suli.models import Item


class RecordingStore:
    """Records each upsert's ids; refuses the ids it is told to (as a mapping would)."""

    model = "fake"
    dimension = 384

    def __init__(self, refuse: Sequence[str] = ()) -> None:
        self.calls: list[list[str]] = []
        self.refuse = set(refuse)

    def stored_hashes(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        return {}

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


class CountingEmbedder(FakeEmbedder):
    """Counts the passages the model is asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed_documents(self, texts, batch_size=None, on_progress=None):  # type: ignore[no-untyped-def]
        self.texts.extend(texts)
        return super().embed_documents(texts)


class StoredVectorsStore(RecordingStore):
    """A store that remembers what it was given, with the embed hash of each vector."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: dict[tuple[str, str], tuple[str, Sequence[float]]] = {}

    def upsert(self, items: Sequence[tuple[Item, Sequence[float] | None]]) -> BulkOutcome:
        for it, vec in items:
            key = (it.workspace, it.id)
            if vec is None:  # keep the stored vector, as the real stores do
                vec = self.saved[key][1]
            self.saved[key] = (embed_hash(self.model, it.embed_text()), vec)
        return super().upsert(items)

    def stored_hashes(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        return {k: self.saved[k][0] for k in keys if k in self.saved}


def test_an_unchanged_item_reuses_its_stored_vector_without_a_model_call() -> None:
    store, model = StoredVectorsStore(), CountingEmbedder()
    first = index_items(((n, item(n)) for n in range(10)), store, model, batch_size=4)  # type: ignore[arg-type]
    assert (first.embedded, first.reused, len(model.texts)) == (10, 0, 10)
    before = dict(store.saved)

    model.texts.clear()
    changed = Item(id="itm_3", workspace="ws", title="a new title")
    again = [(n, changed if n == 3 else item(n)) for n in range(10)]
    second = index_items(again, store, model, batch_size=4)  # type: ignore[arg-type]
    assert (second.embedded, second.reused, second.indexed) == (1, 9, 10)
    assert model.texts == [changed.embed_text()]  # only the changed text reached the model
    for n in (0, 9):  # reused vectors are the stored ones, unchanged
        assert list(store.saved[("ws", f"itm_{n}")][1]) == list(before[("ws", f"itm_{n}")][1])
    assert store.saved[("ws", "itm_3")][0] != before[("ws", "itm_3")][0]


def test_the_same_id_in_another_workspace_is_not_reused() -> None:
    store, model = StoredVectorsStore(), CountingEmbedder()
    index_items([(1, item(1))], store, model)  # type: ignore[arg-type]
    other = Item(id="itm_1", workspace="other", title="title 1")  # same text, other workspace
    summary = index_items([(1, other)], store, model)  # type: ignore[arg-type]
    assert (summary.embedded, summary.reused) == (1, 0)


def test_parts_cover_every_line_exactly_once() -> None:
    entries: list[Item | Rejection] = [
        Item(id=f"itm_{n}", workspace=f"ws{n % 3}", title="t") for n in range(3000)
    ]
    entries += [Rejection(n, None, "invalid JSON") for n in range(3001, 3050)]
    for parts in (1, 2, 3, 7):
        owners = [
            [p for p in range(1, parts + 1) if in_part(e, n, p, parts)]
            for n, e in enumerate(entries, start=1)
        ]
        assert all(len(o) == 1 for o in owners), parts
        sizes = [sum(1 for o in owners if o == [p]) for p in range(1, parts + 1)]
        assert min(sizes) > 0.8 * len(entries) / parts  # a hash split, roughly even
    # stable: the same item goes to the same part in every run and every process
    it = Item(id="itm_42", workspace="ws1", title="another title")
    assert [in_part(it, 1, p, 4) for p in range(1, 5)] == [
        in_part(it, 99, p, 4) for p in range(1, 5)
    ]


def test_a_line_may_bring_its_own_vector_which_must_fit_the_model() -> None:
    dim = FakeEmbedder().dimension
    model = CountingEmbedder()
    ok = {"id": "a", "workspace": "ws", "title": "A", "vector": [0.5] * dim,
          "vector_model": model.name}  # fmt: skip
    rows = [
        ok,
        {**ok, "id": "b", "vector": [0.5] * (dim - 1)},  # wrong dimension
        {**ok, "id": "c", "vector_model": "another-model"},  # wrong model
        {**ok, "id": "d", "vector": [0.5] * (dim - 1) + ["x"]},  # not numbers
        {**ok, "id": "e", "vector": None, "vector_model": None},  # declared empty: refused
        {"id": "f", "workspace": "ws", "title": "F"},  # no vector: the model embeds it
    ]
    store = StoredVectorsStore()
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    summary = index_stream(io.BytesIO(data), store, model)  # type: ignore[arg-type]
    assert (summary.read, summary.indexed, summary.supplied, summary.embedded) == (6, 2, 1, 1)
    reasons = {r.id: r.reason for r in summary.rejected}
    assert set(reasons) == {"b", "c", "d", "e"}
    assert "expected 384 dimensions, got 383" in reasons["b"]
    assert "vector_model" in reasons["c"] and "another-model" in reasons["c"]
    assert all(r.text for r in summary.rejected)  # the rejects file keeps each line
    # taken at unit length: the same direction, so a long vector cannot inflate similarity
    assert list(store.saved[("ws", "a")][1]) == [1 / math.sqrt(dim)] * dim
    assert model.texts == ["F"]  # only the line without a vector reached the model


class MovedPrimaryStore(StoredVectorsStore):
    """Refuses every keep-the-stored-vector write once, as after a primary moved (409)."""

    def upsert(self, items: Sequence[tuple[Item, Sequence[float] | None]]) -> BulkOutcome:
        kept = [it.id for it, vec in items if vec is None]
        if kept:
            whole = [(it, vec) for it, vec in items if vec is not None]
            out = super().upsert(whole) if whole else BulkOutcome()
            return BulkOutcome(indexed=out.indexed, rejected={i: KEEP_GONE for i in kept})
        return super().upsert(items)


def test_a_refused_kept_vector_is_embedded_and_written_whole_once() -> None:
    store, model = MovedPrimaryStore(), CountingEmbedder()
    index_items(((n, item(n)) for n in range(6)), store, model)  # type: ignore[arg-type]
    model.texts.clear()
    again = index_items(((n, item(n)) for n in range(6)), store, model)  # type: ignore[arg-type]
    assert (again.indexed, again.rejected, again.reused, again.embedded) == (6, [], 0, 6)
    assert len(model.texts) == 6  # embedded after all, not lost
