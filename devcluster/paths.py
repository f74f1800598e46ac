"""Where the local OpenSearch lives: artifact cache and node state, both outside git."""

from __future__ import annotations

import os
from pathlib import Path

from devcluster.lines import DEFAULT_VERSION, LINES

OPENSEARCH_VERSION = DEFAULT_VERSION
KNN_VERSION = LINES[DEFAULT_VERSION].knn


def _cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "suli"


def cache_dir(override: str | Path | None = None, version: str = DEFAULT_VERSION) -> Path:
    """Artifact cache of one OpenSearch line: argument, else $SULI_CLUSTER_CACHE, else
    ~/.cache/suli/opensearch-<version>.

    An explicit cache names the default line's folder (as it did before there were two
    lines); another line gets a sibling with its version appended, so the two never
    overwrite each other's jars.
    """
    chosen = override or os.environ.get("SULI_CLUSTER_CACHE")
    if not chosen:
        return (_cache_home() / f"opensearch-{version}").absolute()
    path = Path(chosen).expanduser().absolute()
    return path if version == DEFAULT_VERSION else path.with_name(f"{path.name}-{version}")


def state_dir(override: str | Path | None = None) -> Path:
    """Node homes, pids and logs: argument, else $SULI_CLUSTER_DIR, else ~/.cache/suli/cluster."""
    chosen = override or os.environ.get("SULI_CLUSTER_DIR")
    path = Path(chosen) if chosen else _cache_home() / "cluster"
    return path.expanduser().absolute()
