"""The cluster phase: start (or reuse) a devcluster, or take `--url`; what each node runs."""

from __future__ import annotations

import argparse
import contextlib
import inspect
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch

from bench.scale_cluster.size import say

VECTOR_LOG = "Java vector incubator API enabled"


def node_logs_say(home: Path, line: str) -> bool:
    for path in sorted((home / "logs").glob("*.log")):
        with contextlib.suppress(OSError), path.open(errors="replace") as f:
            if any(line in row for row in f):
                return True
    return False


def cluster_phase(args: argparse.Namespace) -> tuple[dict[str, Any], str, Any]:
    """(result, url, devcluster Cluster or None)."""
    import devcluster

    cluster = None
    if args.url:
        url = args.url
    elif "cluster" in args.phases:
        kw: dict[str, Any] = {"nodes": args.nodes, "http_port": args.http_port,
                              "heap": args.heap, "state": args.state, "java": args.java}  # fmt: skip
        if args.plugins:
            # Hook for the extra-plugin option of devcluster (neural-search for the native
            # hybrid side of the concurrency phase): passed through once devcluster has it.
            if "plugins" not in inspect.signature(devcluster.up).parameters:
                raise SystemExit("--plugins: this devcluster cannot load extra plugins yet")
            kw["plugins"] = args.plugins
        say(f"cluster: {args.nodes} node(s) from port {args.http_port} in {args.state}")
        cluster = devcluster.up(**kw)
        url = cluster.url
    else:
        cluster = devcluster.load(args.state)
        if cluster is None or len(cluster.running()) != cluster.spec.nodes:
            raise SystemExit(f"no running cluster in {args.state}: add the cluster phase or --url")
        url = cluster.url
    client = OpenSearch(url, timeout=60)
    health = client.cluster.health()
    jvm = client.nodes.info(metric="jvm")["nodes"]
    nodes = {}
    for nd in jvm.values():
        row = {"java": nd["jvm"]["version"], "vm": nd["jvm"].get("vm_name"),
               "vector_module": any("jdk.incubator.vector" in x
                                    for x in nd["jvm"].get("input_arguments", []))}  # fmt: skip
        nodes[nd["name"]] = row
    if cluster is not None:
        for i, name in enumerate(cluster.spec.names):
            if name in nodes:
                nodes[name]["log_says_vector_api"] = node_logs_say(cluster.home(i), VECTOR_LOG)
    result = {
        "url": url, "managed": cluster is not None, "status": health["status"],
        "data_nodes": health["number_of_data_nodes"], "nodes": nodes,
        "heap": cluster.spec.heap if cluster is not None else None,
        "jdk": ({"home": str(jdk.home), "version": jdk.version, "simd": jdk.simd}
                if cluster is not None and (jdk := cluster.jdk()) else None),
        "version": client.info()["version"]["number"],
    }  # fmt: skip
    return result, url, cluster
