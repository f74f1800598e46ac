"""Provision and run a local OpenSearch 2.19.1 + k-NN from Maven Central, one JVM per node.

layout = provision()            # ~/.cache/suli/opensearch-2.19.1 (SULI_CLUSTER_CACHE)
cluster = up(nodes=3)           # state in ~/.cache/suli/cluster (SULI_CLUSTER_DIR)
cluster.kill(1); cluster.start(1); cluster.wait_green()
down()
"""

from __future__ import annotations

from devcluster.cluster import (
    DEFAULT_TIMEOUT,
    Cluster,
    down,
    kill_node,
    load,
    start_node,
    status,
    tail,
    up,
)
from devcluster.errors import ClusterError, PortInUseError, ProvisionError, StartupError
from devcluster.http import free_port_pair
from devcluster.paths import KNN_VERSION, OPENSEARCH_VERSION, cache_dir, state_dir
from devcluster.provision import Layout, provision
from devcluster.spec import ClusterSpec

__all__ = [
    "DEFAULT_TIMEOUT",
    "KNN_VERSION",
    "OPENSEARCH_VERSION",
    "Cluster",
    "ClusterError",
    "ClusterSpec",
    "Layout",
    "PortInUseError",
    "ProvisionError",
    "StartupError",
    "cache_dir",
    "down",
    "free_port_pair",
    "kill_node",
    "load",
    "provision",
    "start_node",
    "state_dir",
    "status",
    "tail",
    "up",
]
