"""Fixtures of the HTTP API tests: seeded indices on the real OpenSearch behind a TestClient."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient
from opensearchpy import OpenSearch

from app.main import create_app
from suli.embedding import Embedder
from suli.service import Reranker
from suli.settings import Settings

from .helpers import Api, World, drop, make_world, opener


@pytest.fixture(scope="module")
def world(
    opensearch_url: str, os_client: OpenSearch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    """One seeded index per test module, for tests that only read (creating one costs seconds).

    Tests that write get their own index through `fresh_world`.
    """
    name = f"test-{uuid4().hex}"
    try:
        yield make_world(opensearch_url, name, tmp_path_factory.mktemp("home"))
    finally:
        drop(os_client, name)


@pytest.fixture
def fresh_world(opensearch_url: str, make_index_name: Callable[[], str], tmp_path: Path) -> World:
    """A seeded index of this test's own (deleted after it)."""
    return make_world(opensearch_url, make_index_name(), tmp_path)


@pytest.fixture
def make_api(world: World) -> Iterator[Callable[..., Api]]:
    """Factory: a service over a seeded world (default: the module's), with setting overrides
    and an injectable embedder or reranker; every client is closed after the test."""
    with ExitStack() as stack:

        def make(
            on: World | None = None,
            embedder: Embedder | None = None,
            reranker: Reranker | None = None,
            **overrides: Any,
        ) -> Api:
            w = on or world
            settings = Settings(**{**w.settings.model_dump(), **overrides})
            app = create_app(settings, opener=opener(embedder, reranker))
            client = stack.enter_context(TestClient(app, raise_server_exceptions=False))
            return Api(client, app, settings, w.tokens)

        yield make


@pytest.fixture
def api(make_api: Callable[..., Api]) -> Api:
    """The default service over the module's seeded index (read-only tests)."""
    return make_api()
