"""Retrieval quality on NFCorpus: BM25, dense and hybrid variants, tuned on dev, reported on test.

    SULI_OPENSEARCH_URL=http://127.0.0.1:9200 python -m bench.quality            # OpenSearch
    python -m bench.quality --backend embedded                                     # SQLite
    python -m bench.quality --tune                                                 # grid on dev

Each query's two legs are fetched once (depth 100) through the backend; every variant is then
fused by the same `suli.ranking.rank` the service uses, so variants differ only in parameters.
A check runs a few queries through `Searcher.search` end to end and asserts the same ranking.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.nfcorpus import WORKSPACE, load_items, load_qrels, load_queries
from suli.backends.base import Backend, LegQuery
from suli.core import open_backend
from suli.embedding import Embedder, build_embedder
from suli.evaluation import mean_metrics
from suli.models import Filters, Principal, SearchRequest
from suli.ranking import rank
from suli.service import Searcher
from suli.settings import Settings
from suli.text import only_common_words
from suli.visibility import visibility_for

DEPTH = 100
CACHE = Path.home() / ".cache" / "suli" / "vectors.sqlite"
Legs = dict[str, tuple[list[tuple[str, float]], list[tuple[str, float]]]]


def ensure_indexed(backend: Backend, embedder: Embedder, limit: int | None) -> None:
    items = load_items(limit)
    if backend.count() == len(items):
        return
    t0 = time.perf_counter()
    print(f"indexing {len(items)} documents ...", file=sys.stderr)
    vectors = embedder.embed_documents([i.embed_text() for i in items])
    for start in range(0, len(items), 500):
        chunk = items[start : start + 500]
        out = backend.upsert([(it, vectors[start + n]) for n, it in enumerate(chunk)])
        assert not out.rejected, out.rejected
    refresh = getattr(backend, "refresh", None)
    if refresh:
        refresh()
    print(f"indexed in {time.perf_counter() - t0:.1f}s", file=sys.stderr)


def fetch_legs(backend: Backend, embedder: Embedder, queries: dict[str, str]) -> Legs:
    vis = visibility_for(Principal("prn_bench", WORKSPACE), [])
    out: Legs = {}
    for qid, text in queries.items():
        vec = [float(x) for x in embedder.embed_query(text)]
        legs = backend.search(
            LegQuery(
                vis, Filters(), text, vec, DEPTH, "plain" if only_common_words(text) else "stemmed"
            )
        )
        assert not legs.errors, legs.errors
        out[qid] = (
            [(h.item.id, h.score) for h in legs.text],
            [(h.item.id, h.score) for h in legs.vector],
        )
    return out


def run(legs: Legs, qrels: dict[str, dict[str, int]], **p: Any) -> dict[str, float]:
    """Mean metrics of one fusion variant over precomputed legs."""
    mode = p.pop("mode", "hybrid")
    runs = {}
    for qid, (text, vector) in legs.items():
        if mode == "text":
            runs[qid] = [d for d, _ in text]
        elif mode == "vector":
            runs[qid] = [d for d, _ in vector]
        else:
            ranked = rank(text, vector, {}, outcome_weights={}, **p)
            runs[qid] = [r.id for r in ranked]
    return mean_metrics(runs, qrels)


def variants(s: Settings) -> dict[str, dict[str, Any]]:
    tuned = dict(
        k=s.rrf_k,
        text_weight=s.text_weight,
        vector_weight=s.vector_weight,
        margin=s.meaning_margin,
        floor=s.meaning_floor,
    )
    return {
        "bm25 (text leg)": {"mode": "text"},
        "dense (vector leg)": {"mode": "vector"},
        "hybrid rrf k=60, no gates": dict(
            k=60, text_weight=1, vector_weight=1, margin=0, gates=False
        ),
        "hybrid rrf k=10, no gates": dict(
            k=10, text_weight=1, vector_weight=1, margin=0, gates=False
        ),
        "hybrid k=60, weighted legs text 1 / vector 0.6, no gates": dict(
            k=60, text_weight=1, vector_weight=0.6, margin=0, gates=False
        ),
        "hybrid k=60, weighted legs text 1 / vector 1.5, no gates": dict(
            k=60, text_weight=1, vector_weight=1.5, margin=0, gates=False
        ),
        "hybrid tuned, no gates": {**tuned, "gates": False},
        "hybrid tuned, gates on (default)": {**tuned, "gates": True},
    }


def tune(legs: Legs, qrels: dict[str, dict[str, int]]) -> list[tuple[float, dict[str, Any]]]:
    grid = []
    for k, vw, margin in itertools.product(
        (10, 20, 30, 40, 60, 80), (0.6, 0.8, 1.0, 1.2, 1.5, 2.0), (0.05, 0.1, 0.15, 0.2, 0.3, 2.0)
    ):
        p = dict(k=k, text_weight=1.0, vector_weight=vw, margin=margin, gates=True)
        grid.append((run(legs, qrels, **p)["ndcg@10"], p))
    grid.sort(key=lambda t: -t[0])
    return grid


def check_service_agrees(searcher: Searcher, queries: dict[str, str], legs: Legs) -> None:
    """The service's own ranking equals the offline fusion for the default settings."""
    s = searcher.settings
    principal = Principal("prn_bench", WORKSPACE)
    for qid in list(queries)[:5]:
        got = searcher.search(principal, SearchRequest(query=queries[qid], limit=25))
        text, vector = legs[qid]
        want = rank(
            text,
            vector,
            {},
            k=s.rrf_k,
            text_weight=s.text_weight,
            vector_weight=s.vector_weight,
            margin=s.meaning_margin,
            floor=s.meaning_floor,
            outcome_weights={},
        )
        assert [r.id for r in got.results] == [r.id for r in want[:25]], qid


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--backend", choices=["opensearch", "embedded"])
    ap.add_argument("--alias", default="bench-nfcorpus")
    ap.add_argument("--db", default=str(Path.home() / ".cache" / "suli" / "bench-nfcorpus.db"))
    ap.add_argument("--limit-docs", type=int, help="smoke runs: index only the first N documents")
    ap.add_argument("--limit-queries", type=int)
    ap.add_argument("--tune", action="store_true", help="grid-search fusion parameters on dev")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    overrides: dict[str, Any] = {
        "index_alias": args.alias,
        "acl_index": f"{args.alias}-acl",
        "embedded_path": Path(args.db),
    }
    if args.backend:
        overrides["backend"] = args.backend
    settings = Settings(**overrides)
    embedder = build_embedder("minilm", CACHE)
    backend = open_backend(settings, embedder)
    ensure_indexed(backend, embedder, args.limit_docs)

    report: dict[str, Any] = {"backend": settings.backend, "date": time.strftime("%Y-%m-%d")}
    for split in ("dev", "test"):
        qrels = load_qrels(split)
        queries = load_queries(set(qrels))
        if args.limit_queries:
            queries = dict(list(queries.items())[: args.limit_queries])
            qrels = {q: qrels[q] for q in queries}
        t0 = time.perf_counter()
        legs = fetch_legs(backend, embedder, queries)
        report[f"{split}_fetch_s"] = round(time.perf_counter() - t0, 1)
        if split == "dev" and args.tune:
            best = tune(legs, qrels)
            report["tuning_top5_dev"] = [{"ndcg@10": round(n, 4), **p} for n, p in best[:5]]
        report[split] = {
            name: {m: round(v, 4) for m, v in run(legs, qrels, **dict(p)).items()}
            for name, p in variants(settings).items()
        }
        if split == "test":
            check_service_agrees(Searcher(backend, embedder, settings), queries, legs)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"backend {report['backend']}, {report['date']}")
    for split in ("dev", "test"):
        print(f"\n{split}: {'variant':<36} nDCG@10  recall@100")
        for name, m in report[split].items():
            print(f"     {name:<36} {m['ndcg@10']:.4f}   {m['recall@100']:.4f}")
    if "tuning_top5_dev" in report:
        print("\nbest on dev:", *report["tuning_top5_dev"], sep="\n  ")


if __name__ == "__main__":
    main()
