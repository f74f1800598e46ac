"""End-to-end answers on NFCorpus test through `Searcher.search`: ids, snippets and nDCG@10.

    python -m bench.searchpath --backend embedded --out bench/results/searchpath-after-embedded.json
    python -m bench.searchpath --compare before.json after.json

bench.quality fuses each query's legs offline, so it cannot see how the service builds a page
(what the legs return, the page fetch, snippets). This script runs every test query through
the service (limit 10, as a user's first page) and keeps each answer's ids, snippets, total
and relation; `--compare` reports nDCG@10 of both runs, the share of queries whose top 10 is
the same list, and the share whose snippets are identical.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.nfcorpus import WORKSPACE, load_qrels, load_queries
from bench.quality import CACHE, ensure_indexed
from suli.core import open_backend
from suli.embedding import build_embedder
from suli.evaluation import ndcg_at
from suli.models import Principal, SearchRequest
from suli.service import Searcher
from suli.settings import Settings


def answers(searcher: Searcher, queries: dict[str, str]) -> dict[str, Any]:
    who = Principal("prn_bench", WORKSPACE)
    out: dict[str, Any] = {}
    for qid, text in queries.items():
        resp = searcher.search(who, SearchRequest(query=text, limit=10))
        out[qid] = {
            "ids": [r.id for r in resp.results],
            "snippets": [r.snippet for r in resp.results],
            "total": resp.total,
            "relation": resp.total_relation,
        }
    return out


def compare(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    qrels = load_qrels("test")
    a, b = before["answers"], after["answers"]
    shared = sorted(set(a) & set(b))

    def mean_ndcg(run: dict[str, Any]) -> float:
        return sum(ndcg_at(run[q]["ids"], qrels.get(q, {})) for q in shared) / len(shared)

    same_top = sum(a[q]["ids"] == b[q]["ids"] for q in shared)
    same_snip = sum(a[q]["snippets"] == b[q]["snippets"] for q in shared)
    same_total = sum((a[q]["total"], a[q]["relation"]) == (b[q]["total"], b[q]["relation"])
                     for q in shared)  # fmt: skip
    return {
        "queries": len(shared),
        "ndcg@10 before": round(mean_ndcg(a), 4),
        "ndcg@10 after": round(mean_ndcg(b), 4),
        "same top 10": round(same_top / len(shared), 4),
        "same snippets": round(same_snip / len(shared), 4),
        "same total": round(same_total / len(shared), 4),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--backend", choices=["opensearch", "embedded"])
    ap.add_argument("--alias", default="bench-nfcorpus")
    ap.add_argument("--db", default=str(Path.home() / ".cache" / "suli" / "bench-nfcorpus.db"))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args(argv)
    if args.compare:
        got = compare(*(json.loads(p.read_text()) for p in args.compare))
        print(json.dumps(got, indent=1))
        return got
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
    ensure_indexed(backend, embedder, None)
    queries = load_queries(set(load_qrels("test")))
    t0 = time.perf_counter()
    report = {
        "backend": settings.backend,
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "answers": answers(Searcher(backend, embedder, settings), queries),
    }
    report["seconds"] = round(time.perf_counter() - t0, 1)
    text = json.dumps(report, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)
    print(f"{len(queries)} queries in {report['seconds']} s", file=sys.stderr)
    return report


if __name__ == "__main__":
    main()
