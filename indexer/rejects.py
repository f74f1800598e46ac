"""Counting rejected lines: the one count `suli status` shows on both backends (this module
imports no OpenSearch client, so the embedded store's status stays light)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any


def count_rejects(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Line counts of rejects files: each path is a file or a directory of `*.jsonl` files."""
    found: list[dict[str, Any]] = []
    for path in paths:
        files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
        for f in files:
            if f.is_file():
                with f.open(encoding="utf-8", errors="replace") as handle:
                    lines = sum(1 for line in handle if line.strip())
                if lines:
                    found.append({"path": str(f), "lines": lines})
    return found
