"""What the phases of one size share: its data set, index, searcher and HTTP client, built on
first use, and the index helpers more than one phase needs."""

from __future__ import annotations

import argparse
import sys
import time
from functools import cached_property
from typing import Any

import numpy as np
from opensearchpy import OpenSearch

from bench.clustered import DIM, MODEL, WORKSPACE, DataSet, generate, queries
from bench.overhead import LookupEmbedder, http_client
from mappings import items_index
from suli.backends.opensearch import OpenSearchBackend
from suli.models import Principal
from suli.service import Searcher
from suli.settings import Settings

WRITTEN_PREFIX = "itm_w"  # ids of the items the writes phase adds (and deletes afterwards)
NORMAL_REFRESH = items_index(DIM)["settings"]["index"]["refresh_interval"]


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def segment_summary(client: OpenSearch, alias: str) -> dict[str, Any]:
    rows = client.cat.segments(index=alias, format="json")
    per: dict[str, int] = {}
    for r in rows:
        key = f"{r['shard']}{r['prirep']}"
        per[key] = per.get(key, 0) + 1
    return {
        "total": len(rows),
        "primaries": sum(1 for r in rows if r["prirep"] == "p"),
        "per_shard": dict(sorted(per.items())),
    }


def wait_green(client: OpenSearch, index: str, timeout: float) -> float:
    """Seconds until the index is green (all replicas placed); raises after timeout."""
    t0 = time.perf_counter()
    while True:
        h = client.cluster.health(index=index, wait_for_status="green", timeout="10s",
                                  params={"ignore": 408, "request_timeout": 30})  # fmt: skip
        if h.get("status") == "green" and not h.get("timed_out"):
            return round(time.perf_counter() - t0, 1)
        if time.perf_counter() - t0 > timeout:
            raise RuntimeError(f"{index} not green after {timeout:.0f} s: {h.get('status')}")
        say(f"  waiting for green: {h.get('status')}, {h.get('unassigned_shards')} unassigned, "
            f"{h.get('initializing_shards')} initializing")  # fmt: skip


def delete_written(client: OpenSearch, alias: str) -> int:
    """Drop what a writes phase added (also after a crash), so the index holds n items.
    Refreshed first: the writer's last items (indexed, not yet searchable) are found too."""
    client.indices.refresh(index=alias)
    r = client.delete_by_query(
        index=alias, body={"query": {"prefix": {"id": WRITTEN_PREFIX}}},
        params={"refresh": "true", "conflicts": "proceed", "request_timeout": 600},
    )  # fmt: skip
    return int(r.get("deleted", 0))


class SizeRun:
    """Everything the phases of one size share, built on first use."""

    def __init__(self, args: argparse.Namespace, url: str, shards: int, n: int) -> None:
        self.args, self.url, self.shards, self.n = args, url, shards, n
        self.alias = f"{args.prefix}-{args.kind}-{n}"
        self.progress_file = args.data_root / "progress" / f"{self.alias}.json"

    @cached_property
    def ds(self) -> DataSet:
        say(f"data set {self.args.kind} n={self.n}")
        return generate(self.n, self.args.kind, self.args.seed, self.args.centres,
                        self.args.data_root)  # fmt: skip

    @cached_property
    def settings(self) -> Settings:
        s = Settings(opensearch_url=self.url, index_alias=self.alias,
                     acl_index=f"{self.alias}-acl", shards=self.shards,
                     replicas=self.args.replicas)  # fmt: skip
        if self.args.kind == "uniform":
            # Random unit vectors sit near cosine 0 to every query: the meaning floor (tuned
            # for real embeddings) would drop every meaning-only hit.
            s = s.model_copy(update={"meaning_floor": -1.0})
        return s

    @cached_property
    def backend(self) -> OpenSearchBackend:
        return OpenSearchBackend(self.settings, DIM, MODEL)

    @cached_property
    def loader(self) -> OpenSearchBackend:
        """The load's writer: a bulk of 500 vectors on a busy node can take longer than the
        product's 10 s timeout, and a timed-out bulk is sent again (work done twice)."""
        s = self.settings.model_copy(update={"opensearch_timeout_s": self.args.load_timeout})
        return OpenSearchBackend(s, DIM, MODEL)

    @property
    def client(self) -> OpenSearch:
        return self.backend.client

    @cached_property
    def query_set(self) -> tuple[list[str], np.ndarray]:
        texts, vecs = queries(self.args.queries)
        return texts, vecs

    @cached_property
    def searcher(self) -> Searcher:
        texts, vecs = self.query_set
        emb = LookupEmbedder(dict(zip(texts, vecs, strict=True)), MODEL)
        return Searcher(self.backend, emb, self.settings)

    @cached_property
    def principal(self) -> Principal:
        return Principal(self.args.principal, WORKSPACE)

    @cached_property
    def http(self) -> tuple[Any, dict[str, str]]:
        return http_client(self.searcher, self.principal.id)

    def require_loaded(self) -> None:
        if not self.client.indices.exists_alias(name=self.alias):
            raise RuntimeError(f"no index {self.alias}: run the load phase first")
        have = self.backend.count()
        if have > self.n and delete_written(self.client, self.alias):  # a writes phase's, left
            have = self.backend.count()
        if have != self.n:
            raise RuntimeError(f"{self.alias} holds {have} items, not {self.n}: run the load phase")
