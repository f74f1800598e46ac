"""What a merge policy does to a loaded index's segments (search latency is measured around it).

    python -m bench.segments --url http://127.0.0.1:9241 --alias bench-sc-clustered-1000000 \
        [--set segments_per_tier=5 floor_segment=256mb ...] [--quiet 60] [--timeout 1800] [--out F]

Reads the index's segments (count and sizes per shard copy), applies the given
`index.merge.policy.*` settings (all dynamic), and starts the merges they call for: an idle
index merges only when its writer flushes, so one document of each shard is written again with
its own `_source` (the corpus does not change), then the index is flushed. Then it waits until
no merge has run for --quiet seconds (or --timeout), and reads the segments again. Without
--set it only reads them. Run `python -m bench.scale_cluster --phases latency` before and after
for the search side.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch

from bench.replay import report
from bench.scale_cluster.settle import wait_no_merges
from bench.scale_cluster.size import segment_summary


def segments(client: OpenSearch, alias: str) -> dict[str, Any]:
    """The scale bench's segment counts, and each shard copy's segment sizes in MB, largest
    first."""
    sizes: dict[str, list[float]] = {}
    for r in client.cat.segments(index=alias, format="json", bytes="b"):
        sizes.setdefault(f"{r['shard']}{r['prirep']}", []).append(round(int(r["size"]) / 2**20, 1))
    return {**segment_summary(client, alias),
            "sizes_mb": {k: sorted(v, reverse=True) for k, v in sorted(sizes.items())}}  # fmt: skip


def rewrite_one_per_shard(client: OpenSearch, alias: str) -> list[str]:
    """Write one document of each primary shard again, unchanged, and flush: the writers then
    look for merges under the policy as it is now."""
    shards = int(client.cat.shards(index=alias, format="json", h="shard")[-1]["shard"]) + 1
    ids = []
    for shard in range(shards):
        hit = client.search(index=alias, params={"preference": f"_shards:{shard}"},
                            body={"size": 1, "query": {"match_all": {}}})["hits"]["hits"][0]  # fmt: skip
        client.index(index=hit["_index"], id=hit["_id"], body=hit["_source"])
        ids.append(hit["_id"])
    client.indices.flush(index=alias, params={"force": "true"})
    return ids


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--alias", required=True)
    ap.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE",
                    help="index.merge.policy.NAME settings to apply")  # fmt: skip
    ap.add_argument("--quiet", type=float, default=60)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    client = OpenSearch(args.url, timeout=120)
    got: dict[str, Any] = {"alias": args.alias, "load_avg_start": os.getloadavg()}
    index = next(iter(client.indices.get_alias(name=args.alias)))
    live = client.indices.get_settings(
        index=index, params={"include_defaults": "true", "flat_settings": "true"}
    )[index]
    prefix = "index.merge.policy."
    got["policy_before"] = {
        k[len(prefix) :]: v
        for part in ("defaults", "settings")  # what is set overrides the default
        for k, v in live.get(part, {}).items()
        if k.startswith(prefix)
    }
    got["before"] = segments(client, args.alias)
    if args.set:
        wanted = dict(kv.split("=", 1) for kv in args.set)
        client.indices.put_settings(
            index=index, body={"index": {f"merge.policy.{k}": v for k, v in wanted.items()}}
        )
        got["set"] = wanted
        got["rewritten"] = rewrite_one_per_shard(client, args.alias)
        st, waited, timed_out = wait_no_merges(client, args.alias, args.quiet, args.timeout)
        got["merging"] = {"waited_s": waited, "timed_out": timed_out, "merges_total": st["total"],
                          "merge_time_s": round(st["total_time_in_millis"] / 1000, 1)}  # fmt: skip
        got["after"] = segments(client, args.alias)
    got["load_avg_end"] = os.getloadavg()
    return report("bench.segments", args, argv, got)


if __name__ == "__main__":
    main()
