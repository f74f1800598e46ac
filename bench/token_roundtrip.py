"""HTTP search with the token read in the legs' request: valid vs invalid token, HTTP vs core.

    python -m bench.token_roundtrip --url http://127.0.0.1:9200 --items 1500 --rounds 20

A small index of its own (synthetic items from a 400-word vocabulary, FakeEmbedder: the
benchmark measures the search path, not the model), one principal with two boards. Sides, run
interleaved query by query in a fresh random order each time (machine noise hits all alike):

  core          Searcher.search (the CLI's and MCP's path): legs, then the page
  http_get      GET /api/v1/search: the token read inside the legs' `_msearch`, then the page
  http_post     POST /api/v1/search: the token read first (before the body), then legs, page;
                what GET cost before this change
  http_invalid  GET with an unknown token: 401 (one `_msearch` whose lookups find nothing)
  http_invalid_miss  the same words reversed, which no item holds (an unknown token's time
                should not depend on what the items hold)
  http_post_invalid(_miss)  the same two, the token read first and alone (POST): the 401 of
                GET before this change

Reports p50/p99 per side and its ratio to `core`, the CPU seconds of this process (client and
the uvicorn server thread) per side, and the round trips each side sends.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.overhead import http_client, summarise
from indexer.pipeline import index_items
from suli.backends.opensearch import OpenSearchBackend
from suli.backends.opensearch.client import counting
from suli.embedding import FakeEmbedder
from suli.models import BoardAcl, Principal
from suli.service import Searcher
from suli.settings import Settings
from suli.validate import parse_item, search_request

WS = "ws_bench"
WHO = Principal("prn_tok", WS, "person", ("grp_a",))


def vocabulary(n: int = 400, seed: int = 7) -> list[str]:
    rnd = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return sorted(
        {"".join(rnd.choice(letters) for _ in range(rnd.randint(4, 9))) for _ in range(n)}
    )


def build(url: str, name: str, n_items: int) -> tuple[Searcher, list[str]]:
    settings = Settings(
        opensearch_url=url,
        index_alias=name,
        acl_index=f"{name}-acl",
        embedder="fake",
        rate_per_minute=1_000_000,
        rate_per_day=100_000_000,
        bad_token_per_minute=1_000_000,
    )
    emb = FakeEmbedder()
    backend = OpenSearchBackend(settings, emb.dimension, emb.name)
    backend.ensure_ready()
    searcher = Searcher(backend, emb, settings)
    words = vocabulary()
    if backend.count() < n_items:
        rnd = random.Random(3)
        backend.put_principals([WHO, Principal("prn_other", WS)])
        boards = ["brd_a", "brd_b", "brd_c", None]
        backend.put_acls(
            [
                BoardAcl("brd_a", WS, "A", (), ("grp_a",)),
                BoardAcl("brd_b", WS, "B", ("prn_tok",), ()),
                BoardAcl("brd_c", WS, "C", ("prn_other",), ()),
            ]
        )
        raw = []
        for i in range(n_items):
            fields: dict[str, Any] = {}
            board = boards[i % 4]
            if board:
                fields["board"] = board
            raw.append(
                {
                    "id": f"itm_{i:05d}",
                    "workspace": WS,
                    "title": " ".join(rnd.choices(words, k=5)),
                    "body": " ".join(rnd.choices(words, k=40)),
                    "last_activity_at": "2026-01-15T12:00:00Z",
                    **fields,
                }
            )
        summary = index_items([(k, parse_item(d)) for k, d in enumerate(raw)], backend, emb)
        assert summary.indexed == n_items, summary
        backend.refresh()
    return searcher, words


def counted(backend: OpenSearchBackend, fn: Callable[[], Any]) -> list[str]:
    """The requests `fn` makes through the backend's client ("METHOD endpoint")."""
    with counting(backend.client) as sent:
        fn()
    return sent


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--url", default="http://127.0.0.1:9200")
    ap.add_argument("--name", default="bench-tokenrt")
    ap.add_argument("--items", type=int, default=1500)
    ap.add_argument("--queries", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args(argv)

    searcher, words = build(args.url, args.name, args.items)
    backend = searcher.backend
    assert isinstance(backend, OpenSearchBackend)
    rnd = random.Random(11)
    queries = [" ".join(rnd.sample(words, 2)) for _ in range(args.queries)]
    client, headers = http_client(searcher, WHO.id)
    bad = {"Authorization": "Bearer suli_" + "q" * 43}

    def core(q: str) -> Any:
        return searcher.search(WHO, search_request(q, limit=10))

    def http_get(q: str) -> Any:
        r = client.get("/api/v1/search", params={"q": q, "limit": 10}, headers=headers)
        assert r.status_code == 200, r.text
        return r

    def http_post(q: str) -> Any:
        r = client.post("/api/v1/search", json={"q": q, "limit": 10}, headers=headers)
        assert r.status_code == 200, r.text
        return r

    def http_invalid(q: str) -> Any:
        r = client.get("/api/v1/search", params={"q": q, "limit": 10}, headers=bad)
        assert r.status_code == 401, r.text
        return r

    def http_invalid_miss(q: str) -> Any:  # the same words reversed (no item holds them)
        return http_invalid(" ".join(w[::-1] for w in q.split()))

    def http_post_invalid(q: str) -> Any:  # the token read first, alone: the old GET's 401
        r = client.post("/api/v1/search", json={"q": q, "limit": 10}, headers=bad)
        assert r.status_code == 401, r.text
        return r

    def http_post_invalid_miss(q: str) -> Any:
        return http_post_invalid(" ".join(w[::-1] for w in q.split()))

    sides: dict[str, Callable[[str], Any]] = {
        "core": core,
        "http_get": http_get,
        "http_post": http_post,
        "http_invalid": http_invalid,
        "http_invalid_miss": http_invalid_miss,
        "http_post_invalid": http_post_invalid,
        "http_post_invalid_miss": http_post_invalid_miss,
    }
    same = [r["id"] for r in http_get(queries[0]).json()["results"]]
    assert same == [r.id for r in core(queries[0]).results]  # one search, two doors
    trips = {n: counted(backend, lambda f=f: f(queries[0])) for n, f in sides.items()}
    for f in sides.values():  # warm every side
        for q in queries[:5]:
            f(q)
    names = list(sides)
    times: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, float] = dict.fromkeys(names, 0.0)
    order = random.Random(5)
    for _ in range(args.rounds):
        for q in queries:
            # A fresh random order each time: with a rotation each side would always follow
            # the same other side, and its after-effects (the node still busy) would count.
            for n in order.sample(names, len(names)):
                c0, t0 = time.process_time(), time.perf_counter()
                sides[n](q)
                times[n].append(time.perf_counter() - t0)
                cpu[n] += time.process_time() - c0
    out = {
        "load_before_after": None,
        "items": args.items,
        "queries": len(queries),
        "rounds": args.rounds,
        "round_trips": trips,
        "latency": summarise(times, "core"),
        "cpu_ms_per_call": {n: round(cpu[n] / len(times[n]) * 1000, 3) for n in names},
        "invalid_vs_valid_p50": round(summarise(times, "http_get")["http_invalid"]["p50_ratio"], 3),
        "invalid_matching_vs_missing_p50": round(
            summarise(times, "http_invalid_miss")["http_invalid"]["p50_ratio"], 3
        ),
        "post_invalid_matching_vs_missing_p50": round(
            summarise(times, "http_post_invalid_miss")["http_post_invalid"]["p50_ratio"], 3
        ),
    }
    return out


if __name__ == "__main__":
    before = os.getloadavg()
    got = main()
    got["load_before_after"] = [round(x, 2) for x in (*before, *os.getloadavg())]
    print(json.dumps(got, indent=2))
