"""Moving documents between two physical indices: snapshot pages, `_seq_no` catch-up, id diff, checks.

Every read asks for complete answers (`allow_partial_search_results=false`): a shard that
fails must stop the copy, never silently shorten it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any

from opensearchpy import OpenSearch

from indexer.inventory import call
from suli.backends.opensearch import OpenSearchBackend, keys
from suli.backends.opensearch.bodies import doc_to_item
from suli.embedding import Embedder
from suli.errors import BackendUnavailable, IndexingError
from suli.models import Item

Hit = dict[str, Any]
Checkpoints = dict[str, int]  # shard number (as a JSON key) -> sequence number
PAGE = 500
KEEP_ALIVE = "10m"  # a point in time outlives the slowest page (500 items on the real model)
VECTOR_TOLERANCE = 1e-6
# Item ids repeat across workspaces: pages are sorted by (id, workspace), a unique pair.
SORT = [{"id": "asc"}, {"workspace": "asc"}]


def key_of(doc: dict[str, Any]) -> str:
    """A source document's storage key, derived from its fields, never from its `_id`: an
    index of before per-workspace keys holds bare ids there, and copying moves it to keys."""
    return keys.key(doc["workspace"], doc["id"])


def _complete(resp: dict[str, Any], what: str) -> dict[str, Any]:
    shards = resp.get("_shards") or {}
    if shards.get("failed"):
        raise BackendUnavailable(
            f"{what}: {shards['failed']} shard(s) failed; nothing was lost, retry"
        )
    return resp


def checkpoints(client: OpenSearch, index: str) -> Checkpoints:
    """Each shard's global checkpoint: every write at or below it is on all of that shard's copies."""
    stats = call(lambda: client.indices.stats(index=index, level="shards"), f"stats of {index}")
    out: Checkpoints = {}
    for shard, copies in stats["indices"][index]["shards"].items():
        marks = [int(c["seq_no"]["global_checkpoint"]) for c in copies if c["routing"]["primary"]]
        if not marks:
            raise BackendUnavailable(f"{index} shard {shard} has no active primary")
        out[str(shard)] = min(marks)  # a relocating primary is listed twice: the lower is safe
    return out


def settled(client: OpenSearch, index: str) -> bool:
    """True when no write is in flight: on every shard the highest sequence number is on all copies."""
    stats = call(lambda: client.indices.stats(index=index, level="shards"), f"stats of {index}")
    # Primaries only: a replica learns the global checkpoint late (with the next write, or
    # a background sync every 30 s), the primary as soon as each replica acknowledges.
    return all(
        c["seq_no"]["max_seq_no"] == c["seq_no"]["global_checkpoint"]
        for copies in stats["indices"][index]["shards"].values()
        for c in copies
        if c["routing"]["primary"]
    )


def refresh(client: OpenSearch, *indices: str) -> None:
    call(lambda: client.indices.refresh(index=",".join(indices)), "refresh")


def pages(
    client: OpenSearch,
    *,
    index: str | None = None,
    pit: str | None = None,
    query: dict[str, Any] | None = None,
    preference: str | None = None,
    after: list[str] | str | None = None,
    source: bool | list[str] = True,
    size: int = PAGE,
) -> Iterator[list[Hit]]:
    """Pages of hits sorted by (id, workspace), from `after` (that pair) on, so it can resume.
    A bare-id cursor saved by an older Suli resumes at that id (re-copying is harmless)."""
    if isinstance(after, str):
        after = [after, ""]
    while True:
        body: dict[str, Any] = {
            "size": size,
            "query": query or {"match_all": {}},
            "sort": SORT,
            "_source": source,
            "track_total_hits": False,
        }
        if after is not None:
            body["search_after"] = list(after)
        params: dict[str, Any] = {"allow_partial_search_results": "false"}
        if pit:
            body["pit"] = {"id": pit, "keep_alive": KEEP_ALIVE}
        if preference:
            params["preference"] = preference
        resp = call(partial(client.search, index=index, body=body, params=params), "copy read")
        hits = _complete(resp, "copy read")["hits"]["hits"]
        if not hits:
            return
        yield hits
        after = [str(v) for v in hits[-1]["sort"]]


def _mget(client: OpenSearch, index: str, ids: Sequence[str]) -> list[Hit]:
    resp = call(lambda: client.mget(index=index, body={"ids": list(ids)}), f"read of {index}")
    return [d["_source"] for d in resp["docs"] if d.get("found")]


def fetch(client: OpenSearch, index: str, stored: Sequence[str]) -> dict[str, Hit]:
    """Current documents by storage key (real-time: no refresh needed); absent ones are left
    out. Keys not found are looked up once more by bare id, as an index written before
    per-workspace keys stores them (the document's workspace must match)."""
    if not stored:
        return {}
    out = {key_of(d): d for d in _mget(client, index, stored)}
    rest = [k for k in stored if k not in out]
    if rest:
        wanted = set(rest)
        for d in _mget(client, index, list(dict.fromkeys(keys.split(k)[1] for k in rest))):
            if key_of(d) in wanted:
                out[key_of(d)] = d
    return out


def same_vector(a: Sequence[float] | None, b: Sequence[float] | None) -> bool:
    if a is None or b is None or len(a) != len(b):
        return False
    return all(math.isclose(x, y, abs_tol=VECTOR_TOLERANCE) for x, y in zip(a, b, strict=True))


def first_difference(a: Item, b: Item) -> str | None:
    """The first field in which two items differ (None when equal)."""
    for f in fields(Item):
        if getattr(a, f.name) != getattr(b, f.name):
            return f.name
    return None


class Converter:
    """Source documents -> (Item, vector) pairs in the target's shape.

    With an embedder the vectors are made again (a changed model), except where the target
    already holds the same embedded text; without one the stored vectors are kept.
    """

    def __init__(self, embedder: Embedder | None) -> None:
        self.embedder = embedder

    @property
    def keeps_vectors(self) -> bool:
        return self.embedder is None

    def convert(
        self, docs: Sequence[dict[str, Any]], existing: dict[str, Hit] | None = None
    ) -> list[tuple[Item, Sequence[float]]]:
        items = [doc_to_item(d) for d in docs]
        if self.embedder is None:
            missing = [it.id for it, d in zip(items, docs, strict=True) if not d.get("vector")]
            if missing:
                raise IndexingError(f"{missing[0]} has no stored vector: reindex with --re-embed")
            return [(it, d["vector"]) for it, d in zip(items, docs, strict=True)]
        existing = existing or {}
        out: list[tuple[Item, Sequence[float]] | None] = [None] * len(items)
        todo: list[int] = []
        for n, it in enumerate(items):
            old = existing.get(keys.key(it.workspace, it.id))
            if old is not None and doc_to_item(old).embed_text() == it.embed_text():
                out[n] = (it, old["vector"])
            else:
                todo.append(n)
        if todo:
            vectors = self.embedder.embed_documents([items[n].embed_text() for n in todo])
            for row, n in enumerate(todo):
                out[n] = (items[n], [float(x) for x in vectors[row]])
        return [pair for pair in out if pair is not None]

    def unchanged(self, doc: Hit, target: Hit | None) -> bool:
        """True when the target already holds what converting doc would write."""
        if target is None or doc_to_item(doc) != doc_to_item(target):
            return False
        return not self.keeps_vectors or same_vector(doc.get("vector"), target.get("vector"))


@dataclass
class Copied:
    """What one copy step wrote."""

    written: int = 0
    rejected: dict[str, str] = field(default_factory=dict)
    retries: int = 0

    def add(self, other: Copied) -> None:
        self.written += other.written
        self.rejected.update(other.rejected)
        self.retries += other.retries


def write(
    backend: OpenSearchBackend, target: str, pairs: list[tuple[Item, Sequence[float]]]
) -> Copied:
    if not pairs:
        return Copied()
    out = backend.upsert(pairs, index=target)
    return Copied(len(out.indexed), dict(out.rejected), out.retries)


def copy_changed(
    client: OpenSearch,
    backend: OpenSearchBackend,
    converter: Converter,
    target: str,
    docs: list[Hit],
) -> Copied:
    """Write the docs the target does not hold yet in this form (re-checked: passes overlap)."""
    existing = fetch(client, target, [key_of(d) for d in docs])
    todo = [d for d in docs if not converter.unchanged(d, existing.get(key_of(d)))]
    return write(backend, target, converter.convert(todo, existing))


def catch_up(
    client: OpenSearch,
    backend: OpenSearchBackend,
    converter: Converter,
    source: str,
    target: str,
    since: Checkpoints,
) -> tuple[Copied, Checkpoints]:
    """Copy every document written to source above `since`, per shard; returns the new marks.

    The marks are read before the refresh, so each write at or below them is visible to the
    queries that follow; a write above them is found by the next pass.
    """
    now = checkpoints(client, source)
    refresh(client, source)
    done = Copied()
    for shard, after in sorted(since.items()):
        if now.get(shard, after) <= after:
            continue
        query = {"range": {"_seq_no": {"gt": after}}}
        for hits in pages(client, index=source, query=query, preference=f"_shards:{shard}"):
            done.add(copy_changed(client, backend, converter, target, [h["_source"] for h in hits]))
    return done, {**since, **now}


def _ids(client: OpenSearch, index: str) -> Iterator[tuple[str, str]]:
    for hits in pages(client, index=index, source=False, size=5000):
        yield from ((str(h["sort"][0]), str(h["sort"][1])) for h in hits)


def id_diff(client: OpenSearch, source: str, target: str) -> tuple[list[str], list[str]]:
    """Storage keys missing from target and keys only target has (both indices quiet)."""
    missing, extra = diff_sorted(_ids(client, source), _ids(client, target))
    return [keys.key(ws, i) for i, ws in missing], [keys.key(ws, i) for i, ws in extra]


def diff_sorted(a: Iterator[Any], b: Iterator[Any]) -> tuple[list[Any], list[Any]]:
    """Merge two ascending streams (of ids, or of (id, workspace) pairs): (only in a, only in b)."""
    missing: list[Any] = []
    extra: list[Any] = []
    x, y = next(a, None), next(b, None)
    while x is not None or y is not None:
        if y is None or (x is not None and x < y):
            missing.append(x)
            x = next(a, None)
        elif x is None or y < x:
            extra.append(y)
            y = next(b, None)
        else:
            x, y = next(a, None), next(b, None)
    return missing, extra


def delete_ids(client: OpenSearch, index: str, ids: Sequence[str]) -> None:
    """Remove documents (by storage key) deleted from the source while it was copied."""
    if not ids:
        return
    lines: list[dict[str, Any]] = [{"delete": {"_index": index, "_id": i}} for i in ids]
    resp = call(lambda: client.bulk(body=lines, params={"refresh": "true"}), "delete")
    failed = [i["delete"] for i in resp["items"] if i["delete"].get("status") not in (200, 404)]
    if failed:
        raise BackendUnavailable(f"could not delete {len(failed)} ids from {index}: {failed[:3]}")


def count(client: OpenSearch, index: str) -> int:
    resp = call(lambda: client.count(index=index), f"count of {index}")
    return int(_complete(resp, f"count of {index}")["count"])


@dataclass
class Verification:
    source_docs: int
    target_docs: int
    sampled: int
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems and self.source_docs == self.target_docs


def sample_check(
    client: OpenSearch,
    source: str,
    target: str,
    dimension: int,
    converter: Converter,
    *,
    size: int = 0,
    seed: int = 0,
    ids: Sequence[str] = (),
    embed_check: Callable[[list[Item]], list[Sequence[float]]] | None = None,
) -> tuple[int, dict[str, str]]:
    """Compare `ids` (or `size` random ids) in both indices: (how many, problem per id).

    Identical items, vectors of the target's dimension; kept vectors equal, new ones the new
    model's (checked on ten items).
    """
    if ids:
        picked = fetch(client, source, ids)
        gone = [i for i in ids if i not in picked]  # deleted from the source since
    else:
        body = {
            "size": size,
            "query": {
                "function_score": {
                    "random_score": {"seed": seed, "field": "_seq_no"},
                    "boost_mode": "replace",
                }
            },
        }
        resp = call(lambda: client.search(index=source, body=body), "sample read")
        picked = {
            key_of(h["_source"]): h["_source"]
            for h in _complete(resp, "sample read")["hits"]["hits"]
        }
        gone = []
    copies = fetch(client, target, [*picked, *gone])
    problems = {i: f"still in {target} though deleted from {source}" for i in gone if i in copies}
    for doc_id, doc in picked.items():
        copy = copies.get(doc_id)
        if copy is None:
            problems[doc_id] = f"missing from {target}"
            continue
        diff = first_difference(doc_to_item(doc), doc_to_item(copy))
        vector = copy.get("vector") or []
        if diff:
            problems[doc_id] = f"field {diff} differs"
        elif len(vector) != dimension:
            problems[doc_id] = f"vector has {len(vector)} dimensions, not {dimension}"
        elif converter.keeps_vectors and not same_vector(doc.get("vector"), vector):
            problems[doc_id] = "vector differs"
    if embed_check and not converter.keeps_vectors:
        few = [doc_to_item(copies[i]) for i in list(picked)[:10] if i in copies]
        for it, vec in zip(few, embed_check(few), strict=True):
            # Not bit-equal: the model pads each batch differently, which moves the last digits.
            k = keys.key(it.workspace, it.id)
            if _cosine(copies[k]["vector"], vec) < 0.999:
                problems[k] = "vector is not the new model's embedding"
    return len(picked) + len(gone), problems


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norms if norms else 0.0


def count_since(client: OpenSearch, index: str, since: Checkpoints) -> int:
    """How many documents were written to index above the marks (e.g. since a swap)."""
    refresh(client, index)
    total = 0
    for shard, after in since.items():
        body = {"query": {"range": {"_seq_no": {"gt": after}}}}
        params = {"preference": f"_shards:{shard}"}
        resp = call(partial(client.count, index=index, body=body, params=params), "count")
        total += int(_complete(resp, f"count of {index}")["count"])
    return total
