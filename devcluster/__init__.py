"""Provision and run a local OpenSearch + k-NN from Maven Central, one JVM per node.

Two lines: 2.19.1 (default, Java 17+) and 3.5.0 (Java 21+); see devcluster.lines.

layout = provision()            # ~/.cache/suli/opensearch-2.19.1 (SULI_CLUSTER_CACHE)
cluster = up(nodes=3)           # state in ~/.cache/suli/cluster (SULI_CLUSTER_DIR)
cluster = up(version="3.5.0", http_port=9230, state="/tmp/os3")   # or SULI_CLUSTER_VERSION
cluster = up(secure=True, http_port=9270, state="/tmp/secure")     # TLS, users (devcluster.security)
cluster.kill(1); cluster.start(1); cluster.wait_green()
upgrade_node(0, "3.5.0", state)  # one step of a rolling upgrade (devcluster.upgrade)
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
from devcluster.lines import DEFAULT_VERSION, LINES, Line
from devcluster.paths import KNN_VERSION, OPENSEARCH_VERSION, cache_dir, state_dir
from devcluster.provision import Layout, provision
from devcluster.spec import ClusterSpec
from devcluster.upgrade import upgrade_node

__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFAULT_VERSION",
    "KNN_VERSION",
    "LINES",
    "OPENSEARCH_VERSION",
    "Cluster",
    "ClusterError",
    "ClusterSpec",
    "Layout",
    "Line",
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
    "upgrade_node",
]
