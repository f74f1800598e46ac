"""Reindex throughput and what the switch costs: items/s, write pause, alias swap, query latency.

    python -m bench.reindex --url http://127.0.0.1:9200 --items 10000 --model-items 300

1. One alias with `--items` sample items (FakeEmbedder vectors) is reindexed three times:
   server-side `_reindex` keeping vectors, point-in-time scan keeping vectors, and a scan that
   re-embeds every item with FakeEmbedder (hashing: the copy machinery, not a model).
2. A second alias with `--model-items` items is reindexed onto the real model (MiniLM int8,
   no vector cache): its items/s, extrapolated to `--items`, is what a model change costs.
During every run a thread searches the alias without pause; the figures say how many queries
failed and how slow they were overall and while writes were held for the swap.
Every index made here is deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from cli import sample
from indexer.inventory import physical_indices
from indexer.reindex import Reindexer
from suli.backends.opensearch import OpenSearchBackend
from suli.embedding import Embedder, FakeEmbedder, build_embedder
from suli.search_params import search_request
from suli.service import Searcher
from suli.settings import Settings

QUERIES = ["deploy rollback", "incident latency", "saved searches", "billing retro", "oncall"]


class Probe(threading.Thread):
    """Searches the alias in a loop; keeps (monotonic start, seconds, ok) per query."""

    def __init__(self, s: Settings) -> None:
        super().__init__(daemon=True)
        embedder = FakeEmbedder()
        self.backend = OpenSearchBackend(s, embedder.dimension, embedder.name)
        self.searcher = Searcher(self.backend, embedder, s)
        self.samples: list[tuple[float, float, bool]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        principal = self.searcher.principal("prn_ana")
        n = 0
        while not self.halt.is_set():
            t0 = time.monotonic()
            try:
                r = self.searcher.search(principal, search_request(QUERIES[n % 5], limit=10))
                ok = not r.degraded
            except Exception:  # counted as a failed query
                ok = False
            self.samples.append((t0, time.monotonic() - t0, ok))
            n += 1

    def stop(self) -> None:
        self.halt.set()
        self.join()
        self.backend.close()

    def stats(self, start: float = 0.0, end: float = float("inf")) -> dict[str, Any]:
        rows = [r for r in self.samples if start <= r[0] + r[1] and r[0] <= end]
        ms = sorted(r[1] * 1000 for r in rows)
        return {
            "queries": len(rows),
            "failed": sum(1 for r in rows if not r[2]),
            "p50_ms": round(statistics.median(ms), 1) if ms else None,
            "max_ms": round(ms[-1], 1) if ms else None,
        }


def _settings(url: str, alias: str, home: Path, shards: int, replicas: int) -> Settings:
    return Settings(
        opensearch_url=url,
        index_alias=alias,
        acl_index=f"{alias}-acl",
        embedder="fake",
        home=home,
        shards=shards,
        replicas=replicas,
    )


def seed(s: Settings, n: int) -> float:
    """The sample workspace with n items (fake vectors) behind the alias; seconds taken."""
    embedder = FakeEmbedder()
    backend = OpenSearchBackend(s, embedder.dimension, embedder.name)
    ws = sample.build(n)
    t0 = time.perf_counter()
    backend.ensure_ready()
    backend.put_principals(ws.principals)
    backend.put_acls(ws.acls)
    for start in range(0, n, 1000):
        part = ws.items[start : start + 1000]
        vectors = embedder.embed_documents([it.embed_text() for it in part])
        out = backend.upsert([(it, vectors[k]) for k, it in enumerate(part)])
        assert not out.rejected, list(out.rejected.items())[:3]
    backend.refresh()
    backend.close()
    return time.perf_counter() - t0


def reindex(s: Settings, embedder: Embedder, method: str, re_embed: bool) -> dict[str, Any]:
    """One reindex of the alias under a search loop; the old index is dropped afterwards."""
    marks: dict[str, float] = {}

    def progress(phase: str, done: int, total: int | None) -> None:
        marks.setdefault(phase, time.monotonic())

    backend = OpenSearchBackend(s, embedder.dimension, embedder.name)
    engine = Reindexer(backend, embedder, s.home / "rejects", on_progress=progress)
    probe = Probe(s)
    probe.start()
    t0 = time.monotonic()
    try:
        plan = engine.plan(method=method, re_embed=re_embed)
        report = engine.run(plan)
    finally:
        total = time.monotonic() - t0
        probe.stop()
    old = [p.name for p in physical_indices(backend.client, s.index_alias) if not p.live]
    if old:
        backend.client.indices.delete(index=",".join(old))
    backend.close()
    block = (marks.get("block", t0), marks.get("swapped", t0))
    return {
        "method": plan.method,
        "re_embed": plan.re_embed,
        "model": embedder.name,
        "items": report.copied,
        "copy_s": round(report.copy_seconds, 2),
        "items_per_s": round(report.items_per_s, 1),
        "total_s": round(total, 2),
        "writes_held_ms": report.blocked_ms,
        "swap_ms": report.swap_ms,
        "switch_steps_ms": report.steps_ms,
        "queries": probe.stats(),
        "queries_while_writes_held": probe.stats(*block),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--url", default=os.environ.get("SULI_OPENSEARCH_URL", "http://127.0.0.1:9200"))
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--model-items", type=int, default=300, help="0 skips the real model")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--replicas", type=int, default=0)
    args = ap.parse_args(argv)
    tag = uuid.uuid4().hex[:8]
    out: dict[str, Any] = {"url": args.url, "items": args.items, "runs": []}
    fake = FakeEmbedder()
    with tempfile.TemporaryDirectory() as home:
        s = _settings(args.url, f"bench-reindex-{tag}", Path(home), args.shards, args.replicas)
        model_s = _settings(args.url, f"bench-reindex-model-{tag}", Path(home), 1, 0)
        try:
            out["seed_s"] = round(seed(s, args.items), 2)
            for method, re_embed in (("server", False), ("scan", False), ("scan", True)):
                out["runs"].append(reindex(s, fake, method, re_embed))
                print(json.dumps(out["runs"][-1]), file=sys.stderr)
            if args.model_items:
                seed(model_s, args.model_items)
                minilm = build_embedder("minilm")
                run = reindex(model_s, minilm, "scan", True)
                run["extrapolated_s_for_items"] = round(args.items / run["items_per_s"], 1)
                out["runs"].append(run)
                print(json.dumps(run), file=sys.stderr)
        finally:
            client = OpenSearchBackend(s, 384).client
            made = client.indices.get(index=f"bench-reindex-*{tag}*")
            if made:  # by name: wildcard deletes may be refused (destructive_requires_name)
                client.indices.delete(index=",".join(made))
            client.close()
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
