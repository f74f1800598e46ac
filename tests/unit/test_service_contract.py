"""The item-index contract against the in-memory backend, the test double of the Searcher's
unit tests: it passes the same rules as the real stores, so those tests can trust it. No
service is needed, so it runs in the unit tier."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the contract package

from contract.helpers import MakeSearcher, memory_world
from contract.suite import ItemIndexContract


class TestMemoryContract(ItemIndexContract):
    """Its directory runs in tests/unit/test_service_directory.py."""

    @pytest.fixture(scope="class")
    @classmethod
    def make_searcher(cls) -> MakeSearcher:
        return memory_world
