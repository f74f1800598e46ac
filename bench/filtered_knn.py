"""Filtered k-NN recall@10: Suli's visibility-filtered vector leg vs exact search over the visible set.

    python -m bench.filtered_knn --url http://127.0.0.1:9200 --queries 100
    python -m bench.filtered_knn --backend embedded

NFCorpus documents (cached vectors) are spread over 1000 boards at random; a principal who sees
1000, 100, 10 or 1 of them sees 100 %, 10 %, 1 % or 0.1 % of the items. For each query the
backend's vector leg (k=10, visibility inside the k-NN clause) is compared with a numpy brute
force over exactly the items that principal may see. A throwaway alias / database is used.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.nfcorpus import WORKSPACE, load_items, load_qrels, load_queries
from bench.overhead import CACHE, query_vectors
from suli.backends.base import Backend, LegQuery
from suli.embedding import build_embedder
from suli.models import Filters, Item
from suli.settings import Settings
from suli.visibility import Visibility

BOARDS = 1000
FRACTIONS = {"100%": 1000, "10%": 100, "1%": 10, "0.1%": 1}
K = 10


def boarded(items: Sequence[Item], seed: int) -> list[Item]:
    rng = random.Random(seed)
    return [replace(it, board=f"brd_{rng.randrange(BOARDS):04d}") for it in items]


def open_target(backend: str, url: str, dim: int) -> tuple[Backend, Any]:
    """A fresh backend and a function that drops it."""
    if backend == "embedded":
        from suli.backends.embedded import EmbeddedBackend

        tmp = tempfile.TemporaryDirectory()
        eb = EmbeddedBackend(Path(tmp.name) / "knn.db", dim)
        return eb, tmp.cleanup
    from suli.backends.opensearch import OpenSearchBackend

    alias = f"bench-knn-{uuid.uuid4().hex[:8]}"
    ob = OpenSearchBackend(
        Settings(opensearch_url=url, index_alias=alias, acl_index=f"{alias}-acl"), dim
    )
    ob.ensure_ready()

    def drop() -> None:
        names = list(ob.client.indices.get_alias(name=alias))
        ob.client.indices.delete(index=",".join([*names, f"{alias}-acl"]))

    return ob, drop


def measure(
    backend: Backend,
    items: Sequence[Item],
    matrix: np.ndarray,
    qvecs: np.ndarray,
    seed: int,
    depth: int = Settings().candidate_depth,
) -> dict[str, dict[str, float]]:
    boards = np.array([it.board for it in items])
    ids = np.array([it.id for it in items])
    order = [f"brd_{b:04d}" for b in random.Random(seed + 1).sample(range(BOARDS), BOARDS)]
    out: dict[str, dict[str, float]] = {}
    for label, n in FRACTIONS.items():
        seen = frozenset(order[:n])
        vis = Visibility(WORKSPACE, "prn_bench", seen)
        mask = np.isin(boards, list(seen))
        vis_ids, vis_mat = ids[mask], matrix[mask]
        row: dict[str, float] = {"visible_items": int(mask.sum())}
        # k=10 asks the index for exactly 10; k=depth is how Suli's vector leg asks (top 10 of it).
        for k in (K, depth):
            recalls, lat = [], []
            for q in qvecs:
                exact = set(vis_ids[np.argsort(-(vis_mat @ q), kind="stable")[:K]])
                t0 = time.perf_counter()
                legs = backend.search(LegQuery(vis, Filters(), None, [float(x) for x in q], k))
                lat.append(time.perf_counter() - t0)
                assert not legs.errors, legs.errors
                got = {h.id for h in legs.vector[:K]}
                recalls.append(len(got & exact) / len(exact) if exact else 1.0)
            row[f"recall@10_k{k}"] = round(float(np.mean(recalls)), 4)
            row[f"min_recall_k{k}"] = round(float(np.min(recalls)), 3)
            row[f"p50_ms_k{k}"] = round(float(np.percentile(lat, 50)) * 1000, 2)
        out[label] = row
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--backend", choices=["opensearch", "embedded"], default="opensearch")
    ap.add_argument("--url", default="http://127.0.0.1:9200")
    ap.add_argument("--limit-docs", type=int)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)

    items = boarded(load_items(args.limit_docs), args.seed)
    embedder = build_embedder("minilm", CACHE)
    matrix = np.asarray(embedder.embed_documents([it.embed_text() for it in items]), np.float32)
    qrels = load_qrels("test")
    texts = list(load_queries(set(qrels)).values())[: args.queries]
    qv = query_vectors(texts)
    qvecs = np.stack([qv[t] for t in texts]).astype(np.float32)
    backend, drop = open_target(args.backend, args.url, matrix.shape[1])
    try:
        for s in range(0, len(items), 100):  # small bulks: a loaded node answers in time
            out = backend.upsert([(it, matrix[s + i]) for i, it in enumerate(items[s : s + 100])])
            assert not out.rejected, out.rejected
        refresh = getattr(backend, "refresh", None)
        if refresh:
            refresh()
        report = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "backend": args.backend,
            "docs": len(items),
            "queries": len(texts),
            "fractions": measure(backend, items, matrix, qvecs, args.seed),
        }
    finally:
        close = getattr(backend, "close", None)
        if close:
            close()
        drop()
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
