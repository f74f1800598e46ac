"""Disk per item of Suli's items index on a node: the same items, one merged segment.

    python -m bench.disk_per_item --url http://127.0.0.1:9200 --items 10000
    python -m bench.disk_per_item --url http://127.0.0.1:9230 --items 10000 --derived-source on

The items are the sample workspace's (`cli.sample.build`, the same for the same count) with the
deterministic fake embedder's 384-dimension vectors, the dimension of the bundled model. They
go in through Suli's own backend (its mapping, 1 shard, 0 replicas), then the index is
flushed and force-merged to one segment, so that two nodes compare on equal segment counts.
`--derived-source on` creates the index with k-NN derived source (3.x only: vectors left out of
the stored `_source` and rebuilt on read), which Suli's mapping turns off on 3.5.0. Prints one
JSON line: the store size, per item, and the share of each Lucene file kind when the node
reports it (`_stats/segments?include_segment_file_sizes`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any
from uuid import uuid4

from opensearchpy import OpenSearch

from cli import sample
from suli.backends.opensearch import OpenSearchBackend
from suli.embedding import FakeEmbedder
from suli.settings import Settings

BATCH = 500


def _create(backend: OpenSearchBackend, client: OpenSearch, alias: str, derived: bool) -> str:
    """The physical index with Suli's body, derived source as asked, behind the alias."""
    name = backend.physical_name()
    body = backend.index_body(shards=1, replicas=0)
    body["settings"]["index"]["knn.derived_source.enabled"] = derived
    client.indices.create(index=name, body=body)
    client.indices.put_alias(index=name, name=alias)
    return name


def measure(url: str, n: int, derived: bool) -> dict[str, Any]:
    """Index n sample items on the node at url and report the merged index's size."""
    alias = f"bench-disk-{uuid4().hex[:8]}"
    s = Settings(opensearch_url=url, index_alias=alias, acl_index=f"{alias}-acl", embedder="fake")
    embedder = FakeEmbedder()
    backend = OpenSearchBackend(s, embedder.dimension, embedder.name)
    client = OpenSearch(hosts=[url], timeout=300)
    data = sample.build(n).items[:n]
    try:
        index = _create(backend, client, alias, derived)
        backend.ensure_ready()
        started = time.monotonic()
        for at in range(0, len(data), BATCH):
            part = data[at : at + BATCH]
            vectors = embedder.embed_documents([it.embed_text() for it in part])
            out = backend.upsert([(it, vectors[k]) for k, it in enumerate(part)])
            assert not out.rejected, list(out.rejected.items())[:3]
        indexed_s = time.monotonic() - started
        client.indices.refresh(index=index)
        client.indices.flush(index=index)
        client.indices.forcemerge(index=index, params={"max_num_segments": 1})
        client.indices.refresh(index=index)
        count = client.count(index=index)["count"]
        stats = client.indices.stats(index=index, metric="store,segments",
                                     params={"include_segment_file_sizes": "true"})  # fmt: skip
        primaries = stats["indices"][index]["primaries"]
        store = primaries["store"]["size_in_bytes"]
        files = primaries["segments"].get("file_sizes", {})
        info = client.info()["version"]
        settings = client.indices.get_settings(index=index, flat_settings=True)[index]["settings"]
        return {
            "url": url,
            "opensearch": info["number"],
            "lucene": info["lucene_version"],
            "items": count,
            "derived_source": settings.get("index.knn.derived_source.enabled", "unset (2.x)"),
            "segments": primaries["segments"]["count"],
            "store_bytes": store,
            "bytes_per_item": round(store / count, 1),
            "file_bytes": {k: v["size_in_bytes"] for k, v in sorted(files.items())},
            "index_s": round(indexed_s, 1),
        }
    finally:
        backend.close()
        for name in client.indices.get(index=f"{alias}*", ignore_unavailable=True):
            client.indices.delete(index=name, ignore=[404])
        client.close()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--url", required=True)
    p.add_argument("--items", type=int, default=10000)
    p.add_argument("--derived-source", choices=["on", "off"], default="off")
    args = p.parse_args(argv)
    result = measure(args.url, args.items, args.derived_source == "on")
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
