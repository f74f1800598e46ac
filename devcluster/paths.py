"""Where the local OpenSearch lives: artifact cache and node state, both outside git."""

from __future__ import annotations

import os
from pathlib import Path

OPENSEARCH_VERSION = "2.19.1"
KNN_VERSION = "2.19.1.0"


def _cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "suli"


def cache_dir(override: str | Path | None = None) -> Path:
    """Artifact cache: argument, else $SULI_CLUSTER_CACHE, else ~/.cache/suli/opensearch-<v>."""
    chosen = override or os.environ.get("SULI_CLUSTER_CACHE")
    path = Path(chosen) if chosen else _cache_home() / f"opensearch-{OPENSEARCH_VERSION}"
    return path.expanduser().absolute()


def state_dir(override: str | Path | None = None) -> Path:
    """Node homes, pids and logs: argument, else $SULI_CLUSTER_DIR, else ~/.cache/suli/cluster."""
    chosen = override or os.environ.get("SULI_CLUSTER_DIR")
    path = Path(chosen) if chosen else _cache_home() / "cluster"
    return path.expanduser().absolute()
