"""The backend contract suite against a real OpenSearch (a fresh uuid-named alias per world)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, ClassVar
from uuid import uuid4

import pytest
from opensearchpy import OpenSearch

from suli.backends.opensearch import OpenSearchBackend
from suli.embedding import Embedder
from suli.models import BoardAcl, Item, Principal
from suli.settings import Settings

from .helpers import KeyedEmbedder, MakeSearcher, World
from .suite import BackendContract


class TestOpenSearchContract(BackendContract):
    # Added to BackendContract's `contract` mark (pytest merges marks along the MRO).
    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [pytest.mark.integration]

    @pytest.fixture(scope="class")
    @classmethod
    def make_searcher(cls, opensearch_url: str, os_client: OpenSearch) -> Iterator[MakeSearcher]:
        made: list[OpenSearchBackend] = []

        def make(
            items: Iterable[Item] = (),
            principals: Iterable[Principal] = (),
            acls: Iterable[BoardAcl] = (),
            *,
            embedder: Embedder | None = None,
            **overrides: Any,
        ) -> World:
            emb = embedder or KeyedEmbedder()
            name = f"test-{uuid4().hex}"
            settings = Settings(
                backend="opensearch",
                opensearch_url=opensearch_url,
                index_alias=name,
                acl_index=f"{name}-acl",
                embedder="fake",
                **overrides,
            )
            backend = OpenSearchBackend(settings, emb.dimension, emb.name)
            made.append(backend)
            backend.ensure_ready()
            world = World(backend, emb, settings, backend.refresh)
            world.load(items, principals, acls)
            return world

        yield make
        names = [n for b in made for n in (b.current_index(), b.acl_index) if n]
        if names:  # one request: each index deletion is a cluster-state update
            os_client.indices.delete(index=",".join(names), ignore=[404])
        for backend in made:
            backend.close()
