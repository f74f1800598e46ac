"""Snippet making speed (suli.snippets.snippet): CPU milliseconds per page on one core.

  nfcorpus  pages of 10 NFCorpus documents, one per test query (its judged documents, else
            the first ones, as text hits), in query order: the stem cache warms as a
            service's does; `first page` is the cold one
  huge      a page of 9 NFCorpus documents and one 1,000,000-character body, the query's
            words far past the scanned prefix (the worst case: the fragment scan finds
            nothing and the best passage scans again) and near its start

    python -m bench.snippets [--queries N] [--repeat N]

Goals (issue 34): p50 <= 2 ms per NFCorpus page, <= 20 ms for a page with a huge body.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from bench import nfcorpus
from suli import analysis
from suli.snippets import snippet
from suli.text import only_common_words

PAGE = 10
HUGE_CHARS = 1_000_000


def _fields(it: Any) -> dict[str, str]:
    return {"title": it.title, "body": it.body}


def pages(n_queries: int) -> list[tuple[str, list[dict[str, str]]]]:
    """A page per test query: the first PAGE documents holding one of its `english` terms
    (text hits, as the text leg would find them; the judged ones first)."""
    items = nfcorpus.load_items()
    terms = {
        it.id: {analysis.english_term(w) for w in analysis.words(f"{it.title} {it.body}")}
        for it in items
    }
    qrels = nfcorpus.load_qrels("test")
    queries = nfcorpus.load_queries(set(qrels))
    out = []
    for qid in sorted(queries)[:n_queries]:
        q = {t for t in map(analysis.english_term, analysis.words(queries[qid])) if t}
        judged = [it for it in items if it.id in qrels[qid]]
        rest = [it for it in items if it.id not in qrels[qid]]
        hits = [it for it in judged + rest if q & terms[it.id]][:PAGE]
        if hits:
            out.append((queries[qid], [_fields(it) for it in hits]))
    analysis.stem.cache_clear()  # the timed run starts cold
    return out


def page_ms(query: str, page: list[dict[str, str]]) -> float:
    mode: Any = "plain" if only_common_words(query) else "stemmed"
    # CPU time of this thread: on a shared machine wall time measures the neighbours too.
    t = time.thread_time()
    for fields in page:
        snippet(fields, query, mode, True)
    return (time.thread_time() - t) * 1000


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def run(n_queries: int = 323, repeat: int = 5) -> dict[str, Any]:
    ps = pages(n_queries)
    first = page_ms(*ps[0])
    times = [page_ms(q, page) for q, page in ps]
    filler = " ".join(f"filler{i % 997} words go here." for i in range(HUGE_CHARS // 30))
    far = (filler + " statin cancer")[:HUGE_CHARS]
    far = far[: HUGE_CHARS - 14] + " statin cancer"
    near = ("statin cancer " + filler)[:HUGE_CHARS]
    huge: dict[str, list[float]] = {"far": [], "near": []}
    page = ps[0][1]
    for _ in range(repeat):
        for name, body in (("far", far), ("near", near)):
            page9 = [*page[: PAGE - 1], {"title": "huge", "body": body}]
            huge[name].append(page_ms("statin cancer", page9))
    return {
        "nfcorpus": {
            "pages": len(times),
            "p50_ms": round(statistics.median(times), 3),
            "p99_ms": round(_pct(times, 0.99), 3),
            "first_page_ms": round(first, 3),
        },
        "huge": {
            name: {"p50_ms": round(statistics.median(xs), 3), "max_ms": round(max(xs), 3)}
            for name, xs in huge.items()
        },
        "huge_body_chars": HUGE_CHARS,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=323, help="NFCorpus test queries (pages)")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each huge page")
    args = ap.parse_args(argv)
    print(json.dumps(run(args.queries, args.repeat), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
