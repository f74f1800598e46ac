"""The item-index contract against the in-memory backend (the test double of the unit tier):
the Searcher's unit tests can trust it to behave as the real stores do."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import pytest

from suli.embedding import Embedder
from suli.models import BoardAcl, Item, Principal

from .helpers import MakeSearcher, World, memory_world
from .suite import ItemIndexContract


class TestMemoryContract(ItemIndexContract):
    """Its directory runs in tests/unit/test_service_directory.py. No service is needed, so
    the suite is part of the unit tier too (added to ItemIndexContract's `contract` mark)."""

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [pytest.mark.unit]

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
