"""A node with the neural-search plugin beside k-NN, shared by the tests that need one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import devcluster
from bench import native_hybrid


@pytest.fixture(scope="session")
def neural_search_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[devcluster.Cluster]:
    """One devcluster node (free ports, own state dir) started as `bench.native_hybrid
    --start-node` starts it: neural-search 2.19.1.0 fetched from Maven Central into the
    artifact cache once (reruns reuse it), stopped at session end."""
    state = tmp_path_factory.mktemp("neural-search")
    try:
        cluster = native_hybrid.start_node(state, devcluster.free_port_pair())
    except devcluster.ClusterError as err:
        pytest.fail(f"could not start a node with neural-search: {err}", pytrace=False)
    try:
        yield cluster
    finally:
        devcluster.down(state)
