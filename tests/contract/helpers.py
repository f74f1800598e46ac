"""Shared builders of the backend contract suite: items, principals, ACLs, a keyed embedder, a World."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import uuid4

import numpy as np

from indexer.pipeline import Summary, index_items
from suli.backends.base import Backend, Facets
from suli.backends.memory import MemoryBackend
from suli.backends.opensearch import OpenSearchBackend
from suli.backends.opensearch.client import counting as counting  # tests import it here
from suli.embedding import Embedder, FakeEmbedder, FloatArray, ProgressFn
from suli.models import BoardAcl, Filters, Item, Principal, SearchResponse
from suli.search_params import search_request
from suli.service import Card, Searcher
from suli.settings import Settings
from suli.validate import parse_item

WS = "ws_main"
OTHER_WS = "ws_other"
T0 = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
DIM = 64  # small vectors keep the test indices light; the rules do not depend on the size


# ---- items, principals, ACLs -----------------------------------------------------------------


def item(item_id: str, title: str, body: str = "", **fields: Any) -> Item:
    """A validated item in WS (through parse_item, as the indexer would build it)."""
    data: dict[str, Any] = {
        "id": item_id,
        "workspace": WS,
        "title": title,
        "body": body,
        "last_activity_at": T0,
        "url": f"https://app.example/items/{item_id}",
        "provenance": {"source": "contract", "created_by": "prn_maker"},
    }
    data.update(fields)
    return parse_item(data)


def principal(pid: str, *groups: str, workspace: str = WS) -> Principal:
    return Principal(id=pid, workspace=workspace, groups=tuple(groups))


def acl(
    board: str, members: Sequence[str] = (), groups: Sequence[str] = (), workspace: str = WS
) -> BoardAcl:
    return BoardAcl(board, workspace, f"Board {board}", tuple(members), tuple(groups))


# ---- vectors -------------------------------------------------------------------------------


def axis(i: int, dim: int = DIM) -> FloatArray:
    """The i-th unit vector: distinct axes are orthogonal (cosine 0)."""
    v = np.zeros(dim, dtype=np.float32)
    v[i] = 1.0
    return v


def blend(a: int, b: int, cos: float, dim: int = DIM) -> FloatArray:
    """A unit vector whose cosine with axis(a) is exactly `cos` (the rest lies on axis b)."""
    v = np.zeros(dim, dtype=np.float64)
    v[a] = cos
    v[b] = math.sqrt(max(0.0, 1.0 - cos * cos))
    return v.astype(np.float32)


class KeyedEmbedder:
    """Given unit vectors for given exact texts (or items); FakeEmbedder for every other text.

    Lets a test decide precisely what an item or a query "means".
    """

    def __init__(
        self, pairs: Iterable[tuple[str | Item, Sequence[float]]] = (), dimension: int = DIM
    ) -> None:
        self.dimension = dimension
        self.name = f"keyed-{dimension}"
        self._fallback = FakeEmbedder(dimension)
        self._vectors: dict[str, FloatArray] = {}
        for key, vec in pairs:  # pairs, not a dict: items hold dicts and are not hashable
            self.set(key, vec)

    def set(self, key: str | Item, vec: Sequence[float]) -> None:
        text = key.embed_text() if isinstance(key, Item) else key
        arr = np.asarray(vec, dtype=np.float64)
        if arr.shape != (self.dimension,):
            raise ValueError(f"vector for {text!r} has shape {arr.shape}")
        self._vectors[text] = (arr / np.linalg.norm(arr)).astype(np.float32)

    def _one(self, text: str) -> FloatArray:
        got = self._vectors.get(text)
        return got.copy() if got is not None else self._fallback.embed_query(text)

    def embed_documents(
        self, texts: Sequence[str], *, on_progress: ProgressFn | None = None
    ) -> FloatArray:
        out = (
            np.stack([self._one(t) for t in texts])
            if texts
            else np.empty((0, self.dimension), np.float32)
        )
        if on_progress is not None and texts:
            on_progress(len(texts))
        return out

    def embed_query(self, text: str) -> FloatArray:
        return self._one(text)


# ---- a loaded backend and its searcher -------------------------------------------------------


@dataclass
class World:
    """One backend under test with its searcher; `refresh` makes writes searchable."""

    backend: Backend
    embedder: Embedder
    settings: Settings
    refresh: Callable[[], None]
    searcher: Searcher = field(init=False)

    def __post_init__(self) -> None:
        self.searcher = Searcher(self.backend, self.embedder, self.settings)

    def load(
        self,
        items: Iterable[Item] = (),
        principals: Iterable[Principal] = (),
        acls: Iterable[BoardAcl] = (),
    ) -> Summary:
        """Store principals and ACLs, index items through the pipeline, then refresh."""
        ps, acs = list(principals), list(acls)
        if ps:
            self.backend.put_principals(ps)
        if acs:
            self.backend.put_acls(acs)
        summary = index_items(enumerate(items, start=1), self.backend, self.embedder)
        assert not summary.rejected, summary.rejected
        self.refresh()
        return summary

    def with_settings(self, **overrides: Any) -> World:
        """The same stored data searched under other ranking settings (no re-indexing)."""
        return World(
            self.backend, self.embedder, self.settings.model_copy(update=overrides), self.refresh
        )

    def who(self, p: str | Principal) -> Principal:
        return p if isinstance(p, Principal) else self.searcher.principal(p)

    def search(self, p: str | Principal, query: str = "", **params: Any) -> SearchResponse:
        """Validate loose parameters like every edge does, then search as principal p."""
        return self.searcher.search(self.who(p), search_request(query, **params))

    def ids(self, p: str | Principal, query: str = "", **params: Any) -> list[str]:
        return [r.id for r in self.search(p, query, **params).results]

    def get(self, p: str | Principal, item_id: str) -> tuple[Item, Any]:
        return self.searcher.get(self.who(p), item_id)

    def facets(self, p: str | Principal, filters: Filters | None = None) -> Facets:
        return self.searcher.facets(self.who(p), filters or Filters())

    def related(
        self, p: str | Principal, item_id: str | None = None, card: Card | None = None, **kw: Any
    ) -> SearchResponse:
        return self.searcher.related(self.who(p), item_id=item_id, card=card, **kw)


class MakeSearcher(Protocol):
    """The `make_searcher` fixture: a fresh, isolated, loaded World per call."""

    def __call__(
        self,
        items: Iterable[Item] = (),
        principals: Iterable[Principal] = (),
        acls: Iterable[BoardAcl] = (),
        *,
        embedder: Embedder | None = None,
        **settings: Any,
    ) -> World: ...


def world_factory(build: Callable[[Embedder, dict[str, Any]], World]) -> MakeSearcher:
    """A `make_searcher`: each call has `build(embedder, settings overrides)` open an empty World
    on a store of its own (the KeyedEmbedder unless one is given), then loads it."""

    def make(
        items: Iterable[Item] = (),
        principals: Iterable[Principal] = (),
        acls: Iterable[BoardAcl] = (),
        *,
        embedder: Embedder | None = None,
        **overrides: Any,
    ) -> World:
        world = build(embedder or KeyedEmbedder(), overrides)
        world.load(items, principals, acls)
        return world

    return make


def _memory(emb: Embedder, overrides: dict[str, Any]) -> World:
    settings = Settings(
        backend="embedded", embedder="fake", cursor_secret="unit-test-cursor-key", **overrides
    )
    backend = MemoryBackend(emb.dimension, model=emb.name)
    return World(backend, emb, settings, backend.refresh)


memory_world = world_factory(_memory)
"""A loaded World over the in-memory backend: the search core's rules without a store."""


def opensearch_settings(opensearch_url: str, name: str | None = None, **overrides: Any) -> Settings:
    """Settings for a world on an index alias of its own (`name`, else a fresh `test-<uuid>`)
    and its ACL index `<name>-acl`; the caller deletes `<name>*` after."""
    name = name or f"test-{uuid4().hex}"
    return Settings(
        backend="opensearch",
        opensearch_url=opensearch_url,
        index_alias=name,
        acl_index=f"{name}-acl",
        embedder="fake",
        **overrides,
    )


def opensearch_world(
    settings: Settings, embedder: Embedder | None = None, *, ready: bool = True
) -> World:
    """An empty World over a real OpenSearch backend on `settings`' indices, created unless
    `ready` is False (the caller then calls `ensure_ready`); the caller closes the backend."""
    emb = embedder or KeyedEmbedder()
    backend = OpenSearchBackend(settings, emb.dimension, emb.name)
    if ready:
        try:
            backend.ensure_ready()
        except BaseException:
            backend.close()
            raise
    return World(backend, emb, settings, backend.refresh)


def facet_dict(f: Facets) -> dict[str, dict[str, int]]:
    """Facets as {name: {value: count}} with empty facets dropped (order-free comparison)."""
    return {k: dict(v) for k, v in f.values.items() if v}


def expected_facets(items: Iterable[Item]) -> dict[str, dict[str, int]]:
    """Brute-force facet values and counts over the given (visible) items."""
    out: dict[str, dict[str, int]] = {}

    def bump(name: str, values: Iterable[str | None]) -> None:
        for v in set(values):
            if v is not None:
                out.setdefault(name, {}).setdefault(v, 0)
                out[name][v] += 1

    for it in items:
        bump("kind", [it.kind])
        bump("outcome", [it.outcome])
        bump("board", [it.board])
        bump("agent", [it.agent])
        bump("station", [s.name for s in it.stations])
        bump("tag", list(it.tags))
    return out
