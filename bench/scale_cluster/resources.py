"""The resources phase: heap and RSS per node, the index's store size and bytes per item."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from bench.scale_cluster.size import SizeRun


def rss_bytes(pid: int) -> int | None:
    try:
        for row in Path(f"/proc/{pid}/status").read_text().splitlines():
            if row.startswith("VmRSS:"):
                return int(row.split()[1]) * 1024
    except OSError:
        return None
    return None


def resources(run: SizeRun) -> dict[str, Any]:
    run.require_loaded()
    client = run.client
    stats = client.nodes.stats(metric="jvm,process")["nodes"]
    info = client.nodes.info(metric="process")["nodes"]
    local = urlparse(run.url).hostname in ("127.0.0.1", "localhost", "::1")
    nodes = {}
    for nid, st in stats.items():
        pid = info.get(nid, {}).get("process", {}).get("id")
        mem = st["jvm"]["mem"]
        nodes[st["name"]] = {
            "heap_used_mb": round(mem["heap_used_in_bytes"] / 2**20, 1),
            "heap_max_mb": round(mem["heap_max_in_bytes"] / 2**20, 1),
            "rss_mb": (round(r / 2**20, 1) if local and pid and (r := rss_bytes(pid))
                       else None),
            "virtual_mb": round(st["process"]["mem"]["total_virtual_in_bytes"] / 2**20, 1),
        }  # fmt: skip
    store = client.indices.stats(index=run.alias, metric="store,docs")["_all"]
    prim, total = store["primaries"]["store"]["size_in_bytes"], store["total"]["store"]["size_in_bytes"]  # fmt: skip
    return {
        "nodes": nodes, "docs": store["primaries"]["docs"]["count"],
        "docs_deleted": store["primaries"]["docs"]["deleted"],
        "store_primaries_mb": round(prim / 2**20, 1), "store_total_mb": round(total / 2**20, 1),
        "primary_bytes_per_million_items": int(prim / run.n * 1e6),
        "total_bytes_per_million_items": int(total / run.n * 1e6),
    }  # fmt: skip
