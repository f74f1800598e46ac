"""Fixtures of the HTTP API tests: seeded stores (the real OpenSearch; the embedded store for
modules that name BACKENDS) behind a TestClient."""

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

from .helpers import Api, World, drop, guarded_servers, make_embedded_world, make_world, opener


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module naming BACKENDS runs its tests over each of them (the embedded store needs no
    node); every other module runs over OpenSearch only."""
    backends = getattr(metafunc.module, "BACKENDS", None)
    if backends and "backend_name" in metafunc.fixturenames:
        metafunc.parametrize("backend_name", backends, indirect=True, scope="module")


@pytest.fixture(scope="module")
def backend_name(request: pytest.FixtureRequest) -> str:
    """The store the module's worlds live in (see pytest_generate_tests)."""
    return str(getattr(request, "param", "opensearch"))


@pytest.fixture(scope="module")
def world(
    backend_name: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    """One seeded store per test module (and backend), for tests that only read (creating an
    index costs seconds). Tests that write get their own through `fresh_world`."""
    home = tmp_path_factory.mktemp("home")
    if backend_name == "embedded":
        yield make_embedded_world(home)
        return
    url = request.getfixturevalue("opensearch_url")
    client: OpenSearch = request.getfixturevalue("os_client")
    name = f"test-{uuid4().hex}"
    try:
        yield make_world(url, name, home)
    finally:
        drop(client, name)


@pytest.fixture
def fresh_world(backend_name: str, request: pytest.FixtureRequest, tmp_path: Path) -> World:
    """A seeded store of this test's own, on the module's backend (deleted after it)."""
    if backend_name == "embedded":
        return make_embedded_world(tmp_path)
    url = request.getfixturevalue("opensearch_url")
    make_index_name: Callable[[], str] = request.getfixturevalue("make_index_name")
    return make_world(url, make_index_name(), tmp_path)


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


@pytest.fixture
def guarded() -> Iterator[Callable[..., int]]:
    """Factory: a guarded server on a free loopback port with the given app and limits (by
    default one that reads the whole body and answers 200)."""
    yield from guarded_servers()
