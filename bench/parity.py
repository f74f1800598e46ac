"""Backend parity on NFCorpus test: hybrid nDCG@10 of OpenSearch vs embedded, and top-10 overlap.

SULI_OPENSEARCH_URL=http://127.0.0.1:9200 python -m bench.parity
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench.nfcorpus import load_qrels, load_queries
from bench.quality import CACHE, ensure_indexed, fetch_legs
from suli.core import open_backend
from suli.embedding import build_embedder
from suli.evaluation import mean_metrics
from suli.ranking import rank
from suli.settings import Settings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--alias", default="bench-nfcorpus")
    ap.add_argument("--db", default=str(Path.home() / ".cache" / "suli" / "bench-nfcorpus.db"))
    args = ap.parse_args()
    embedder = build_embedder("minilm", CACHE)
    qrels = load_qrels("test")
    queries = load_queries(set(qrels))
    runs: dict[str, dict[str, list[str]]] = {}
    for name in ("opensearch", "embedded"):
        s = Settings(
            backend=name,
            index_alias=args.alias,
            acl_index=f"{args.alias}-acl",
            embedded_path=Path(args.db),
        )
        backend = open_backend(s, embedder)
        ensure_indexed(backend, embedder, None)
        t0 = time.perf_counter()
        legs = fetch_legs(backend, embedder, queries)
        runs[name] = {
            q: [
                r.id
                for r in rank(
                    t,
                    v,
                    {},
                    k=s.rrf_k,
                    text_weight=s.text_weight,
                    vector_weight=s.vector_weight,
                    margin=s.meaning_margin,
                    outcome_weights={},
                )
            ]
            for q, (t, v) in legs.items()
        }
        m = mean_metrics(runs[name], qrels)
        bm25 = mean_metrics({q: [d for d, _ in t] for q, (t, _) in legs.items()}, qrels)
        print(
            f"{name:<11} hybrid nDCG@10 {m['ndcg@10']:.4f} recall@100 {m['recall@100']:.4f} | "
            f"BM25 nDCG@10 {bm25['ndcg@10']:.4f} | {len(queries)} queries in {time.perf_counter() - t0:.1f}s"
        )
    overlap = [
        len(set(runs["opensearch"][q][:10]) & set(runs["embedded"][q][:10]))
        / max(1, min(10, len(runs["opensearch"][q])))
        for q in queries
    ]
    print(f"top-10 overlap, mean over {len(overlap)} queries: {sum(overlap) / len(overlap):.1%}")


if __name__ == "__main__":
    main()
