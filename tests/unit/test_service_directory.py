"""The Directory contract over the in-memory backend (the other backends run it with theirs)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the contract package

from contract.suite import DirectoryContract

from suli.backends.base import Directory
from suli.backends.memory import MemoryBackend


class TestMemoryDirectory(DirectoryContract):
    @pytest.fixture
    def directory(self) -> Directory:
        return MemoryBackend(8)
