"""Search overhead: Suli's search (core and HTTP) vs raw opensearch-py `_msearch` of the same bodies.

    python -m bench.overhead --url http://127.0.0.1:9200 --queries 100 --rounds 5
    python -m bench.overhead --profile            # cProfile of the core path, top functions

HTTP side: the real app under uvicorn on a loopback port, called with a keep-alive httpx client.

Reuses the NFCorpus index `bench-nfcorpus` read-only: a second alias (`bench-overhead`) is put on
the same physical index so the benchmark's principal and token live in its own ACL index.
Query vectors are computed once and served by a lookup embedder to both sides; the sides run
interleaved (query by query, alternating order per round) so machine noise hits both alike.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from opensearchpy import OpenSearch

from bench.nfcorpus import WORKSPACE, load_qrels, load_queries
from suli.backends.base import LegQuery
from suli.backends.opensearch import OpenSearchBackend
from suli.backends.opensearch.bodies import text_leg, vector_leg
from suli.embedding import FloatArray, build_embedder
from suli.models import Filters, Principal, SearchRequest
from suli.service import Searcher
from suli.settings import Settings
from suli.text import only_common_words
from suli.visibility import Visibility, visibility_for

CACHE = Path.home() / ".cache" / "suli" / "vectors.sqlite"
PRINCIPAL = Principal("prn_bench", WORKSPACE)


class LookupEmbedder:
    """Serves precomputed query vectors: the benchmark measures search, not the model."""

    def __init__(self, vectors: dict[str, FloatArray], name: str = "all-MiniLM-L6-v2-int8") -> None:
        self.vectors = vectors
        self.name = name
        self.dimension = len(next(iter(vectors.values()))) if vectors else 384

    def embed_documents(self, texts: Sequence[str], *, on_progress: Any = None) -> FloatArray:
        return np.stack([self.vectors[t] for t in texts]) if texts else np.empty((0, 384))

    def embed_query(self, text: str) -> FloatArray:
        return self.vectors[text]


def query_vectors(texts: Sequence[str]) -> dict[str, FloatArray]:
    """Each query embedded once by the real model (cached on disk with the documents)."""
    emb = build_embedder("minilm", CACHE)
    return {t: np.asarray(emb.embed_query(t), dtype=np.float32) for t in texts}


def pct(xs: Sequence[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs), p))


def summarise(times: dict[str, list[float]], base: str) -> dict[str, dict[str, float]]:
    """p50/p99 in ms per side and its ratio to the baseline side."""
    out: dict[str, dict[str, float]] = {}
    b50, b99 = pct(times[base], 50), pct(times[base], 99)
    for side, xs in times.items():
        p50, p99 = pct(xs, 50), pct(xs, 99)
        out[side] = {
            "n": len(xs),
            "p50_ms": round(p50 * 1000, 2),
            "p99_ms": round(p99 * 1000, 2),
            "mean_ms": round(statistics.fmean(xs) * 1000, 2),
            "p50_ratio": round(p50 / b50, 3),
            "p99_ratio": round(p99 / b99, 3),
        }
    return out


def interleave(
    sides: dict[str, Callable[[str], Any]], queries: Sequence[str], rounds: int
) -> dict[str, list[float]]:
    """Every query on every side each round; side order rotates so none always goes first."""
    names = list(sides)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for qi, q in enumerate(queries):
            shift = (r + qi) % len(names)
            for n in names[shift:] + names[:shift]:
                t0 = time.perf_counter()
                sides[n](q)
                times[n].append(time.perf_counter() - t0)
    return times


def ensure_alias(client: OpenSearch, source_alias: str, alias: str) -> None:
    """A second alias on the NFCorpus physical index (adds a name, changes no document)."""
    if client.indices.exists_alias(name=alias):
        return
    physical = sorted(client.indices.get_alias(name=source_alias))[0]
    client.indices.put_alias(index=physical, name=alias)


def add_synthetic(url: str, alias: str, n: int, seed: int = 3) -> None:
    """n synthetic items (NFCorpus words, random unit vectors) in a second index under alias."""
    import random

    from bench.nfcorpus import load_items
    from suli.models import Item

    client = OpenSearch(url, timeout=60)
    settings = Settings(opensearch_url=url, index_alias=f"{alias}-synth", acl_index=f"{alias}-acl")
    backend = OpenSearchBackend(settings, 384, "all-MiniLM-L6-v2-int8")
    if not client.indices.exists_alias(name=f"{alias}-synth"):
        backend.ensure_ready()
    if backend.count() < n:
        rng = random.Random(seed)
        words = [w for it in load_items(500) for w in it.title.split() if w.isalpha()]
        vecs = np.random.default_rng(seed).standard_normal((n, 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        items = [
            Item(id=f"syn-{i}", workspace=WORKSPACE, title=" ".join(rng.sample(words, 6)),
                 body=" ".join(rng.choices(words, k=60)))
            for i in range(n)
        ]  # fmt: skip
        for s in range(0, n, 200):
            out = backend.upsert([(it, vecs[s + i]) for i, it in enumerate(items[s : s + 200])])
            assert not out.rejected, out.rejected
        backend.refresh()
    physical = sorted(client.indices.get_alias(name=f"{alias}-synth"))[0]
    client.indices.put_alias(index=physical, name=alias)  # the alias now spans both indices


def with_source(body: dict[str, Any], source: Any) -> dict[str, Any]:
    """A leg body that returns `_source` after all: Suli's legs read no stored fields
    (`stored_fields: _none_`), and `_source` is one of them."""
    out = {k: v for k, v in body.items() if k != "stored_fields"}
    out["_source"] = source
    return out


def raw_bodies(
    vis: Visibility,
    text: str,
    vec: Sequence[float],
    depth: int,
    ef_search: int | None = Settings().ef_search,
) -> list[dict[str, Any]]:
    """The very bodies Suli sends: same builders, same LegQuery, same ef_search (the boards are
    written out, where Suli reads them by a terms lookup)."""
    q = LegQuery(
        vis, Filters(), text, [float(x) for x in vec], depth,
        "plain" if only_common_words(text) else "stemmed",
    )  # fmt: skip
    return [text_leg(q), vector_leg(q, ef_search)]


def build(url: str, alias: str, queries: Sequence[str]) -> tuple[Searcher, OpenSearch, Any]:
    """Searcher over the alias with a lookup embedder; principal + token in its ACL index."""
    settings = Settings(opensearch_url=url, index_alias=alias, acl_index=f"{alias}-acl")
    vectors = query_vectors(queries)
    embedder = LookupEmbedder(vectors)
    backend = OpenSearchBackend(settings, embedder.dimension, embedder.name)
    backend.ensure_ready()
    backend.put_principals([PRINCIPAL])
    backend.refresh()
    return Searcher(backend, embedder, settings), backend.client, vectors


def http_client(searcher: Searcher, principal_id: str = PRINCIPAL.id) -> tuple[Any, dict[str, str]]:
    """The real app served by uvicorn on a loopback port (in a thread of this process), and a
    keep-alive httpx client with a fresh token of principal_id: what a product calling the
    service pays."""
    import socket
    import threading

    import httpx
    import uvicorn

    from app.main import create_app
    from suli.auth import create_token

    token = create_token(searcher.backend, principal_id)
    searcher.backend.refresh()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    app = create_app(searcher.settings, searcher=searcher)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    )
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start within 30 s")
        time.sleep(0.02)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
    return client, {"Authorization": f"Bearer {token}"}


def profiled(work: Callable[[], object], *orders: tuple[str, int]) -> list[str]:
    """cProfile's report of one run of `work`, once per (sort order, top n) asked."""
    prof = cProfile.Profile()
    prof.enable()
    work()
    prof.disable()
    out = []
    for order, top in orders:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(order).print_stats(top)
        out.append(buf.getvalue())
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--url", default="http://127.0.0.1:9200")
    ap.add_argument("--source-alias", default="bench-nfcorpus")
    ap.add_argument("--alias", default="bench-overhead")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--synthetic", type=int, default=0, help="add N synthetic items (10k total)")
    ap.add_argument("--no-http", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    qrels = load_qrels("test")
    queries = list(load_queries(set(qrels)).values())[: args.queries]
    raw = OpenSearch(args.url, timeout=30)
    ensure_alias(raw, args.source_alias, args.alias)
    if args.synthetic:
        add_synthetic(args.url, args.alias, args.synthetic)
    searcher, client, vectors = build(args.url, args.alias, queries)
    depth = searcher.settings.candidate_depth
    vis = visibility_for(PRINCIPAL, searcher.backend.acls(WORKSPACE))

    def raw_side(q: str) -> Any:
        # What a user of opensearch-py would do: build the two bodies and _msearch them.
        lines: list[dict[str, Any]] = []
        for body in raw_bodies(vis, q, vectors[q], depth):
            lines += [{"index": args.alias}, body]
        return client.msearch(body=lines)

    phases: dict[str, list[float]] = {}

    def core_side(q: str) -> Any:
        resp = searcher.search(PRINCIPAL, SearchRequest(query=q, limit=10))
        for k, v in resp.timings_ms.items():
            phases.setdefault(k, []).append(v)
        return resp

    sides: dict[str, Callable[[str], Any]] = {"raw_msearch": raw_side, "suli_core": core_side}
    if not args.no_http:
        http, headers = http_client(searcher)
        sides["suli_http"] = lambda q: http.get(
            "/api/v1/search", params={"q": q, "limit": 10}, headers=headers
        ).raise_for_status()
    for q in queries[:10]:  # warm caches and connections on every side
        for fn in sides.values():
            fn(q)
    times = interleave(sides, queries, args.rounds)
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "docs": searcher.backend.count(),
        "queries": len(queries),
        "rounds": args.rounds,
        "depth": depth,
        "sides": summarise(times, "raw_msearch"),
        # Suli's own phase clocks (ms, median): where the time over the raw side goes.
        "core_phases_p50_ms": {k: round(pct(v, 50), 2) for k, v in phases.items()},
    }
    if args.profile:
        (report["profile"],) = profiled(lambda: [core_side(q) for q in queries], ("cumulative", 25))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(json.dumps({k: v for k, v in report.items() if k != "profile"}, indent=2))
        if "profile" in report:
            print(report["profile"])
    return report


if __name__ == "__main__":
    main()
