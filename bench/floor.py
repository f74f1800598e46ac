"""Calibrate `meaning_floor`: NFCorpus dev nDCG@10 against the nonsense set finding nothing.

    python -m bench.floor                      # embedded NFCorpus + the sample workspace
    python -m bench.floor --json

For every floor on a grid it reports NFCorpus dev nDCG@10 / recall@100 (the service's fusion,
default margin and weights, via bench.quality) and how many queries of
bench/data/nonsense_queries.txt still return results on the sample workspace (as prn_ana and
prn_ben) and on NFCorpus. A nonsense query returns nothing once it has no word match and its
best meaning-only similarity is under the floor, so the table also shows the highest such
similarity seen. The real MiniLM model is used; vectors come from the shared cache.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from bench.nfcorpus import load_qrels, load_queries
from bench.quality import CACHE, Legs, ensure_indexed, fetch_legs, run, service_rank
from cli import sample
from suli.backends.base import Backend, LegQuery
from suli.backends.embedded import EmbeddedBackend
from suli.embedding import Embedder, build_embedder
from suli.models import Filters
from suli.settings import Settings
from suli.text import only_common_words
from suli.visibility import visibility_for

NONSENSE = Path(__file__).parent / "data" / "nonsense_queries.txt"
FLOORS = [0.2, 0.25, 0.275, 0.3, 0.31, 0.32, 0.325, 0.33, 0.34, 0.35, 0.375, 0.4, 0.45, 0.5]


def nonsense_queries(path: Path = NONSENSE) -> list[str]:
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def sample_legs(backend: Backend, embedder: Embedder, queries: list[str]) -> Legs:
    """Both legs of each query, as each of two sample principals (keys 'principal|query')."""
    ws = sample.build()
    acls = list(ws.acls)
    out: Legs = {}
    for pid in ("prn_ana", "prn_ben"):
        principal = next(p for p in ws.principals if p.id == pid)
        vis = visibility_for(principal, acls)
        for text in queries:
            vec = [float(x) for x in embedder.embed_query(text)]
            fields = "plain" if only_common_words(text) else "stemmed"
            legs = backend.search(LegQuery(vis, Filters(), text, vec, 100, fields))
            out[f"{pid}|{text}"] = (
                [(h.id, h.score) for h in legs.text],
                [(h.id, h.score) for h in legs.vector],
            )
    return out


def finds(legs: Legs, s: Settings, floor: float) -> dict[str, int]:
    """Kept results per query without a word match (a query sharing a word with an item finds
    it, as it should: the floor is about meaning-only hits), under the service's ranking."""
    return {q: len(service_rank(t, v, s, floor)) for q, (t, v) in legs.items() if not t}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--db", default=str(Path.home() / ".cache" / "suli" / "bench-nfcorpus.db"))
    ap.add_argument("--json", action="store_true")
    # For the smoke run: the fake embedder and a slice of NFCorpus (the figures need neither).
    ap.add_argument("--embedder", choices=["minilm", "fake"], default="minilm")
    ap.add_argument("--limit-docs", type=int)
    args = ap.parse_args(argv)
    s = Settings(embedder=args.embedder)
    embedder = build_embedder(args.embedder, CACHE)
    queries = nonsense_queries()

    with tempfile.TemporaryDirectory() as tmp:
        sb = EmbeddedBackend(Path(tmp) / "sample.db", embedder.dimension)
        sample.load(sb, embedder)
        on_sample = sample_legs(sb, embedder, queries)
        sb.close()

    nb = EmbeddedBackend(Path(args.db), embedder.dimension)
    ensure_indexed(nb, embedder, args.limit_docs)
    qrels = load_qrels("dev")
    dev = fetch_legs(nb, embedder, load_queries(set(qrels)))
    on_nf = fetch_legs(nb, embedder, {q: q for q in queries})

    report: dict[str, Any] = {
        "word_matches": {
            "sample": sorted({k for k, (t, _) in on_sample.items() if t}),
            "nfcorpus": sorted(q for q, (t, _) in on_nf.items() if t),
        },
        # the highest similarity a query with no word match reaches: the floor must pass it
        "best_meaning_similarity": {
            name: round(max((v[0][1] for t, v in legs.values() if v and not t), default=-1), 4)
            for name, legs in (("sample", on_sample), ("nfcorpus", on_nf))
        },
        "floors": [],
    }
    base = dict(
        k=s.rrf_k, text_weight=s.text_weight, vector_weight=s.vector_weight, margin=s.meaning_margin
    )
    no_floor = run(dev, qrels, **base, floor=-1.0)
    report["dev_no_floor"] = {m: round(v, 4) for m, v in no_floor.items()}
    for floor in FLOORS:
        m = run(dev, qrels, **base, floor=floor)
        report["floors"].append(
            {
                "floor": floor,
                "dev_ndcg@10": round(m["ndcg@10"], 4),
                "dev_recall@100": round(m["recall@100"], 4),
                "ndcg_cost": round(no_floor["ndcg@10"] - m["ndcg@10"], 4),
                "nonsense_with_results_sample": sum(
                    1 for n in finds(on_sample, s, floor).values() if n
                ),
                "nonsense_with_results_nfcorpus": sum(
                    1 for n in finds(on_nf, s, floor).values() if n
                ),
            }
        )
    nb.close()
    if args.json:
        print(json.dumps(report, indent=2))
        return report
    print("queries with a word match (not counted below):", report["word_matches"])
    print("best similarity of a query with no word match:", report["best_meaning_similarity"])
    print(f"dev without a floor: {report['dev_no_floor']}")
    print("floor  nDCG@10  cost    recall@100  no-word queries with results (sample/nfcorpus)")
    for r in report["floors"]:
        print(
            f"{r['floor']:<6} {r['dev_ndcg@10']:.4f}   {r['ndcg_cost']:+.4f} {r['dev_recall@100']:.4f}"
            f"      {r['nonsense_with_results_sample']}/{r['nonsense_with_results_nfcorpus']}"
        )
    return report


if __name__ == "__main__":
    main()
