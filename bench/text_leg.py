"""Text-leg latency by query form on one loaded index, interleaved query by query.

    python -m bench.text_leg --url http://127.0.0.1:9241 --alias bench-sc-clustered-100000

Sides, each the text leg body Suli builds (same visibility filter, depth, highlight) except:
- `suli`: exactly as sent (content form, track_total_hits true: the exact `total`);
- `v3_form`: the text form before the combined `content` field (most_fields over the separate
  fields, as mapping v3 scored them; the fields still exist in v4), with no exact count: the
  leg as it was;
- `no_count`: as sent, without the exact count (track_total_hits false);
- `highlighted`: as sent, plus `_source` and the highlight block the legs carried before they
  became lean (what moving the snippets to the page fetch saved). Raw files of 2026-12-01
  before that change call the opposite side `no_highlight` (then the leg as sent highlighted).
With `--compare INDEX` (an index of the same items built with another mapping, e.g. offsets in
the postings), `suli` and `highlighted` also run against that index, interleaved with the rest.
Queries are real NFCorpus questions (bench.clustered.queries); the principal sees 30 %.
Reported: the node's `took` and the client's wall time, p50/p99, and ratios to `v3_form`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.clustered import DIM, MODEL, WORKSPACE, queries
from bench.overhead import pct, with_source
from suli.backends.base import LegQuery
from suli.backends.opensearch import OpenSearchBackend
from suli.backends.opensearch_bodies import (
    SOURCE_EXCLUDES,
    TextForm,
    highlight,
    text_leg,
    text_match,
)
from suli.models import Filters, Principal
from suli.settings import Settings
from suli.text import only_common_words
from suli.visibility import visibility_for


def sides() -> dict[str, Callable[[LegQuery], dict[str, Any]]]:
    def suli(q: LegQuery) -> dict[str, Any]:
        return {**text_leg(q), "track_total_hits": True}

    def v3_form(q: LegQuery) -> dict[str, Any]:
        return text_leg(q, TextForm("most_fields"))

    def no_count(q: LegQuery) -> dict[str, Any]:
        return text_leg(q)

    def highlighted(q: LegQuery) -> dict[str, Any]:
        assert q.text is not None
        return {**with_source(suli(q), {"excludes": SOURCE_EXCLUDES}),
                "highlight": highlight(text_match(q.text, q.text_fields), q.text_fields)}  # fmt: skip

    return {"v3_form": v3_form, "suli": suli, "no_count": no_count, "highlighted": highlighted}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--url", default="http://127.0.0.1:9200")
    ap.add_argument("--alias", required=True)
    ap.add_argument("--principal", default="prn_v30")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--compare", help="another index of the same items (other mapping)")
    args = ap.parse_args(argv)
    settings = Settings(opensearch_url=args.url, index_alias=args.alias,
                        acl_index=f"{args.alias}-acl")  # fmt: skip
    backend = OpenSearchBackend(settings, DIM, MODEL)
    vis = visibility_for(Principal(args.principal, WORKSPACE), backend.acls(WORKSPACE))
    texts, _ = queries(args.queries)
    legs = [
        LegQuery(
            vis,
            Filters(),
            t,
            None,
            settings.candidate_depth,
            "plain" if only_common_words(t) else "stemmed",
        )
        for t in texts
    ]
    fns = sides()
    index = {k: args.alias for k in fns}
    if args.compare:
        for side in ("suli", "highlighted"):
            fns[f"{side}@compare"] = fns[side]
            index[f"{side}@compare"] = args.compare
    took: dict[str, list[float]] = {k: [] for k in fns}
    wall: dict[str, list[float]] = {k: [] for k in fns}
    names = list(fns)
    start_load = os.getloadavg()
    for r in range(args.rounds):
        for i, q in enumerate(legs):
            k = (i + r) % len(names)
            for name in names[k:] + names[:k]:  # rotate who goes first
                t0 = time.perf_counter()
                resp = backend.client.search(index=index[name], body=fns[name](q))
                wall[name].append((time.perf_counter() - t0) * 1000)
                took[name].append(float(resp["took"]))
        print(f"round {r + 1}/{args.rounds}", file=sys.stderr, flush=True)
    base = statistics.median(took["v3_form"])
    report = {
        "alias": args.alias,
        "compare": args.compare,
        "items": backend.count(),
        "queries": len(legs),
        "rounds": args.rounds,
        "sides": {
            k: {
                "took_p50_ms": statistics.median(took[k]),
                "took_p99_ms": pct(took[k], 99),
                "wall_p50_ms": round(statistics.median(wall[k]), 2),
                "wall_p99_ms": round(pct(wall[k], 99), 2),
                "took_p50_ratio_to_v3": round(statistics.median(took[k]) / base, 3),
            }
            for k in fns
        },
        "load_avg": [start_load, os.getloadavg()],
    }
    backend.close()
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
