"""The command line and the run: parse the arguments, then each phase in order for each size."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch

import bench.scale_cluster as package
from bench.clustered import CACHE_DIR, LEVELS
from bench.scale_cluster import concurrency, latency, load, recall, resources, settle, writes
from bench.scale_cluster.cluster import cluster_phase
from bench.scale_cluster.growth import growth
from bench.scale_cluster.record import Recorder, previous_rows
from bench.scale_cluster.size import SizeRun

PHASES = ("cluster", "load", "settle", "latency", "writes", "recall", "resources", "concurrency",
          "growth")  # fmt: skip
DEFAULT_PHASES = tuple(p for p in PHASES if p != "concurrency")
# The phases run once per size, each a function of that size's SizeRun.
PER_SIZE: dict[str, Callable[[SizeRun], dict[str, Any]]] = {
    "load": load.load,
    "settle": settle.settle,
    "latency": latency.latency,
    "writes": writes.writes,
    "recall": recall.recall,
    "resources": resources.resources,
    "concurrency": concurrency.concurrency,
}
STATE = Path.home() / ".cache" / "suli" / "bench-cluster"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m bench.scale_cluster",
        description=package.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--kind", choices=["clustered", "uniform"], default="clustered")
    ap.add_argument("--phases", nargs="+", choices=PHASES, default=list(DEFAULT_PHASES))
    ap.add_argument("--out", type=Path, default=Path("bench/results/scale_cluster.jsonl"))
    g = ap.add_argument_group("cluster")
    g.add_argument("--url", help="an existing cluster (no devcluster)")
    g.add_argument("--state", type=Path, default=STATE, help="devcluster state dir")
    g.add_argument("--nodes", type=int, default=3)
    g.add_argument("--http-port", type=int, default=9241)
    g.add_argument("--heap", default="2g")
    g.add_argument("--java", help="JDK home for the nodes (default: devcluster's choice)")
    g.add_argument("--plugins", nargs="*", default=[], help="extra node plugins (devcluster)")
    g = ap.add_argument_group("data and load")
    g.add_argument("--data-root", type=Path, default=CACHE_DIR)
    g.add_argument("--seed", type=int, default=11)
    g.add_argument("--centres", type=int, default=3000)
    g.add_argument("--prefix", default="bench-sc", help="alias = PREFIX-KIND-N")
    g.add_argument("--shards", type=int, help="primary shards (default: one per data node)")
    g.add_argument("--replicas", type=int, default=1)
    g.add_argument("--load-threads", type=int, default=2)
    g.add_argument("--batch", type=int, default=500)
    g.add_argument(
        "--no-load-replicas",
        dest="load_replicas",
        action="store_false",
        help="keep the replicas during the load (default: 0 until loaded)",
    )
    g.add_argument(
        "--no-load-refresh",
        dest="load_refresh",
        action="store_false",
        help="keep the 1 s refresh during the load (default: -1 until loaded)",
    )
    g.add_argument("--green-timeout", type=float, default=3600)
    g.add_argument("--load-timeout", type=float, default=120, help="seconds per bulk request")
    g = ap.add_argument_group("settle, latency, writes, recall")
    g.add_argument("--settle-quiet", type=float, default=60)
    g.add_argument("--settle-timeout", type=float, default=3600)
    g.add_argument("--queries", type=int, default=200)
    g.add_argument("--rounds", type=int, default=2)
    g.add_argument("--warmup", type=int, default=10, help="queries asked untimed first")
    g.add_argument("--principal", default="prn_v30", choices=list(LEVELS))
    g.add_argument("--write-rate", type=int, default=20, help="items per second")
    g.add_argument("--write-warmup", type=float, default=3.0, help="seconds before timing")
    g.add_argument("--chunk", type=int, default=50_000, help="rows per exact-search chunk")
    g.add_argument("--levels", type=int, nargs="+", default=[1, 4, 16, 32])
    g.add_argument(
        "--serve-workers",
        type=int,
        default=1,
        # Each worker process has its own query-vector cache and the prime pass (one
        # keep-alive connection) warms one of them: with two, the other embedded queries
        # inside the measured window (p50 at one client 101-116 ms against 47 ms with one
        # worker). One worker serves ~100 searches/s of Python (9.4 ms CPU each), above what
        # 3 nodes on 2 cores answer.
        help="`suli serve --workers` for the concurrency phase (default 1: see above)",
    )
    g.add_argument("--concurrency-seconds", type=float, default=30)
    g.add_argument(
        "--prime-settle",
        type=float,
        default=30.0,
        help="seconds after the prime for the service's background reads of corrections",
    )
    args = ap.parse_args(argv)
    if args.write_rate < 1:
        ap.error("--write-rate: at least 1 item a second")
    args.phases = [p for p in PHASES if p in args.phases]  # the documented order
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    rec = Recorder(args.out)
    found: dict[str, Any] = {}

    def cluster() -> dict[str, Any]:
        result, found["url"], found["cluster"] = cluster_phase(args)
        return result

    if "cluster" in args.phases:
        rec.run("cluster", None, args.kind, cluster, fatal=True)
    else:
        cluster()  # the URL and node count, without a result row
    client = OpenSearch(found["url"], timeout=60)
    shards = args.shards or int(client.cluster.health()["number_of_data_nodes"])
    per_size = [p for p in args.phases if p not in ("cluster", "growth")]
    for n in args.sizes:
        run = SizeRun(args, found["url"], shards, n)
        for phase in per_size:
            rec.run(phase, n, args.kind, partial(PER_SIZE[phase], run), fatal=phase == "load")
    if "growth" in args.phases:
        rec.run("growth", None, args.kind, lambda: growth(previous_rows(args.out), args.kind))
    return {"url": found["url"], "rows": rec.rows,
            "errors": [r for r in rec.rows if "error" in r]}  # fmt: skip
