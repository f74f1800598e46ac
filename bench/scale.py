"""Search latency at 10k and 100k items, on OpenSearch and on the embedded backend: growth factor.

Superseded by bench.scale_cluster (three nodes with replicas, 100k and 1M items of real-like
vectors, bench/RESULTS.md section 8) for OpenSearch. Kept because bench/RESULTS.md section 4
and bench/run-all run it, and it is the only scale run of the embedded backend.

    python -m bench.scale --url http://127.0.0.1:9200 --sizes 10000 100000 --queries 200
    python -m bench.scale --backends embedded --sizes 10000 100000
    python -m bench.scale --backends opensearch --merge-segments 1   # after a force-merge

Each size gets its own index (alias `<prefix>-<n>`, default prefix `bench-scale`, kept and reused on the next run when it
holds exactly n items) filled with the seeded synthetic items of `bench.embedded` (Zipf text,
random unit vectors, the same visibility mix). Queries are 1-3 word Zipf queries with their own
random vectors served by a lookup embedder, so the model is not timed. Timed per size: Suli's
`Searcher.search` (limit 10: ACL lookup, both legs, fusion, ranking) and, on OpenSearch, the raw
`_msearch` of the same two bodies, interleaved query by query. Growth = p50 at the largest size
over p50 at the smallest.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch

from bench.embedded import BATCH, BOARDS, DIM, Corpus
from bench.overhead import LookupEmbedder, interleave, raw_bodies, summarise
from suli.backends.base import Backend
from suli.backends.embedded import EmbeddedBackend
from suli.backends.opensearch import OpenSearchBackend
from suli.models import BoardAcl, Principal, SearchRequest
from suli.service import Searcher
from suli.settings import Settings
from suli.visibility import visibility_for

ME = Principal("prn_me", "ws_main")
MODEL = "synthetic-384"


def acls() -> list[BoardAcl]:
    """The searching principal is a member of every fifth board (as in bench.embedded)."""
    return [
        BoardAcl(f"brd_{i}", "ws_main", f"board {i}", ("prn_me",) if i % 5 == 0 else ("prn_x",))
        for i in range(BOARDS)
    ]


def fill(backend: Backend, n: int, seed: int) -> str:
    """Load the n seeded items unless the store already holds exactly n (then reuse it)."""
    have = backend.count()
    if have == n:
        return f"reused ({n} items)"
    if have:
        raise SystemExit(f"the store holds {have} items, not {n}: drop it first")
    corpus = Corpus(seed)
    t0 = time.perf_counter()
    for start in range(0, n, BATCH):
        size = min(BATCH, n - start)
        vecs = corpus.vectors(size)
        items = [corpus.item(start + j) for j in range(size)]
        outcome = backend.upsert(list(zip(items, vecs, strict=True)))
        if outcome.rejected:
            raise SystemExit(f"items rejected: {dict(list(outcome.rejected.items())[:3])}")
        print(f"  {start + size}/{n} items", file=sys.stderr, flush=True)
    backend.refresh()
    secs = time.perf_counter() - t0
    return f"loaded in {secs:.0f} s ({n / secs:.0f} items/s)"


def opensearch_backend(url: str, prefix: str, n: int) -> OpenSearchBackend:
    alias = f"{prefix}-{n}"
    settings = Settings(opensearch_url=url, index_alias=alias, acl_index=f"{alias}-acl")
    backend = OpenSearchBackend(settings, DIM, MODEL)
    backend.ensure_ready()
    return backend


def segments(client: OpenSearch, alias: str) -> int:
    rows = client.cat.segments(index=alias, format="json")
    return len(rows)


def run_size(backend_name: str, n: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    backend: Backend
    if backend_name == "opensearch":
        backend = opensearch_backend(args.url, args.prefix, n)
    else:
        backend = EmbeddedBackend(workdir / f"scale-{n}-seed{args.seed}.db", DIM)
    print(f"{backend_name} {n}: {fill(backend, n, args.seed)}", file=sys.stderr, flush=True)
    backend.put_acls(acls())
    backend.put_principals([ME])
    backend.refresh()

    qcorpus = Corpus(args.seed + 1000)  # queries: not drawn from the items' random stream
    texts = [qcorpus.query() for _ in range(args.queries)]
    vectors = dict(zip(texts, qcorpus.vectors(len(texts)), strict=True))
    texts = list(vectors)  # a repeated query text is asked once
    settings = backend.settings if isinstance(backend, OpenSearchBackend) else Settings()
    # Random unit vectors sit near cosine 0 to every query: the meaning floor (tuned for real
    # embeddings) would drop every meaning-only hit, which is not the workload timed here.
    settings = settings.model_copy(update={"meaning_floor": -1.0})
    searcher = Searcher(backend, LookupEmbedder(vectors, MODEL), settings)

    phases: dict[str, list[float]] = {}

    def core(q: str) -> Any:
        resp = searcher.search(ME, SearchRequest(query=q, limit=10))
        for k, v in resp.timings_ms.items():
            phases.setdefault(k, []).append(v)
        return resp

    sides: dict[str, Callable[[str], Any]] = {"suli_core": core}
    extra: dict[str, Any] = {}
    if isinstance(backend, OpenSearchBackend):
        client, alias = backend.client, backend.alias
        if args.merge_segments and segments(client, alias) > args.merge_segments:
            extra["segments_before_merge"] = segments(client, alias)
            t0 = time.perf_counter()
            client.indices.forcemerge(
                index=alias, max_num_segments=args.merge_segments, request_timeout=3600
            )
            client.indices.refresh(index=alias)  # the merged-away segments leave the listing
            extra["force_merge_s"] = round(time.perf_counter() - t0, 1)
        vis = visibility_for(ME, backend.acls("ws_main"))
        depth = settings.candidate_depth

        def raw(q: str) -> Any:
            lines: list[dict[str, Any]] = []
            for body in raw_bodies(vis, q, vectors[q], depth):
                lines += [{"index": alias}, body]
            return client.msearch(body=lines)

        sides["raw_msearch"] = raw
        extra["segments"] = segments(client, alias)
    for q in texts[:10]:  # warm caches and connections
        for fn in sides.values():
            fn(q)
    times = interleave(sides, texts, args.rounds)
    visible = searcher.search(ME, SearchRequest(query=texts[0], limit=1))
    result = {
        "backend": backend_name,
        "items": backend.count(),
        "queries": len(texts),
        "rounds": args.rounds,
        "total_for_first_query": visible.total,
        "sides": summarise(times, "suli_core"),
        # Suli's own phase clocks (median ms): on OpenSearch, text_took / vector_took are the
        # node's own times for each leg.
        "core_phases_p50_ms": {k: round(statistics.median(v), 2) for k, v in phases.items()},
        "load_avg": [round(x, 1) for x in os.getloadavg()],
        **extra,
    }
    backend.close()
    return result


def growth(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """p50 and p99 at the largest size over the smallest, per backend and side."""
    out: dict[str, dict[str, float]] = {}
    for name in {r["backend"] for r in results}:
        rows = sorted((r for r in results if r["backend"] == name), key=lambda r: r["items"])
        small, large = rows[0], rows[-1]
        for side in small["sides"]:
            s, lg = small["sides"][side], large["sides"][side]
            out[f"{name}/{side}"] = {
                "p50_growth": round(lg["p50_ms"] / s["p50_ms"], 2),
                "p99_growth": round(lg["p99_ms"] / s["p99_ms"], 2),
            }
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--url", default="http://127.0.0.1:9200")
    ap.add_argument("--backends", nargs="+", default=["opensearch", "embedded"])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--prefix", default="bench-scale", help="OpenSearch alias prefix")
    ap.add_argument(
        "--merge-segments",
        type=int,
        default=0,
        help="force-merge each OpenSearch index down to this many segments before timing",
    )
    ap.add_argument("--dir", type=Path, help="keep embedded stores here and reuse them")
    args = ap.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="suli-scale-") as d:
        for name in args.backends:
            for n in args.sizes:
                results.append(run_size(name, n, args, args.dir or Path(d)))
                print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cores": os.cpu_count(),
        "results": results,
        "growth": growth(results),
    }
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
