"""Native hybrid: OpenSearch's `hybrid` query + RRF score-ranker vs Suli's fusion in Python.

    python -m bench.native_hybrid --start-node            # fetch plugin, start :9290, run, stop
    python -m bench.native_hybrid --url http://127.0.0.1:9290 --queries 100 --rounds 3

Needs a node with the neural-search plugin (2.19.1.0, Maven Central); `--start-node` starts a
separate single devcluster node with it (own state dir, port 9290) so shared nodes are
untouched (`suli cluster up --plugin neural-search` starts such a node by hand). NFCorpus is
indexed there from the cached vectors. Both sides use the same bodies:
Suli's BM25 and filtered k-NN legs (depth 100) and k=60; Suli runs with neutral weights and
no meaning gate (meaning_margin=2.0). Sides alternate query by query.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from opensearchpy import OpenSearch

import devcluster
from bench.nfcorpus import WORKSPACE, load_items, load_qrels, load_queries
from bench.overhead import CACHE, PRINCIPAL, LookupEmbedder, interleave, query_vectors, summarise
from suli.backends.base import LegQuery, TextFields
from suli.backends.opensearch import OpenSearchBackend, keys
from suli.backends.opensearch.bodies import (
    SOURCE_EXCLUDES,
    text_leg,
    text_match,
    vector_leg,
)
from suli.embedding import build_embedder
from suli.models import Filters, SearchRequest
from suli.service import Searcher
from suli.settings import Settings
from suli.text import only_common_words
from suli.visibility import Visibility, visibility_for

# The highlight block Suli's page fetch sent before the core made every snippet (suli.snippets):
# the native query carries it, so both sides show marked fragments; bench.snippet_fidelity
# compares the core's marks with the engine's under it.
HIGHLIGHT_FIELDS: dict[TextFields, list[str]] = {
    "stemmed": ["title", "body", "caption"],
    "plain": ["title.plain", "body.plain", "caption.plain"],
}
# How far into a field the highlighter analyses, in UTF-16 code units (Java's string length):
# without it OpenSearch fails the whole search when a matching item's field is longer than
# `index.highlight.max_analyzed_offset` (1,000,000 by default), and the validator admits a
# body of 1,000,000 characters, which an emoji doubles. Past this offset a long body simply
# gives no fragment. It may not exceed the index setting, so it is that setting's default.
HIGHLIGHT_MAX_OFFSET = 1_000_000


def highlight(words: dict[str, Any], flavour: TextFields) -> dict[str, Any]:
    """One fragment per field of the page's items, marked where `words` (the text leg's
    scoring clause, text_match) match them. Never the leg's filters: the highlighter marks
    every term a query names, and a filter's values ("artifact", a tag) would be marked
    wherever they stand in an item's text as if they had been searched for."""
    return {
        "encoder": "html",
        "pre_tags": ["<mark>"],
        "post_tags": ["</mark>"],
        "fragment_size": 160,
        "number_of_fragments": 1,
        # The query names the combined field; the fragments come from title, body and
        # caption, which share its analyzer, so their terms are the query's terms.
        "require_field_match": False,
        "max_analyzer_offset": HIGHLIGHT_MAX_OFFSET,
        "highlight_query": words,
        "fields": {f: {} for f in HIGHLIGHT_FIELDS[flavour]},
    }


PIPELINE = "suli-bench-rrf"
PLUGIN = "neural-search"  # devcluster.plugins.KNOWN: org.opensearch.plugin:neural-search:2.19.1.0


def start_node(state: Path, port: int) -> devcluster.Cluster:
    """A single node with k-NN + neural-search on `port` (devcluster; plugin from Maven Central)."""
    return devcluster.up(nodes=1, http_port=port, heap="768m", state=state, plugins=[PLUGIN])


def ensure_corpus(url: str, alias: str, limit: int | None) -> OpenSearchBackend:
    """NFCorpus from the cached vectors, indexed once; the RRF search pipeline."""
    settings = Settings(opensearch_url=url, index_alias=alias, acl_index=f"{alias}-acl")
    backend = OpenSearchBackend(settings, 384, "all-MiniLM-L6-v2-int8")
    backend.ensure_ready()
    items = load_items(limit)
    if backend.count() != len(items):
        vecs = build_embedder("minilm", CACHE).embed_documents([i.embed_text() for i in items])
        for s in range(0, len(items), 500):
            out = backend.upsert([(it, vecs[s + n]) for n, it in enumerate(items[s : s + 500])])
            assert not out.rejected, out.rejected
        backend.refresh()
    put_rrf_pipeline(backend.client)
    return backend


def put_rrf_pipeline(client: OpenSearch, name: str = PIPELINE, rank_constant: int = 60) -> None:
    """The search pipeline that fuses a `hybrid` query's sub-queries by RRF, as Suli's k does."""
    client.transport.perform_request(
        "PUT",
        f"/_search/pipeline/{name}",
        body={
            "description": "RRF over hybrid sub-queries (bench)",
            "phase_results_processors": [
                {
                    "score-ranker-processor": {
                        "combination": {"technique": "rrf", "rank_constant": rank_constant}
                    }
                }
            ],
        },
    )


def same_top10(q: str, native: list[tuple[str, float]], suli: list[tuple[str, float]]) -> None:
    """The claim, asserted: both sides return the same top 10 with the same RRF scores, except
    where items tie (equal scores may come in any order, and the 10th place may go to either)."""
    assert len(native) == len(suli), (q, native, suli)
    for (_, ns), (_, ss) in zip(native, suli, strict=True):
        assert abs(ns - ss) < 1e-6, (q, native, suli)  # the same score at every rank
    if native:
        last = native[-1][1]
        differ = {i for i, _ in native} ^ {i for i, _ in suli}
        tied = {i for i, sc in (*native, *suli) if abs(sc - last) < 1e-6}
        assert differ <= tied, (q, differ, native, suli)


def hybrid_body(
    vis: Visibility,
    text: str,
    vec: Sequence[float],
    depth: int,
    ef_search: int | None = Settings().ef_search,
) -> dict[str, Any]:
    """The same two leg queries as Suli's (same ef_search), as sub-queries of one `hybrid`."""
    fields = "plain" if only_common_words(text) else "stemmed"
    q = LegQuery(vis, Filters(), text, [float(x) for x in vec], depth, fields)
    text_body = text_leg(q)
    return {
        "size": 10,
        "_source": {"excludes": SOURCE_EXCLUDES},
        "query": {
            "hybrid": {
                "pagination_depth": depth,  # candidates per sub-query, like Suli's depth
                "queries": [text_body["query"], vector_leg(q, ef_search)["query"]],
            }
        },
        # Suli's own highlight block (the one its page fetch sends for the page's text hits)
        "highlight": highlight(text_match(text, fields), fields),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--url", default="http://127.0.0.1:9290")
    ap.add_argument("--start-node", action="store_true")
    ap.add_argument("--state", default=str(Path.home() / ".cache" / "suli" / "bench-neural"))
    ap.add_argument("--alias", default="bench-hybrid")
    ap.add_argument("--limit-docs", type=int)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)

    if not args.start_node:
        return run(args)
    start_node(Path(args.state), int(args.url.rsplit(":", 1)[1]))
    try:
        return run(args)
    finally:
        devcluster.down(args.state)


def run(args: argparse.Namespace) -> dict[str, Any]:
    backend = ensure_corpus(args.url, args.alias, args.limit_docs)
    texts = list(load_queries(set(load_qrels("test"))).values())[: args.queries]
    vectors = query_vectors(texts)
    settings = Settings(
        opensearch_url=args.url,
        index_alias=args.alias,
        acl_index=f"{args.alias}-acl",
        meaning_margin=2.0,  # native hybrid has no meaning-only gates: lift both
        meaning_floor=-1.0,
        text_weight=1.0,
        vector_weight=1.0,
        rrf_k=60,
    )
    searcher = Searcher(backend, LookupEmbedder(vectors), settings)
    backend.put_principals([PRINCIPAL])
    backend.refresh()
    vis = visibility_for(PRINCIPAL, backend.acls(WORKSPACE))
    client = backend.client
    depth = settings.candidate_depth

    def native_scored(q: str) -> list[tuple[str, float]]:
        r = client.search(
            index=args.alias,
            body=hybrid_body(vis, q, vectors[q], depth),
            params={"search_pipeline": PIPELINE},
        )
        # _id is the storage key (workspace/id); Suli answers with the item id
        return [(keys.split(h["_id"])[1], float(h["_score"])) for h in r["hits"]["hits"]]

    def suli_scored(q: str) -> list[tuple[str, float]]:
        resp = searcher.search(PRINCIPAL, SearchRequest(query=q, limit=10))
        return [(r.id, r.score) for r in resp.results]

    same, overlap = 0, []
    for q in texts:
        a, b = native_scored(q), suli_scored(q)
        same_top10(q, a, b)
        same += [i for i, _ in a] == [i for i, _ in b]
        overlap.append(len({i for i, _ in a} & {i for i, _ in b}) / max(len(a), 1))
    sides: dict[str, Callable[[str], Any]] = {
        "native_hybrid_rrf": native_scored,
        "suli_fusion": suli_scored,
    }
    times = interleave(sides, texts, args.rounds)
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "docs": backend.count(),
        "queries": len(texts),
        "rounds": args.rounds,
        "identical_top10_share": round(same / len(texts), 3),
        "mean_top10_overlap": round(float(np.mean(overlap)), 4),
        "sides": summarise(times, "native_hybrid_rrf"),
    }
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
