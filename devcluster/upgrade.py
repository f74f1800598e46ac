"""A rolling upgrade of a local cluster, one node at a time, as an operator does it.

For node i: replica allocation limited to primaries, a flush, a clean stop, the node started
again on the new version with the same data path, allocation back to all, wait for green. The
other nodes serve throughout; with replicas every shard keeps a copy. Once every node runs the
new version, the saved spec says so and `up` starts that version with the data kept.

OpenSearch allows this from the last minor of the previous major (3.x nodes join a 2.19
cluster: a 3.5.0 node reports minimum_wire_compatibility_version 2.19.0). A shard whose primary
is on a new node cannot have its replica on an old one, so the order of steps matters.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

from devcluster import lines
from devcluster.cluster import DEFAULT_TIMEOUT, NODE_VERSION_FILE, SPEC_FILE, Cluster, load
from devcluster.errors import ClusterError
from devcluster.http import get_json
from devcluster.paths import state_dir

log = logging.getLogger("devcluster")

ALLOCATION = "cluster.routing.allocation.enable"


def _send(method: str, url: str, body: dict[str, Any] | None = None) -> Any:
    """A JSON request that must succeed; ClusterError with the node's answer otherwise."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.load(resp)
    except urllib.error.HTTPError as err:
        raise ClusterError(f"{method} {url}: HTTP {err.code} {err.read()[:300]!r}") from err
    except OSError as err:
        raise ClusterError(f"{method} {url}: {err}") from err


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _allocation(url: str, value: str | None) -> None:
    _send("PUT", f"{url}/_cluster/settings", {"persistent": {ALLOCATION: value}})


def _wait_nodes(cluster: Cluster, url: str, nodes: int, timeout: float) -> None:
    """Wait until the node at url sees exactly `nodes` nodes (a stopped one has left)."""
    deadline = time.monotonic() + timeout
    seen: Any = None
    while time.monotonic() < deadline:
        try:
            _, seen = get_json(f"{url}/_cluster/health", timeout=10.0)
        except (OSError, ValueError):
            seen = None
        if isinstance(seen, dict) and seen.get("number_of_nodes") == nodes:
            return
        time.sleep(0.5)
    raise ClusterError(f"{url} does not see {nodes} node(s) after {timeout:.0f} s: {seen}")


def upgrade_node(
    i: int, version: str, state: str | Path | None = None, timeout: float = DEFAULT_TIMEOUT
) -> dict[str, Any]:
    """One step of a rolling upgrade: node i (0-based) moves to `version` with its data.

    Returns the cluster health once green again. Refuses a downgrade (a node's data cannot be
    read by an older version), a single-node cluster (nothing would serve meanwhile) and a JDK
    the new version does not run on.
    """
    cluster = load(state)
    if cluster is None:
        raise ClusterError(f"no cluster in {state_dir(state)}; run `suli cluster up` first")
    target = lines.get(version)
    current = cluster.node_version(i)
    if _version_key(target.version) < _version_key(current):
        raise ClusterError(f"{cluster.spec.names[i]} runs {current}: no downgrade to {version}")
    others = [n for n in cluster.running() if n != i]
    if not others:
        raise ClusterError("a rolling upgrade needs other running nodes to serve meanwhile")
    jdk = cluster.jdk()
    if jdk.feature < target.java_min:
        raise ClusterError(
            f"the cluster runs on Java {jdk.version}; OpenSearch {target.version} needs "
            f">= {target.java_min}: restart it on a newer JDK first (`up --java`)"
        )
    url = cluster.urls[others[0]]
    started = time.monotonic()
    # Without this the cluster would start copying the stopped node's shards elsewhere and
    # copy them back once it returns: minutes of recovery for a restart of seconds.
    _allocation(url, "primaries")
    _send("POST", f"{url}/_flush")  # a clean commit point: the restarted copies recover fast
    cluster.stop(i)
    _wait_nodes(cluster, url, cluster.spec.nodes - 1, timeout)
    (cluster.home(i) / NODE_VERSION_FILE).write_text(f"{target.version}\n")
    cluster.start(i)
    _wait_nodes(cluster, url, cluster.spec.nodes, timeout)
    _allocation(url, None)  # back to the default, "all"
    health = cluster.wait_green(timeout)
    log.info(
        "%s upgraded %s -> %s, cluster green after %.1f s",
        cluster.spec.names[i], current, target.version, time.monotonic() - started,
    )  # fmt: skip
    if all(cluster.node_version(n) == target.version for n in range(cluster.spec.nodes)):
        (cluster.root / SPEC_FILE).write_text(
            replace(cluster.spec, version=target.version).to_json()
        )
        for n in range(cluster.spec.nodes):
            (cluster.home(n) / NODE_VERSION_FILE).unlink(missing_ok=True)
        log.info("every node runs %s: the saved cluster spec says so", target.version)
    return health
