"""Retrieval quality on NFCorpus: BM25, dense and hybrid variants, tuned on dev, reported on test.

    SULI_OPENSEARCH_URL=http://127.0.0.1:9200 python -m bench.quality            # OpenSearch
    python -m bench.quality --backend embedded                                     # SQLite
    python -m bench.quality --tune     # every relevance choice on dev, both backends (bench/tuning.py)

Each query's two legs are fetched once (depth 100) through the backend; every variant is then
fused by the same `suli.ranking.rank` the service uses, so variants differ only in parameters.
A check runs a few queries through `Searcher.search` end to end and asserts the same ranking.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import mappings
from bench.nfcorpus import WORKSPACE, load_items, load_qrels, load_queries
from bench.tuning import (
    RESULTS,
    TUNE_SPLIT,
    TestSplitRefused,
    embedded_subject,
    opensearch_subject,
    refuse_test,
    tune,
)
from indexer.inventory import live_index, read_meta
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
    stale = _stale_mapping(backend)
    if stale:
        sys.exit(stale)
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


def _stale_mapping(backend: Backend) -> str | None:
    """Why an OpenSearch index built with another mapping cannot be measured (None: it can)."""
    client = getattr(backend, "client", None)
    if client is None:
        return None
    index = live_index(client, backend.alias)  # type: ignore[attr-defined]
    version = read_meta(client, index).get("mapping_version") if index else None
    if index and version != mappings.mapping_version():
        return (
            f"{index} has mapping v{version}, this code measures v{mappings.mapping_version()}: "
            "run `suli reindex` on it or use another --alias"
        )
    return None


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
            [(h.id, h.score) for h in legs.text],
            [(h.id, h.score) for h in legs.vector],
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


def service_rank(
    text: list[tuple[str, float]], vector: list[tuple[str, float]], s: Settings, floor: float
) -> list[Any]:
    """Two legs fused as the service fuses them under settings s (NFCorpus has no outcomes)."""
    return rank(
        text,
        vector,
        {},
        k=s.rrf_k,
        text_weight=s.text_weight,
        vector_weight=s.vector_weight,
        margin=s.meaning_margin,
        floor=floor,
        outcome_weights={},
    )


def check_service_agrees(searcher: Searcher, queries: dict[str, str], legs: Legs) -> None:
    """The service's own ranking equals the offline fusion for the default settings."""
    s = searcher.settings
    principal = Principal("prn_bench", WORKSPACE)
    for qid in list(queries)[:5]:
        got = searcher.search(principal, SearchRequest(query=queries[qid], limit=25))
        text, vector = legs[qid]
        want = service_rank(text, vector, s, s.meaning_floor)
        assert [r.id for r in got.results] == [r.id for r in want[:25]], qid


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--backend", choices=["opensearch", "embedded"])
    ap.add_argument("--alias", default="bench-nfcorpus")
    ap.add_argument("--db", default=str(Path.home() / ".cache" / "suli" / "bench-nfcorpus.db"))
    ap.add_argument("--limit-docs", type=int, help="smoke runs: index only the first N documents")
    ap.add_argument("--limit-queries", type=int)
    ap.add_argument(
        "--tune",
        action="store_true",
        help="tune every relevance choice on dev for both backends, then score test once",
    )
    ap.add_argument(
        "--tune-split",
        default=TUNE_SPLIT,
        help="the qrels tuning reads; anything but dev is refused",
    )
    ap.add_argument("--embedder", default="minilm", choices=["minilm", "fake"])
    ap.add_argument("--out", type=Path, default=RESULTS, help="where --tune writes its grid")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.tune:
        try:
            refuse_test(args.tune_split)
        except TestSplitRefused as e:
            ap.error(str(e))  # exit 2, before anything is read or indexed

    overrides: dict[str, Any] = {
        "index_alias": args.alias,
        "acl_index": f"{args.alias}-acl",
        "embedded_path": Path(args.db),
    }
    if args.backend:
        overrides["backend"] = args.backend
    settings = Settings(**overrides)
    embedder = build_embedder(args.embedder, CACHE)
    if args.tune:
        return run_tuning(settings, embedder, args)
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
        report[split] = {
            name: {m: round(v, 4) for m, v in run(legs, qrels, **dict(p)).items()}
            for name, p in variants(settings).items()
        }
        if split == "test":
            check_service_agrees(Searcher(backend, embedder, settings), queries, legs)
    if args.json:
        print(json.dumps(report, indent=2))
        return report
    print(f"backend {report['backend']}, {report['date']}")
    for split in ("dev", "test"):
        print(f"\n{split}: {'variant':<36} nDCG@10  recall@100")
        for name, m in report[split].items():
            print(f"     {name:<36} {m['ndcg@10']:.4f}   {m['recall@100']:.4f}")
    return report


def run_tuning(settings: Settings, embedder: Embedder, args: argparse.Namespace) -> dict[str, Any]:
    """Both backends (or --backend's one), indexed alike, tuned on dev by bench.tuning."""
    subjects = []
    names = [args.backend] if args.backend else ["opensearch", "embedded"]
    for name in names:
        backend = open_backend(settings.model_copy(update={"backend": name}), embedder)
        ensure_indexed(backend, embedder, args.limit_docs)
        subjects.append(
            opensearch_subject(backend) if name == "opensearch" else embedded_subject(backend)
        )
    report = tune(
        subjects,
        embedder,
        settings,
        split=args.tune_split,
        limit_queries=args.limit_queries,
        out_dir=args.out,
        log=lambda m: print(m, file=sys.stderr),
    )
    print(json.dumps({k: report[k] for k in ("chosen", "dev", "test")}, indent=1))
    return report


if __name__ == "__main__":
    main()
