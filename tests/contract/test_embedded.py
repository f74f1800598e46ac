"""The backend contract suite against the embedded SQLite backend (a fresh file per world)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import pytest

from suli.backends.embedded import EmbeddedBackend
from suli.embedding import Embedder
from suli.settings import Settings

from .helpers import MakeSearcher, World, world_factory
from .suite import BackendContract


class TestEmbeddedContract(BackendContract):
    """No service needed (the `contract` mark comes from the folder, see tests/conftest.py)."""

    @pytest.fixture(scope="class")
    @classmethod
    def make_searcher(cls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeSearcher]:
        made: list[EmbeddedBackend] = []
        folder = tmp_path_factory.mktemp("embedded")

        def build(emb: Embedder, overrides: dict[str, Any]) -> World:
            path = folder / f"{uuid4().hex}.db"
            settings = Settings(
                backend="embedded", embedded_path=path, embedder="fake", **overrides
            )
            backend = EmbeddedBackend(settings.sqlite_path, emb.dimension, model=emb.name)
            made.append(backend)
            return World(backend, emb, settings, backend.refresh)

        yield world_factory(build)
        for backend in made:
            backend.close()
