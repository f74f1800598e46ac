"""Copy a loaded index into a new index whose mapping differs in one way, for A/B timing.

    python -m bench.mapping_variant --url http://127.0.0.1:9241 \\
        --source bench-sc-clustered-100000 --dest bench-hl-control --merge 1
    python -m bench.mapping_variant --url http://127.0.0.1:9241 \\
        --source bench-sc-clustered-100000 --dest bench-hl-offsets --offsets --merge 1

The new index takes the source's settings (shards, replicas, analysis, similarity) and mapping,
changed only as asked (`--offsets`: `index_options: offsets` on the highlighted text fields and
their `.plain` subfields, so the unified highlighter reads offsets from the postings instead of
analysing each hit again); the items are copied server-side with `_reindex` (vectors come from
`_source`: nothing is embedded). `--merge N` force-merges to N segments per shard, so that two
copies made the same way compare on equal segment counts. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from opensearchpy import OpenSearch

from suli.backends.opensearch_bodies import HIGHLIGHT_FIELDS

_COPIED_SETTINGS = ("number_of_shards", "number_of_replicas", "knn", "similarity", "analysis")


def variant_mapping(mapping: dict[str, Any], *, offsets: bool) -> dict[str, Any]:
    """The source mapping with offsets in the postings of every highlighted field."""
    out = json.loads(json.dumps(mapping))
    if offsets:
        props = out["properties"]
        for name in HIGHLIGHT_FIELDS["stemmed"]:
            props[name]["index_options"] = "offsets"
            props[name]["fields"]["plain"]["index_options"] = "offsets"
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--url", default="http://127.0.0.1:9200")
    ap.add_argument("--source", required=True, help="index or alias to copy")
    ap.add_argument(
        "--dest",
        required=True,
        help="the new index (one holding as many items as the source is reused)",
    )
    ap.add_argument("--offsets", action="store_true")
    ap.add_argument("--merge", type=int, default=0, help="force-merge to N segments per shard")
    args = ap.parse_args(argv)
    client = OpenSearch(args.url, timeout=3600)
    got = client.indices.get(index=args.source)
    (src_index, src) = next(iter(got.items()))
    index_settings = src["settings"]["index"]
    settings = {k: index_settings[k] for k in _COPIED_SETTINGS if k in index_settings}
    # OpenSearch's bulk-load advice: no replica and no refresh while copying, then as the source
    loading = {**settings, "number_of_replicas": 0, "refresh_interval": "-1"}
    body = {
        "settings": {"index": loading},
        "mappings": variant_mapping(src["mappings"], offsets=args.offsets),
    }
    t0 = time.perf_counter()
    if not client.indices.exists(index=args.dest):  # a copy made before is reused (resume)
        client.indices.create(index=args.dest, body=body)
        print(f"copying {src_index} -> {args.dest}", file=sys.stderr, flush=True)
        # As a task, polled: the synchronous answer can carry more headers than http.client reads
        task = client.reindex(
            body={"source": {"index": src_index}, "dest": {"index": args.dest}},
            params={"wait_for_completion": "false"},
        )["task"]
        while not (got_task := client.tasks.get(task_id=task))["completed"]:
            status = got_task["task"]["status"]
            print(f"  {status['created']:,} of {status['total']:,}", file=sys.stderr, flush=True)
            time.sleep(10)
        r = got_task.get("response", {})
    else:
        r = {"total": None, "failures": []}
    client.indices.refresh(index=args.dest)
    want, have = (client.count(index=i)["count"] for i in (src_index, args.dest))
    if want != have:
        raise SystemExit(f"{args.dest} holds {have:,} items, {src_index} {want:,}: delete it first")
    copy_s = time.perf_counter() - t0
    merge_s = None
    if args.merge:
        t1 = time.perf_counter()
        client.indices.forcemerge(index=args.dest, params={"max_num_segments": args.merge})
        merge_s = time.perf_counter() - t1
    restore = {
        "number_of_replicas": settings.get("number_of_replicas", 1),
        "refresh_interval": None,
    }
    client.indices.put_settings(index=args.dest, body={"index": restore})
    client.cluster.health(index=args.dest, params={"wait_for_status": "green"})
    stats = client.indices.stats(index=args.dest)["indices"][args.dest]
    report = {
        "source": src_index,
        "dest": args.dest,
        "offsets": args.offsets,
        "copied": r.get("total"),
        "failures": len(r.get("failures", [])),
        "copy_seconds": round(copy_s, 1),
        "merge_seconds": None if merge_s is None else round(merge_s, 1),
        "primaries_bytes": stats["primaries"]["store"]["size_in_bytes"],
        "segments_primaries": stats["primaries"]["segments"]["count"],
        "load_avg_end": os.getloadavg(),
    }
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
