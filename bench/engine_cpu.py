"""What the nodes spend per request: Suli's legs and page fetch against the native hybrid query.

    python -m bench.engine_cpu --url http://127.0.0.1:9241 [--n 100000] [--queries 200]
        [--rounds 2] [--prefix bench-sc] [--out bench/results/engine_cpu_100k_X.json]

Throughput at many clients is bounded by CPU: on a machine whose cores the nodes share, the
queries per second a side can answer follow the CPU each of its requests costs the nodes.
This bench measures that cost directly. On an index the scale bench loaded
(`bench.scale_cluster`, its `--prefix`), each query goes once through `Searcher.search` (limit
10, a first page) and the legs' request (`LegQuery`) and the page request (`PageQuery`) it made
are kept. Then every kind of request below is replayed over all queries, one at a time, and
the nodes' process CPU (`_nodes/stats/process`, summed over the nodes) before and after the
batch gives CPU milliseconds per request; wall milliseconds per request beside it. Kinds:

    suli_legs                 both legs' `_msearch` as Suli sends it (the text leg counts its
                              matches up to SULI_TOTAL_COUNT_LIMIT; the typo words whose
                              corrections were read ahead as `term` clauses, the index's
                              newest write stamp read beside them: corrections.py)
    legs_fuzzy                the same with every typo word's fuzzy clause, as the legs went
                              before corrections were read ahead
    suli_legs_exact           the same counting every match (`exact_total`, and every search
                              before totals became free by default)
    legs_text_only            the text leg alone, legs_vector_only the vector leg alone
    legs_no_typos             both legs without the typo clauses (their automata per shard)
    legs_no_prefix            without the last word's prefix clause, legs_no_fuzzy without
                              the fuzzy clauses (the prefix clause kept)
    legs_typos_constant       the typo clauses scoring a constant (before #35 weighed them)
    legs_typos_expanded       each fuzzy clause replaced by `term` clauses over the corrections
                              the engine's own rewrite reaches (read once beforehand through
                              `_validate/query?rewrite=true`), the word's own stem left out:
                              what the legs would cost if the service held each word's
                              corrections; legs_typos_expanded_stems keeps the words sharing
                              the word's stem (whose items the `must_not` drops anyway)
    legs_boards_inline        both legs with the caller's boards inline and no check of the
                              visibility document at all (no lookup, no check search)
    legs_boards_lookup        both legs looking the boards up in the visibility document on
                              every shard, as every search did before a service kept the boards
                              a document stood for at its last check (suli_legs sends them
                              inline, checked in the same request)
    legs_depth_half           both legs at half the candidate depth (the hits' doc values)
    suli_page                 the page as Suli reads it: `_mget` by id from the shard copies
                              holding it, with the caller's visibility document
    suli_page_searched        the page as an `ids` search on every shard, nothing highlighted
                              (the path kept for regex, the words' check and token-only
                              visibility)
    suli_page_highlighted     that search with the page's text hits highlighted by the engine,
                              as every page was read before the core made the snippets
    native_hybrid             one `hybrid` query of the same two legs, RRF pipeline, size 10,
                              the highlight block Suli's page sent before (only with
                              neural-search on every node)
    native_no_highlight       the same without highlight

Each round replays every kind in turn (the order rotating by round), after a warm-up of 20
requests. The nodes' CPU includes whatever else runs on them, and each reading waits 1.2 s
for the nodes' stats to refresh (their idle CPU then counts too; `idle_cpu_ms_per_s` says how
much): run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any
from unittest import mock

from bench.clustered import WORKSPACE
from bench.native_hybrid import PIPELINE, highlight, hybrid_body, put_rrf_pipeline
from bench.replay import loaded_run, recorded, report
from bench.scale_cluster.concurrency import has_native_hybrid
from bench.scale_cluster.size import SizeRun
from suli import analysis
from suli.backends.base import LegQuery, PageQuery
from suli.backends.opensearch import bodies
from suli.visibility import visibility_for

WARMUP = 20


Kind = tuple[Callable[[int], Any], int]  # request i of n


def kinds(run: SizeRun, texts: list[str], vecs: Any, legs: list[LegQuery],
          pages: list[PageQuery], native: bool) -> dict[str, Kind]:  # fmt: skip
    """Each kind of request: a function of the request's position, and how many there are
    (a query whose legs found nothing made no page request)."""
    be = run.backend
    # Which of each page's ids the legs found by their words: the engine highlighted those.
    text_ids = [{h.id for h in be.search(q).text} for q in legs]
    by_text = {q.text: ids for q, ids in zip(legs, text_ids, strict=True)}

    def page_highlighted(i: int) -> Any:
        q = replace(pages[i], index=None, checked=None)
        lit = [x for x in q.ids if x in by_text.get(q.text, set())]
        plain = [x for x in q.ids if x not in lit]

        def make(vis: Any) -> list[dict[str, Any]]:
            out = []
            for ids, marked in ((lit, True), (plain, False)):
                if not ids:
                    continue
                [body] = bodies.page_bodies(replace(q, vis=vis, ids=tuple(ids), words_of=()))
                if marked and q.text is not None:
                    words = bodies.text_match(q.text, q.text_fields)
                    body["highlight"] = highlight(words, q.text_fields)
                out.append(body)
            return out

        return be.reads._read_many(q.vis, make, "page")

    inline = visibility_for(run.principal, be.acls(WORKSPACE))  # no stored document

    def looked_up(call: Callable[[], Any]) -> Any:
        # As every search was sent before the boards were known between searches: the legs
        # look them up in the visibility document, on every shard.
        be.reads._known.data.clear()
        return call()

    def no_typos(call: Callable[[], Any]) -> Any:
        with mock.patch.object(bodies, "typo_clauses", lambda text, flavour, known=None: []):
            return call()

    def typos_constant(call: Callable[[], Any]) -> Any:
        # The typo clauses as they were before corrections were weighed by rarity (#35): a
        # constant score over every term reached.
        real = bodies.typo_clauses

        def constant(text: str, flavour: Any, known: Any = None) -> list[dict[str, Any]]:
            out = real(text, flavour)
            for clause in out:
                for inner in clause["bool"]["must"]:
                    if "multi_match" in inner:
                        inner["multi_match"]["fuzzy_rewrite"] = "constant_score"
            return out

        with mock.patch.object(bodies, "typo_clauses", constant):
            return call()

    def only_typos(prefix: bool, call: Callable[[], Any]) -> Any:
        # The last word's prefix clause alone (prefix) or the fuzzy clauses alone (not prefix).
        real = bodies.typo_clauses

        def some(text: str, flavour: Any, known: Any = None) -> list[dict[str, Any]]:
            return [c for c in real(text, flavour) if ("prefix" in c["bool"]["must"][0]) == prefix]

        with mock.patch.object(bodies, "typo_clauses", some):
            return call()

    expansions: dict[tuple[str, str], list[tuple[str, float]]] = {}
    stems: dict[tuple[str, str], list[tuple[str, float]]] = {}

    def expand(word: str, field: str) -> list[tuple[str, float]]:
        # The corrections the engine's fuzzy query reaches on every shard (its own rewrite,
        # read once through `_validate/query?rewrite=true`), the word's own stem left out.
        key = (word, field)
        if key not in expansions:
            fuzzy = {
                "fuzzy": {
                    field: {
                        "value": word,
                        "fuzziness": f"AUTO:{bodies.FUZZY_MIN_CHARS},{bodies.TWO_EDITS_CHARS}",
                        "prefix_length": bodies.PREFIX_LENGTH,
                        "transpositions": True,
                        "rewrite": f"top_terms_{bodies.TYPO_TERMS}",
                    }
                }
            }
            got = be.client.indices.validate_query(
                index=run.alias,
                body={"query": fuzzy},
                params={"rewrite": "true", "all_shards": "true"},
            )
            terms: dict[str, float] = {}
            for ex in got["explanations"]:
                for m in re.finditer(
                    r"\(?" + re.escape(field) + r":(\S+?)\)?(?:\^([0-9.]+))?(?: |$)",
                    ex["explanation"],
                ):
                    terms[m.group(1)] = float(m.group(2) or 1.0)
            own = analysis.english_term(word) if field == "content.plain" else word
            stems[key] = [
                (t, b)
                for t, b in sorted(terms.items())
                if (analysis.english_term(t) if field == "content.plain" else t) == own
            ]
            expansions[key] = [
                (t, b)
                for t, b in sorted(terms.items())
                if (analysis.english_term(t) if field == "content.plain" else t) != own
            ]
        return expansions[key]

    def typos_expanded(call: Callable[[], Any], keep_stem: bool = False) -> Any:
        real = bodies.typo_clauses
        if not expansions:  # on the warm-up's first request: every query's, as a service
            for leg in legs:  # would hold them, read before any timed request
                for clause in real(leg.text or "", leg.text_fields):
                    inner = clause["bool"]["must"][0].get("multi_match")
                    for f in inner["fields"] if inner else ():
                        expand(inner["query"], f)

        def expanded(text: str, flavour: Any, known: Any = None) -> list[dict[str, Any]]:
            out = real(text, flavour)
            for clause in out:
                inner = clause["bool"]["must"][0]
                if "multi_match" not in inner:
                    continue
                word = inner["multi_match"]["query"]
                terms = [
                    {"term": {f: {"value": t, "boost": b}}}
                    for f in inner["multi_match"]["fields"]
                    for t, b in expand(word, f) + (stems.get((word, f), []) if keep_stem else [])
                ]
                clause["bool"]["must"][0] = {"bool": {"should": terms or [{"match_none": {}}]}}
            return out

        with mock.patch.object(bodies, "typo_clauses", expanded):
            return call()

    out: dict[str, Kind] = {
        "legs_typos_expanded": (lambda i: typos_expanded(lambda: be.search(legs[i])), len(legs)),
        "legs_typos_expanded_stems": (
            lambda i: typos_expanded(lambda: be.search(legs[i]), keep_stem=True),
            len(legs),
        ),
        "suli_legs": (lambda i: be.search(legs[i]), len(legs)),
        "legs_fuzzy": (lambda i: be.reads.search(legs[i], ahead=False), len(legs)),
        "legs_boards_lookup": (lambda i: looked_up(lambda: be.search(legs[i])), len(legs)),
        "suli_legs_exact": (lambda i: be.search(replace(legs[i], count_to=None)), len(legs)),
        "suli_page": (lambda i: be.page(pages[i]), len(pages)),
        "suli_page_searched": (
            lambda i: be.page(replace(pages[i], index=None, checked=None)),
            len(pages),
        ),
        "suli_page_highlighted": (page_highlighted, len(pages)),
        # The legs by part (#34 item 5): each alone, without the typo clauses, with the
        # boards inline instead of the terms lookup of the visibility document, at half depth.
        "legs_text_only": (lambda i: be.search(replace(legs[i], vector=None)), len(legs)),
        "legs_vector_only": (lambda i: be.search(replace(legs[i], text=None)), len(legs)),
        "legs_no_typos": (lambda i: no_typos(lambda: be.search(legs[i])), len(legs)),
        "legs_no_prefix": (lambda i: only_typos(False, lambda: be.search(legs[i])), len(legs)),
        "legs_no_fuzzy": (lambda i: only_typos(True, lambda: be.search(legs[i])), len(legs)),
        "legs_typos_constant": (lambda i: typos_constant(lambda: be.search(legs[i])), len(legs)),
        "legs_boards_inline": (lambda i: be.search(replace(legs[i], vis=inline)), len(legs)),
        "legs_depth_half": (
            lambda i: be.search(replace(legs[i], depth=legs[i].depth // 2)),
            len(legs),
        ),
    }
    if native:
        put_rrf_pipeline(be.client)
        vis = visibility_for(run.principal, be.acls(WORKSPACE))
        depth = run.settings.candidate_depth

        def hybrid(i: int, highlighted: bool = True) -> Any:
            body = hybrid_body(vis, texts[i], vecs[i], depth)
            if not highlighted:
                body.pop("highlight")
            return be.client.search(
                index=run.alias, body=body, params={"search_pipeline": PIPELINE}
            )

        out["native_hybrid"] = (hybrid, len(texts))
        out["native_no_highlight"] = (lambda i: hybrid(i, highlighted=False), len(texts))
    return out


# A node refreshes its process stats once a second (`monitor.process.refresh_interval`): each
# reading waits past that, so it counts the batch it follows (and ~1 s of idle nodes).
STATS_REFRESH_S = 1.2


def nodes_cpu_ms(run: SizeRun) -> int:
    """The nodes' process CPU so far, summed, read once their stats have been refreshed."""
    time.sleep(STATS_REFRESH_S)
    stats = run.backend.client.nodes.stats(metric="process")
    return sum(int(n["process"]["cpu"]["total_in_millis"]) for n in stats["nodes"].values())


def measure(run: SizeRun, sides: dict[str, Kind], rounds: int) -> dict[str, Any]:
    """CPU and wall milliseconds per request of each kind, per round and their medians."""
    cpu: dict[str, list[float]] = {k: [] for k in sides}
    wall: dict[str, list[float]] = {k: [] for k in sides}
    names = list(sides)
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            fn, n = sides[name]
            for i in range(min(WARMUP, n)):
                fn(i)
            c0 = nodes_cpu_ms(run)
            t0 = time.perf_counter()
            for i in range(n):
                fn(i)
            t1 = time.perf_counter()
            c1 = nodes_cpu_ms(run)
            cpu[name].append(round((c1 - c0) / n, 2))
            wall[name].append(round((t1 - t0) * 1000 / n, 2))
    out: dict[str, Any] = {
        name: {
            "cpu_ms_per_request": cpu[name],
            "cpu_ms_median": round(statistics.median(cpu[name]), 2),
            "wall_ms_per_request": wall[name],
            "wall_ms_median": round(statistics.median(wall[name]), 2),
        }
        for name in names
    }
    summed = ("suli_legs", "suli_page", "suli_legs_exact", "suli_page_highlighted")
    if not set(summed) <= set(out):  # --kinds left some out
        return out
    cpu = {k: out[k]["cpu_ms_median"] for k in summed}
    suli = cpu["suli_legs"] + cpu["suli_page"]
    out["suli_search_cpu_ms"] = round(suli, 2)
    # As a search read its page before: every match counted, the page searched and highlighted
    # (without the words' check some of those pages also carried).
    before = cpu["suli_legs_exact"] + cpu["suli_page_highlighted"]
    out["suli_search_cpu_ms_before"] = round(before, 2)
    if "native_hybrid" in out:
        native = out["native_hybrid"]["cpu_ms_median"]
        out["suli_over_native_cpu"] = round(suli / native, 3)
        out["suli_before_over_native_cpu"] = round(before / native, 3)
    return out


def same_answers(sides: dict[str, Kind], one: str, other: str, n: int) -> dict[str, Any]:
    """How many of the legs' requests answer the same hits, in the same order and with the
    same scores, sent as `one` and as `other` (when both kinds ran)."""
    if one not in sides or other not in sides:
        return {}

    def hits(r: Any) -> list[tuple[str, float]]:
        return [(h.id, round(h.score, 5)) for h in (*r.text, *r.vector)]

    same = sum(hits(sides[one][0](i)) == hits(sides[other][0](i)) for i in range(n))
    return {f"{other}_same_hits_as_{one}": f"{same}/{n}"}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    def only(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--kinds", nargs="+", help="these kinds only (default: every kind)")

    args, run = loaded_run(__doc__, argv, only)
    texts, vecs = run.query_set
    load_before = [round(x, 2) for x in os.getloadavg()]
    kept = recorded(run, texts)
    # Recording searched every query once: the typo words' corrections, asked for then, are
    # read in the background before any timed request.
    settled = run.backend.reads.corrections.settle(600)
    legs, pages = list(kept.legs.values()), list(kept.pages.values())
    checked = [len(p.words_of) for p in pages if p.words_of]
    native = has_native_hybrid(run.backend.client)
    sides = kinds(run, texts, vecs, legs, pages, native)
    if args.kinds:
        sides = {k: v for k, v in sides.items() if k in args.kinds}
    idle0, t0 = nodes_cpu_ms(run), time.perf_counter()
    idle = (nodes_cpu_ms(run) - idle0) / (time.perf_counter() - t0)
    got: dict[str, Any] = {
        "alias": run.alias,
        "idle_cpu_ms_per_s": round(idle, 1),
        "queries": len(texts),
        "legs_requests": len(legs),
        "page_requests": len(pages),
        "pages_with_words_check": len(checked),
        "words_check_ids_median": statistics.median(checked) if checked else 0,
        "rounds": args.rounds,
        "nodes": len(run.backend.client.nodes.stats(metric="process")["nodes"]),
        "native": native,
        "load_avg_before": load_before,
        **measure(run, sides, args.rounds),
        "corrections_settled": settled,
        **same_answers(sides, "suli_legs", "legs_typos_expanded", len(legs)),
        **same_answers(sides, "legs_fuzzy", "suli_legs", len(legs)),
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
    }
    return report("bench.engine_cpu", args, argv, got)


if __name__ == "__main__":
    main()
