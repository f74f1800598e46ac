"""The latency phase: Suli core, Suli HTTP and raw `_msearch` of the same bodies, interleaved
query by query; also timed by the writes phase while a writer runs.

Two raw sides: `raw_msearch` sends the two legs only; `raw_legs_and_page` sends the legs and
then the page fetch Suli made for that query (kept from a pass before the timed rounds), as
two `_msearch` requests from opensearch-py: the requests of a core search without Suli's
Python around them (its visibility inline, where Suli's reads a stored document)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from bench.clustered import WORKSPACE
from bench.overhead import interleave, pct, raw_bodies, summarise
from bench.replay import recorded
from bench.scale_cluster.size import SizeRun
from suli.backends.opensearch import bodies
from suli.models import SearchRequest
from suli.visibility import visibility_for


def latency(run: SizeRun) -> dict[str, Any]:
    run.require_loaded()
    return timed(run)


def timed(run: SizeRun) -> dict[str, Any]:
    texts, vecs = run.query_set
    vectors = dict(zip(texts, vecs, strict=True))
    texts = list(vectors)
    searcher, client, alias = run.searcher, run.client, run.alias
    vis = visibility_for(run.principal, run.backend.acls(WORKSPACE))
    depth = run.settings.candidate_depth
    phases: dict[str, list[float]] = {}

    def core(q: str) -> Any:
        resp = searcher.search(run.principal, SearchRequest(query=q, limit=10))
        for k, v in resp.timings_ms.items():
            phases.setdefault(k, []).append(v)
        return resp

    def raw(q: str) -> Any:
        lines: list[dict[str, Any]] = []
        for body in raw_bodies(vis, q, vectors[q], depth):
            lines += [{"index": alias}, body]
        return client.msearch(body=lines)

    pages = recorded(run, texts).pages

    def raw_with_page(q: str) -> Any:
        legs = raw(q)
        page = pages.get(q)
        if page is None:  # the legs found nothing: no page fetch
            return legs
        made = bodies.page_bodies(replace(page, vis=vis))
        if page.replacements:
            made.append(bodies.ids_body(vis, list(page.replacements), source=["id"]))
        return client.msearch(body=[x for b in made for x in ({"index": alias}, b)])

    http, headers = run.http

    def over_http(q: str) -> Any:
        params: dict[str, Any] = {"q": q, "limit": 10}
        return http.get("/api/v1/search", params=params, headers=headers).raise_for_status()

    sides: dict[str, Callable[[str], Any]] = {"raw_msearch": raw,
                                              "raw_legs_and_page": raw_with_page,
                                              "suli_core": core, "suli_http": over_http}  # fmt: skip
    for q in texts[: run.args.warmup]:  # warm caches and connections on every side
        for fn in sides.values():
            fn(q)
    phases.clear()
    times = interleave(sides, texts, run.args.rounds)
    first = searcher.search(run.principal, SearchRequest(query=texts[0], limit=1))
    return {
        "principal": run.principal.id, "queries": len(texts), "rounds": run.args.rounds,
        "depth": depth, "total_for_first_query": first.total,
        "sides": summarise(times, "raw_msearch"),
        "core_phases_p50_ms": {k: round(pct(v, 50), 2) for k, v in phases.items()},
        "core_phases_p99_ms": {k: round(pct(v, 99), 2) for k, v in phases.items()},
    }  # fmt: skip
