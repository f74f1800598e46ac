"""How much do other workspaces' items move a workspace's ranking?

Both backends keep one set of term statistics (document frequency, average field length) over
every item of the index or file, whatever its workspace. Explain no longer shows raw BM25
scores, but the *order* of a workspace's results can still move when another workspace writes.
This measures that residual effect on the sample workspace (A):

    python -m bench.term_stats --backend embedded
    SULI_OPENSEARCH_URL=http://127.0.0.1:9200 python -m bench.term_stats --backend opensearch

Per query (two words from A's own titles), A's top 10 in text mode and in hybrid mode, before and
after workspace B writes (a) `natural`: another sample workspace of the same kind of items, and
(b) `adversarial`: items made of one of the query words only (B knows or guesses A's words and
wants to push that word's weight down). Reported: the share of queries whose top-10 order or
top-10 set changed, and the mean number of top-10 positions that changed. The vector leg reads
no corpus statistics, so any change comes from the text leg. FakeEmbedder: no model download.
`bm25` is the text leg with ties ordered by id: the pure effect of the statistics; `text` and
`hybrid` are what the service answers, where items of equal score also keep the engine's
internal order (OpenSearch: Lucene doc ids, which segment merges renumber).
"""

from __future__ import annotations

import argparse
import random
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from uuid import uuid4

from cli import sample
from indexer.pipeline import index_items
from suli.backends.base import LegQuery
from suli.core import open_backend
from suli.embedding import FakeEmbedder
from suli.models import Filters, Item, Principal
from suli.service import Searcher
from suli.settings import Settings
from suli.text import ENGLISH_STOPWORDS, words
from suli.validate import search_request
from suli.visibility import visibility_for

A, B = sample.WORKSPACE, "ws_bench_b"
MODES = ("bm25", "text", "hybrid")
ME = Principal("prn_bench_reader", A, "person", ())


def queries(items: Sequence[Item], n: int, rng: random.Random) -> list[str]:
    vocab = sorted(
        {w for it in items for w in words(it.title) if len(w) > 3 and w not in ENGLISH_STOPWORDS}
    )
    return [" ".join(rng.sample(vocab, 2)) for _ in range(n)]


TITLES: dict[str, str] = {}  # A's items: id -> title, to prove no result comes from B


def top(searcher: Searcher, qs: Sequence[str], mode: str) -> dict[str, list[str]]:
    """A's top 10. `text`/`hybrid`: as the service serves them (equal scores keep the
    backend's order, which a segment merge can change); `bm25`: the text leg with equal
    scores ordered by id, so only a change of scores (corpus statistics) moves it."""
    out: dict[str, list[str]] = {}
    for q in qs:
        if mode == "bm25":
            vis = visibility_for(ME, [])
            hits = searcher.backend.search(LegQuery(vis, Filters(), q, None, 100)).text
            ranked = sorted(hits, key=lambda h: (-round(h.score, 5), h.id))[:10]
            out[q] = [h.id for h in ranked]
            continue
        results = searcher.search(ME, search_request(q, mode=mode, limit=10)).results
        # B reuses A's ids (its own id space): a title tells whose item came back.
        assert all(TITLES.get(r.id) == r.title for r in results), "a result of B leaked"
        out[q] = [r.id for r in results]
    return out


def compare(before: dict[str, list[str]], after: dict[str, list[str]]) -> str:
    n = len(before)
    order = sum(before[q] != after[q] for q in before)
    members = sum(set(before[q]) != set(after[q]) for q in before)
    moved = sum(
        sum(x != y for x, y in zip(before[q], after[q], strict=False))
        + abs(len(before[q]) - len(after[q]))
        for q in before
    )
    return (
        f"order changed {order}/{n} ({100 * order / n:.0f}%), top-10 set changed "
        f"{members}/{n} ({100 * members / n:.0f}%), positions changed {moved / n:.2f} per query"
    )


def load(searcher: Searcher, items: Sequence[Item]) -> None:
    summary = index_items(enumerate(items), searcher.backend, searcher.embedder)
    assert not summary.rejected, summary.rejected[:3]
    searcher.backend.refresh()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", choices=["embedded", "opensearch"], default="embedded")
    ap.add_argument("--items", type=int, default=400, help="items of workspace A")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--seed", type=int, default=14)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    name = f"bench-termstats-{uuid4().hex[:8]}"
    tmp = Path(tempfile.mkdtemp(prefix="suli-termstats-"))
    settings = Settings(
        backend=args.backend,
        embedder="fake",
        index_alias=name,
        acl_index=f"{name}-acl",
        embedded_path=tmp / "s.db",
        home=tmp,
    )
    embedder = FakeEmbedder()
    searcher = Searcher(open_backend(settings, embedder), embedder, settings)
    try:
        ws = sample.build(args.items, seed=args.seed)
        searcher.backend.put_principals([ME])
        load(searcher, ws.items)
        TITLES.update({it.id: it.title for it in ws.items})
        qs = queries(ws.items, args.queries, rng)
        base = {m: top(searcher, qs, m) for m in MODES}
        print(f"backend {args.backend}; workspace A: {len(ws.items)} items; {len(qs)} queries")
        for m in MODES:  # control: the same searches again, nothing written
            print(f"control     B={0:>5} {m:<6}: {compare(base[m], top(searcher, qs, m))}")
        # (a) natural: B is another workspace of the same kind, growing.
        other = sample.build(args.items * 3, seed=args.seed + 1)
        done = 0
        for size in (args.items // 4, args.items, args.items * 3):
            load(searcher, [replace(it, workspace=B) for it in other.items[done:size]])
            done = size
            for m in MODES:
                print(f"natural     B={size:>5} {m:<6}: {compare(base[m], top(searcher, qs, m))}")
        # (b) adversarial: B writes items made of the first word of every query.
        spam = [
            Item(f"spam_{n}_{k}", B, f"{q.split()[0]} notes", body=f"{q.split()[0]} " * 3)
            for n, q in enumerate(qs)
            for k in range(20)
        ]
        load(searcher, spam)
        for m in MODES:
            print(f"adversarial B+={len(spam):>4} {m:<6}: {compare(base[m], top(searcher, qs, m))}")
    finally:
        if args.backend == "opensearch":
            client = searcher.backend.client  # type: ignore[attr-defined]
            found = client.indices.get(index=f"{name}*", expand_wildcards="all")
            client.indices.delete(index=",".join(found), ignore=[404])
        searcher.backend.close()


if __name__ == "__main__":
    main()
