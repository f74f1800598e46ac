"""The item-index contract against the in-memory backend, the test double of the Searcher's
unit tests: it passes the same rules as the real stores, so those tests can trust it. No
service is needed, so it runs in the unit tier."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the contract package

from contract.helpers import MakeSearcher, World, memory_world
from contract.suite import ItemIndexContract

from suli.embedding import Embedder
from suli.models import BoardAcl, Item, Principal


class TestMemoryContract(ItemIndexContract):
    """Its directory runs in tests/unit/test_service_directory.py."""

    @pytest.fixture(scope="class")
    @classmethod
    def make_searcher(cls) -> MakeSearcher:
        def make(
            items: Iterable[Item] = (),
            principals: Iterable[Principal] = (),
            acls: Iterable[BoardAcl] = (),
            *,
            embedder: Embedder | None = None,
            **overrides: Any,
        ) -> World:
            return memory_world(items, principals, acls, embedder=embedder, **overrides)

        return make
