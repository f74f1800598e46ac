"""Typo tolerance on NFCorpus dev: the word leg's nDCG@10 on the clean queries and on a copy
with one typo each, with the typo clauses off ("before") and on ("after"), and its p50 cost.

    SULI_NFCORPUS=/work/shared/data/nfcorpus python -m bench.typos --backend embedded
    SULI_OPENSEARCH_URL=http://127.0.0.1:9200 python -m bench.typos --backend opensearch
    ... python -m bench.typos --hybrid [--backend ...] [--alias A | --db F]   # the whole search

The typo'd copy (`typo_queries`, fixed seed): in each query one word of 5+ letters gets one
edit, a swap of two neighbours, a dropped, an inserted or a substituted letter (a query with
no such word is kept as it is). The word leg alone is measured (depth 100, no vector leg):
it is where the typo clauses live, and it needs no embedding model to index. `--hybrid`
measures what a user gets instead: the first page (limit 10) of `Searcher.search` with the
shipped defaults, both legs and the bundled model (NFCorpus vectors from bench.quality's cache,
the same index bench.quality uses), clauses off and on.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import string
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from bench.nfcorpus import WORKSPACE, load_items, load_qrels, load_queries
from bench.quality import CACHE
from bench.quality import ensure_indexed as ensure_nfcorpus
from suli.backends.base import Backend, LegQuery
from suli.backends.embedded import items as embedded_items
from suli.backends.embedded import typos as embedded_typos
from suli.backends.opensearch import bodies as opensearch_bodies
from suli.core import open_backend
from suli.embedding import FakeEmbedder, build_embedder
from suli.evaluation import mean_metrics
from suli.models import Filters, Principal, SearchRequest
from suli.service import Searcher
from suli.settings import Settings
from suli.text import only_common_words, words
from suli.visibility import visibility_for

SEED = 20261201
DEPTH = 100
OPERATIONS = ("swap", "drop", "insert", "substitute")


def one_typo(word: str, rnd: random.Random) -> str:
    """`word` with one edit at a random place after its first letter (the first letter is
    kept: most typos are, and the typo clauses ask for it)."""
    op = rnd.choice(OPERATIONS)
    i = rnd.randrange(1, len(word) - 1) if op == "swap" else rnd.randrange(1, len(word))
    if op == "swap":
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if op == "drop":
        return word[:i] + word[i + 1 :]
    letter = rnd.choice(string.ascii_lowercase)
    if op == "insert":
        return word[:i] + letter + word[i:]
    return word[:i] + letter + word[i + 1 :]


def typo_queries(
    queries: dict[str, str], seed: int = SEED, df: dict[str, int] | None = None
) -> dict[str, str]:
    """Each query with one typo in one of its words of 5+ letters (by query id order): a
    random one, or with `df` (each word's document count) its rarest word in the collection
    (the one that matters most; ties: the first), among the words some document holds."""
    rnd = random.Random(seed)
    out = {}
    for qid in sorted(queries):
        ws = words(queries[qid])
        long = [w for w in ws if len(w) >= 5 and w.isalpha()]
        if df is not None:
            long = [w for w in long if df.get(w)]
        if not long:
            out[qid] = " ".join(ws)
            continue
        target = min(long, key=lambda w: df[w]) if df is not None else rnd.choice(long)
        typo = one_typo(target, rnd)
        out[qid] = " ".join(typo if w == target else w for w in ws)
    return out


def document_counts() -> dict[str, int]:
    """How many NFCorpus documents hold each word (suli.text.words of title and body)."""
    df: dict[str, int] = {}
    for it in load_items():
        for w in set(words(f"{it.title} {it.body}")):
            df[w] = df.get(w, 0) + 1
    return df


@contextmanager
def typo_weight(weight: float) -> Iterator[None]:
    """Corrections weighed by `weight` on both backends (for tuning suli.text.TYPO_WEIGHT)."""
    with (
        mock.patch.object(opensearch_bodies, "TYPO_WEIGHT", weight),
        mock.patch.object(embedded_items, "TYPO_WEIGHT", weight),
    ):
        yield


@contextmanager
def typo_clauses_off() -> Iterator[None]:
    """The word leg as it was before the typo clauses: exact words only."""
    with (
        mock.patch.object(opensearch_bodies, "typo_clauses", lambda text, flavour, known=None: []),
        mock.patch.object(
            embedded_typos,
            "text_match",
            lambda c, vis, text, flavour, *_: embedded_typos.TextMatch(
                embedded_typos.match_expression(text, flavour), None
            ),
        ),
    ):
        yield


def word_leg(backend: Backend, queries: dict[str, str]) -> tuple[dict[str, list[str]], float]:
    """Each query's word-leg ranking and the p50 time of one leg, in ms."""
    vis = visibility_for(Principal("prn_bench", WORKSPACE), [])
    runs, took = {}, []
    for qid, text in queries.items():
        flavour = "plain" if only_common_words(text) else "stemmed"
        t0 = time.perf_counter()
        legs = backend.search(LegQuery(vis, Filters(), text, None, DEPTH, flavour))
        took.append((time.perf_counter() - t0) * 1000)
        assert not legs.errors, legs.errors
        runs[qid] = [h.id for h in legs.text]
    return runs, statistics.median(took)


def first_pages(searcher: Searcher, queries: dict[str, str]) -> tuple[dict[str, list[str]], float]:
    """Each query's first page through the service and the p50 time of one search, in ms."""
    who = Principal("prn_bench", WORKSPACE)
    runs, took = {}, []
    for qid, text in queries.items():
        t0 = time.perf_counter()
        resp = searcher.search(who, SearchRequest(query=text, limit=10))
        took.append((time.perf_counter() - t0) * 1000)
        assert not resp.degraded, resp.degraded
        runs[qid] = [r.id for r in resp.results]
    return runs, statistics.median(took)


def before_after(
    ranked: Callable[[dict[str, str]], tuple[dict[str, list[str]], float]],
    clean: dict[str, str],
    typod: dict[str, str],
    qrels: dict[str, dict[str, int]],
) -> dict[str, Any]:
    """nDCG@10 and p50 of `ranked` on both query sets, typo clauses off then on, and the share
    of the clean score the typo'd queries keep (with the clauses on)."""
    out: dict[str, Any] = {}
    for name, queries in (("clean", clean), ("typo", typod)):
        with typo_clauses_off():
            before, p50_before = ranked(queries)
        after, p50_after = ranked(queries)
        out[name] = {
            "ndcg@10 before": round(mean_metrics(before, qrels)["ndcg@10"], 4),
            "ndcg@10 after": round(mean_metrics(after, qrels)["ndcg@10"], 4),
            "p50 ms before": round(p50_before, 2),
            "p50 ms after": round(p50_after, 2),
        }
    out["recovered"] = round(out["typo"]["ndcg@10 after"] / out["clean"]["ndcg@10 after"], 3)
    return out


def ensure_indexed(backend: Backend) -> None:
    items = load_items()
    if backend.count() == len(items):
        return
    emb = FakeEmbedder(backend.dimension)  # the word leg is measured: any vector will do
    for start in range(0, len(items), 500):
        chunk = items[start : start + 500]
        vecs = emb.embed_documents([i.embed_text() for i in chunk])
        out = backend.upsert([(it, vecs[n]) for n, it in enumerate(chunk)])
        assert not out.rejected, out.rejected
    backend.refresh()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", choices=["embedded", "opensearch"], default="embedded")
    ap.add_argument("--db", default="/tmp/suli-bench-typos.db")
    ap.add_argument("--alias", default="bench-typos")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--hybrid", action="store_true", help="the first page of the whole search")
    ap.add_argument(
        "--word",
        choices=["random", "rarest"],
        default="random",
        help="which word of each query gets the typo: a random one, or its rarest",
    )
    ap.add_argument(
        "--tune",
        metavar="W,W,...",
        help="with --hybrid: nDCG@10 of clean, random- and rarest-word typo queries for each "
        "correction weight (suli.text.TYPO_WEIGHT) instead of the before/after report",
    )
    args = ap.parse_args(argv)
    if args.hybrid:
        return hybrid(args)
    settings = Settings(
        backend=args.backend,
        embedded_path=Path(args.db),
        index_alias=args.alias,
        acl_index=f"{args.alias}-acl",
        embedder="fake",
    )
    backend = open_backend(settings, FakeEmbedder(64))
    ensure_indexed(backend)
    qrels = load_qrels(args.split)
    clean = load_queries(set(qrels))
    typod = typo_queries(clean, df=document_counts() if args.word == "rarest" else None)
    report: dict[str, Any] = {
        "backend": args.backend,
        "word": args.word,
        "split": args.split,
        "queries": len(clean),
        "changed": sum(1 for q in clean if " ".join(words(clean[q])) != typod[q]),
        "seed": SEED,
    }
    report |= before_after(lambda qs: word_leg(backend, qs), clean, typod, qrels)
    print(json.dumps(report, indent=2))
    backend.close()
    return report


def hybrid(args: argparse.Namespace) -> dict[str, Any]:
    """The typo figures of the whole search (both legs, gates, page) on the shipped defaults."""
    settings = Settings(
        backend=args.backend,
        embedded_path=Path(args.db),
        index_alias=args.alias,
        acl_index=f"{args.alias}-acl",
    )
    embedder = build_embedder("minilm", CACHE)
    backend = open_backend(settings, embedder)
    ensure_nfcorpus(backend, embedder, None)
    searcher = Searcher(backend, embedder, settings)
    qrels = load_qrels(args.split)
    clean = load_queries(set(qrels))
    if args.tune:
        return tune(searcher, clean, qrels, [float(w) for w in args.tune.split(",")], args)
    typod = typo_queries(clean, df=document_counts() if args.word == "rarest" else None)
    report: dict[str, Any] = {
        "backend": args.backend,
        "word": args.word,
        "measured": "hybrid first page (limit 10), shipped defaults",
        "split": args.split,
        "queries": len(clean),
        "changed": sum(1 for q in clean if " ".join(words(clean[q])) != typod[q]),
        "seed": SEED,
        "load_avg_before": [round(x, 2) for x in os.getloadavg()],
    }
    for queries in (clean, typod):
        first_pages(searcher, queries)  # query vectors computed (and cached) outside the timing
    report |= before_after(lambda qs: first_pages(searcher, qs), clean, typod, qrels)
    report["recovered before"] = round(
        report["typo"]["ndcg@10 before"] / report["clean"]["ndcg@10 before"], 3
    )
    report["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=2))
    backend.close()
    return report


def tune(
    searcher: Searcher,
    clean: dict[str, str],
    qrels: dict[str, dict[str, int]],
    weights: list[float],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """nDCG@10 of the first pages for each correction weight: clean queries, a typo in a
    random word, a typo in the rarest word; and the share of the clean score each keeps."""
    sets = {
        "clean": clean,
        "random": typo_queries(clean),
        "rarest": typo_queries(clean, df=document_counts()),
    }
    report: dict[str, Any] = {"backend": args.backend, "split": args.split, "weights": {}}
    for w in weights:
        with typo_weight(w):
            got = {
                name: round(mean_metrics(first_pages(searcher, qs)[0], qrels)["ndcg@10"], 4)
                for name, qs in sets.items()
            }
        got["random kept"] = round(got["random"] / got["clean"], 3)
        got["rarest kept"] = round(got["rarest"] / got["clean"], 3)
        report["weights"][str(w)] = got
        print(json.dumps({str(w): got}), flush=True)
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
