"""What the page fetch's highlighting costs: the same page requests with and without it.

    python -m bench.page_fetch --url http://127.0.0.1:9241 [--n 100000] [--queries 200]
        [--rounds 2] [--out bench/results/page_fetch_100k_X.json]

On an index the scale bench loaded (`bench.scale_cluster`, alias bench-sc-clustered-N), each
query goes once through `Searcher.search` (limit 10, as a first page) and the page request it
makes is kept (`PageQuery`: ids, filters, the text leg's words, the ids to highlight). Then
each kept page is fetched again through the backend three ways: as sent, with a highlight
query of the exact words only (no typo clauses), and without highlight (`text=None`: the
page's `_source` only), interleaved query by query with the order rotating; p50/p99 of each
side, the ratios and the load average are reported.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import replace
from typing import Any

from bench.replay import loaded_run, recorded, report
from bench.scale_cluster.size import SizeRun
from bench.typos import typo_clauses_off
from suli.backends.base import PageQuery


def kept_pages(run: SizeRun, texts: list[str]) -> list[PageQuery]:
    """The page request of each query's first page (queries with no words to highlight are
    left out: their page has no highlight to measure)."""
    pages = recorded(run, texts).pages.values()
    return [q for q in pages if q.text is not None and q.highlight_ids]


def measure(run: SizeRun, pages: list[PageQuery], rounds: int) -> dict[str, Any]:
    """Three sides per page: as Suli sends it, its highlight query without the typo clauses
    (exact words only, as before they existed: bench.typos' switch), and no highlight."""
    sides = ("with_highlight", "highlight_exact_words_only", "without_highlight")
    took: dict[str, list[float]] = {name: [] for name in sides}

    def fetch(name: str, page: PageQuery) -> None:
        if name == "without_highlight":
            run.backend.page(replace(page, text=None, highlight_ids=()))
        elif name == "highlight_exact_words_only":
            with typo_clauses_off():
                run.backend.page(page)
        else:
            run.backend.page(page)

    for r in range(rounds):
        for i, page in enumerate(pages):
            shift = (i + r) % len(sides)
            for name in sides[shift:] + sides[:shift]:  # each side first as often
                t0 = time.perf_counter()
                fetch(name, page)
                took[name].append((time.perf_counter() - t0) * 1000)

    def summary(xs: list[float]) -> dict[str, float]:
        ordered = sorted(xs)
        return {
            "n": len(xs),
            "p50_ms": round(statistics.median(xs), 2),
            "p99_ms": round(ordered[min(len(xs) - 1, round(0.99 * (len(xs) - 1)))], 2),
        }

    out: dict[str, Any] = {name: summary(xs) for name, xs in took.items()}
    for name in sides[1:]:
        out[f"p50_ratio_with_highlight_over_{name}"] = round(
            out["with_highlight"]["p50_ms"] / out[name]["p50_ms"], 3
        )
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args, run = loaded_run(__doc__, argv)
    texts, _ = run.query_set
    load_before = [round(x, 2) for x in os.getloadavg()]
    pages = kept_pages(run, texts)
    got: dict[str, Any] = {
        "alias": run.alias,
        "queries": len(texts),
        "pages_with_highlights": len(pages),
        "rounds": args.rounds,
        "load_avg_before": load_before,
        **measure(run, pages, args.rounds),
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
    }
    return report("bench.page_fetch", args, argv, got)


if __name__ == "__main__":
    main()
