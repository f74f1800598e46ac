"""Indexing: Suli's indexer vs raw `helpers.bulk`, indexer embedding rate vs raw encode, query embed.

Superseded in part by bench.indexing_scale (bench/RESULTS.md section 7.1): its `reupsert`
compares the indexer with `helpers.bulk` at 10k items and its `workers` the embedding rate with
the raw encode, and bench.embed_speed measures the query embedding. Kept because
bench/RESULTS.md section 3 and bench/run-all run it.

    python -m bench.indexing --url http://127.0.0.1:9200 --rounds 3 --embed-passages 200

1. Write throughput: `indexer.pipeline.index_items` with precomputed (cached) vectors into a
   fresh alias vs `opensearchpy.helpers.bulk` of the very same documents (built beforehand, so
   the baseline pays nothing for building them) into a fresh index of the same mapping.
2. Embedding rate: `index_items` with the real model (uncached texts: NFCorpus passages with a
   suffix) into a throwaway embedded store vs the model's own batch encode of the same texts.
3. Query embedding: p50 of the real model embedding a short query.
Sides alternate round by round; every index and store made here is deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from opensearchpy import OpenSearch, helpers

from bench.nfcorpus import load_items
from bench.overhead import CACHE
from indexer.pipeline import index_items
from suli.backends.opensearch import OpenSearchBackend
from suli.backends.opensearch_bodies import item_to_doc
from suli.embedding import FloatArray, MiniLMEmbedder, build_embedder
from suli.models import Item
from suli.settings import Settings


class CachedVectors:
    """Returns the precomputed vector of each text: indexing without the model."""

    name = "all-MiniLM-L6-v2-int8"
    dimension = 384

    def __init__(self, texts: Sequence[str], vectors: FloatArray) -> None:
        self.rows = {t: i for i, t in enumerate(texts)}
        self.vectors = vectors

    def embed_documents(self, texts: Sequence[str], *, on_progress: Any = None) -> FloatArray:
        return self.vectors[[self.rows[t] for t in texts]]

    def embed_query(self, text: str) -> FloatArray:
        return self.vectors[self.rows[text]]


def write_round(
    url: str, items: Sequence[Item], vectors: FloatArray, first: str
) -> dict[str, float]:
    """One fresh index per side; seconds to write every item on each side."""
    alias = f"bench-idx-{uuid.uuid4().hex[:8]}"
    backend = OpenSearchBackend(
        Settings(opensearch_url=url, index_alias=alias, acl_index=f"{alias}-acl"), 384
    )
    backend.ensure_ready()
    raw_index = backend.create_physical()
    client = OpenSearch(url, timeout=60)
    docs = [
        {"_index": raw_index, "_id": it.id, "_source": item_to_doc(it, vectors[i])}
        for i, it in enumerate(items)
    ]
    emb = CachedVectors([it.embed_text() for it in items], vectors)
    out: dict[str, float] = {}

    def suli() -> None:
        t0 = time.perf_counter()
        s = index_items(enumerate(items), backend, emb)
        out["suli_index_items"] = time.perf_counter() - t0
        assert s.indexed == len(items) and not s.rejected, s

    def raw() -> None:
        t0 = time.perf_counter()
        ok, errors = helpers.bulk(client, docs, raise_on_error=False)
        out["raw_helpers_bulk"] = time.perf_counter() - t0
        assert ok == len(items) and not errors, errors

    try:
        for fn in (suli, raw) if first == "suli" else (raw, suli):
            fn()
    finally:
        names = list(client.indices.get_alias(name=alias))
        client.indices.delete(index=",".join([*names, raw_index, f"{alias}-acl"]))
    return out


def embed_round(model: MiniLMEmbedder, texts: list[str], first: str) -> dict[str, float]:
    """Passages per second: the indexer (embed + store) vs the model's batch encode alone."""
    from suli.backends.embedded import EmbeddedBackend

    items = [Item(id=f"e{i}", workspace="bench", title="", body=t) for i, t in enumerate(texts)]
    raw_texts = [it.embed_text() for it in items]
    out: dict[str, float] = {}

    def indexer() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            store = EmbeddedBackend(Path(tmp) / "e.db", 384)
            t0 = time.perf_counter()
            s = index_items(enumerate(items), store, model)
            out["indexer_passages_per_s"] = len(items) / (time.perf_counter() - t0)
            store.close()
            assert s.indexed == len(items), s

    def raw() -> None:
        t0 = time.perf_counter()
        model.embed_documents(raw_texts)
        out["raw_encode_passages_per_s"] = len(items) / (time.perf_counter() - t0)

    for fn in (indexer, raw) if first == "indexer" else (raw, indexer):
        fn()
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--url", default="http://127.0.0.1:9200")
    ap.add_argument("--limit-docs", type=int)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--embed-passages", type=int, default=200)
    ap.add_argument("--embed-rounds", type=int, default=2)
    ap.add_argument("--query-runs", type=int, default=50)
    args = ap.parse_args(argv)

    items = load_items(args.limit_docs)
    cached = build_embedder("minilm", CACHE)
    vectors = np.asarray(cached.embed_documents([it.embed_text() for it in items]), np.float32)
    writes: dict[str, list[float]] = {"suli_index_items": [], "raw_helpers_bulk": []}
    for r in range(args.rounds):
        for k, v in write_round(args.url, items, vectors, "suli" if r % 2 else "raw").items():
            writes[k].append(v)
    w_suli = statistics.median(writes["suli_index_items"])
    w_raw = statistics.median(writes["raw_helpers_bulk"])

    model = MiniLMEmbedder()
    # A suffix makes every text new to any cache; bodies are clipped to keep the run short.
    texts = [f"{it.title}. {it.body[:600]} (bench {uuid.uuid4().hex[:6]})" for it in items]
    texts = texts[: args.embed_passages]
    model.embed_documents(texts[:8])  # warm the session
    rates: dict[str, list[float]] = {"indexer_passages_per_s": [], "raw_encode_passages_per_s": []}
    for r in range(args.embed_rounds):
        for k, v in embed_round(model, texts, "indexer" if r % 2 else "raw").items():
            rates[k].append(v)
    e_idx = statistics.median(rates["indexer_passages_per_s"])
    e_raw = statistics.median(rates["raw_encode_passages_per_s"])

    qt = []
    for i in range(args.query_runs):
        t0 = time.perf_counter()
        model.embed_query(f"statin side effects {i}")
        qt.append(time.perf_counter() - t0)

    report = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "docs": len(items),
        "write_rounds": args.rounds,
        "write_s": {k: [round(x, 2) for x in v] for k, v in writes.items()},
        "write_docs_per_s": {"suli": round(len(items) / w_suli), "raw": round(len(items) / w_raw)},
        "write_ratio_suli_over_raw_throughput": round(w_raw / w_suli, 3),
        "embed_passages": len(texts),
        "embed_rates": {k: [round(x, 1) for x in v] for k, v in rates.items()},
        "embed_ratio_indexer_over_raw": round(e_idx / e_raw, 3),
        "query_embed_p50_ms": round(float(np.percentile(qt, 50)) * 1000, 2),
        "query_embed_p99_ms": round(float(np.percentile(qt, 99)) * 1000, 2),
    }
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
