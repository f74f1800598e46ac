"""NFCorpus (BEIR) loading: documents as Suli items, queries and qrels by split."""

from __future__ import annotations

import gzip
import json
import os
from collections import defaultdict
from pathlib import Path

from suli.models import Item

DATA = Path(
    os.environ.get(
        "SULI_NFCORPUS", Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nfcorpus"
    )
)
WORKSPACE = "nfcorpus"


def load_items(limit: int | None = None) -> list[Item]:
    """Each document as a workspace-wide artifact with no outcome (a neutral weight)."""
    items = []
    with gzip.open(DATA / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            items.append(
                Item(
                    id=d["_id"],
                    workspace=WORKSPACE,
                    title=d.get("title") or d["_id"],
                    body=d.get("text") or "",
                )
            )
            if limit and len(items) >= limit:
                break
    return items


def load_qrels(split: str) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with open(DATA / f"qrels-{split}.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            q, d, s = line.rstrip("\n").split("\t")
            qrels[q][d] = int(s)
    return dict(qrels)


def load_queries(ids: set[str]) -> dict[str, str]:
    out = {}
    with open(DATA / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d["_id"] in ids:
                out[d["_id"]] = d["text"]
    return out
