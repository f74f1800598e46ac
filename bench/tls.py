"""Suli on a secured node (TLS, users) against a plain one: same answers, and what TLS costs.

    python -m bench.tls --secure-state /tmp/secure --plain-url http://127.0.0.1:9200 \
        [--docs 1000] [--rounds 5] [--out bench/results/tls.txt]

The secured node is a running `suli cluster up --secure` (its state dir gives URL, CA and the
admin password); the plain node should be a `suli cluster up` of the same shape started about
as long ago (a long-serving node is faster than a new one, whatever its transport). The same NFCorpus subset (the first --docs documents, embedded by the bundled
model, vectors cached on disk) is indexed into a fresh alias on each node. Then:

1. quality: every test query whose relevant documents include one of the subset, both legs
   fetched through each backend and fused as the service does (bench.quality); hybrid
   nDCG@10 must be the same on both nodes;
2. latency: the core search (both legs in one `_msearch`, query vectors computed beforehand,
   so only the OpenSearch round trip differs) on each side, interleaved query by query with
   the side order rotating; p50/p99 per side and their ratio, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

from pydantic import SecretStr

from bench.nfcorpus import WORKSPACE, load_items, load_qrels, load_queries
from bench.overhead import interleave, summarise
from bench.quality import CACHE, fetch_legs, run, variants
from devcluster import load as load_cluster
from devcluster import security
from suli.backends.base import LegQuery
from suli.backends.opensearch import OpenSearchBackend
from suli.embedding import Embedder, build_embedder
from suli.models import Filters, Principal
from suli.settings import Settings
from suli.visibility import visibility_for

HYBRID = "hybrid tuned, gates on (default)"


def secured_settings(state: Path, alias: str) -> Settings:
    cluster = load_cluster(state)
    if cluster is None or not cluster.spec.secure or not cluster.running():
        sys.exit(f"{state} holds no running secured cluster (suli cluster up --secure)")
    made = security.material(state)
    return Settings(
        backend="opensearch",
        opensearch_url=cluster.url,
        opensearch_user=security.ADMIN_USER,
        opensearch_password=SecretStr(made.admin_password),
        opensearch_ca_certs=str(made.ca),
        index_alias=alias,
        acl_index=f"{alias}-acl",
    )


def index(backend: OpenSearchBackend, embedder: Embedder, docs: int) -> float:
    items = load_items(docs)
    vectors = embedder.embed_documents([i.embed_text() for i in items])
    backend.ensure_ready()
    t0 = time.perf_counter()
    for start in range(0, len(items), 500):
        chunk = items[start : start + 500]
        out = backend.upsert([(it, vectors[start + n]) for n, it in enumerate(chunk)])
        assert not out.rejected, out.rejected
    backend.refresh()
    return time.perf_counter() - t0


def subset_qrels(docs: set[str]) -> dict[str, dict[str, int]]:
    """Test qrels cut to the indexed documents; queries left with no relevant one dropped."""
    out = {}
    for qid, rels in load_qrels("test").items():
        kept = {d: s for d, s in rels.items() if d in docs}
        if any(s > 0 for s in kept.values()):
            out[qid] = kept
    return out


def drop(backend: OpenSearchBackend) -> None:
    client = backend.client
    found = client.indices.get(index=f"{backend.alias}*", ignore_unavailable=True)
    if found:
        client.indices.delete(index=",".join(found), ignore=[404])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--secure-state", type=Path, required=True)
    parser.add_argument("--plain-url", default="http://127.0.0.1:9200")
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--queries", type=int, default=40, help="queries timed per round")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured rounds first")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    embedder = build_embedder("minilm", CACHE)
    alias = f"bench-tls-{uuid4().hex[:12]}"
    sides = {
        "plain": Settings(
            backend="opensearch",
            opensearch_url=args.plain_url,
            index_alias=alias,
            acl_index=f"{alias}-acl",
        ),
        "tls": secured_settings(args.secure_state, alias),
    }
    backends = {
        n: OpenSearchBackend(s, embedder.dimension, embedder.name) for n, s in sides.items()
    }
    load_before = os.getloadavg()
    try:
        indexed_s = {n: round(index(b, embedder, args.docs), 1) for n, b in backends.items()}
        docs = {i.id for i in load_items(args.docs)}
        qrels = subset_qrels(docs)
        queries = load_queries(set(qrels))
        quality = {}
        for name, backend in backends.items():
            legs = fetch_legs(backend, embedder, queries)
            # The service's defaults (tuned weights, the meaning gates on), as searches run.
            quality[name] = run(legs, qrels, **variants(sides[name])[HYBRID])
        vis = visibility_for(Principal("prn_bench", WORKSPACE), [])
        texts = list(queries.values())[: args.queries]
        vectors = {t: [float(x) for x in embedder.embed_query(t)] for t in texts}

        def searcher(backend: OpenSearchBackend) -> Any:
            def one(text: str) -> None:
                legs = backend.search(LegQuery(vis, Filters(), text, vectors[text], 10))
                assert not legs.errors, legs.errors

            return one

        # Warm both (pools open, caches filled, the search path JIT-compiled): a node started
        # minutes ago measured 3-10x slower than one that has served for an hour.
        interleave({n: searcher(b) for n, b in backends.items()}, texts, args.warmup)
        times = interleave({n: searcher(b) for n, b in backends.items()}, texts, args.rounds)
        latency = summarise(times, "plain")
    finally:
        for backend in backends.values():
            drop(backend)
            backend.close()
    report = {
        "docs": len(docs),
        "queries": len(queries),
        "indexing_s": indexed_s,
        "ndcg@10 (hybrid, defaults)": {n: round(q["ndcg@10"], 4) for n, q in quality.items()},
        "same_ndcg": quality["plain"]["ndcg@10"] == quality["tls"]["ndcg@10"],
        "latency": latency,
        "p50_ratio_tls_vs_plain": latency["tls"]["p50_ratio"],
        "load_avg_before": [round(x, 2) for x in load_before],
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(
            " ".join(["$ python -m bench.tls", *(argv or sys.argv[1:])]) + "\n" + text + "\n"
        )
    return report


if __name__ == "__main__":
    main()
