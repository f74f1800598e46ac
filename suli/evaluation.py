"""Retrieval quality metrics (nDCG@k with graded gains, recall@k) and BEIR-format readers."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

from suli.errors import InvalidInput


def ndcg_at(ranked: Sequence[str], rels: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k with linear gains (the grade itself) and log2 discounts, as BEIR / trec_eval."""
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted((g for g in rels.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: Sequence[str], rels: Mapping[str, int], k: int = 100) -> float:
    relevant = {d for d, g in rels.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def mean_metrics(
    runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, float]:
    """Mean nDCG@10 and recall@100 over the queries that have judgements."""
    qs = [q for q in qrels if any(g > 0 for g in qrels[q].values())]
    if not qs:
        raise InvalidInput("qrels: no query has a relevant document", "qrels")
    return {
        "ndcg@10": sum(ndcg_at(runs.get(q, ()), qrels[q], 10) for q in qs) / len(qs),
        "recall@100": sum(recall_at(runs.get(q, ()), qrels[q], 100) for q in qs) / len(qs),
        "queries": float(len(qs)),
    }


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """BEIR qrels TSV: `query-id  corpus-id  score`, with or without a header line."""
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or (n == 1 and not parts[2].lstrip("-").isdigit()):
                continue
            try:
                qrels[parts[0]][parts[1]] = int(parts[2])
            except ValueError:
                raise InvalidInput(f"qrels: line {n}: score must be an integer", "qrels") from None
    return dict(qrels)


def read_queries(path: Path, ids: set[str] | None = None) -> dict[str, str]:
    """BEIR queries JSONL: {"_id", "text"}; only ids in `ids` when given."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                qid, text = str(d["_id"]), str(d["text"])
            except (json.JSONDecodeError, KeyError, TypeError):
                raise InvalidInput(
                    f'queries: line {n}: expected {{"_id", "text"}}', "queries"
                ) from None
            if ids is None or qid in ids:
                out[qid] = text
    return out
