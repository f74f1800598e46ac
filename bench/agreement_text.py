"""Where the two word legs part: FTS5's bm25() replayed in Python on the embedded store's own
tokens, then moved one difference at a time towards Lucene's BM25 as OpenSearch scores the
text leg (bodies.exact_match: the combined `content` field + title^0.25, k1 1.2, b from the
mapping).

    SULI_NFCORPUS=... SULI_OPENSEARCH_URL=... python -m bench.agreement_text --split test

Each variant's top 10 is compared with OpenSearch's real word leg (exact words only: the typo
tier off on both) by bench.agreement.agreement. "fts5" is the store's scoring before
2026-12-05 (the title at 1.25 inside the row), the variants move from it; "as shipped" must
reproduce the store's own ranking (vs_embedded 1.0), which checks the replay. Needs the
indexes of `python -m bench.agreement`.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from bench.agreement import BACKENDS, agreement, ndcg
from bench.nfcorpus import WORKSPACE, load_qrels, load_queries
from bench.quality import CACHE
from bench.typos import typo_clauses_off
from suli.backends.base import LegQuery, TextFields
from suli.core import open_backend
from suli.embedding import build_embedder
from suli.models import Filters, Principal
from suli.settings import Settings
from suli.text import ENGLISH_STOPWORDS, only_common_words, words
from suli.visibility import visibility_for

K1 = 1.2


def lucene_norm(n: int) -> int:
    """A field length as Lucene's norms keep it (SmallFloat.intToByte4, then decoded)."""
    free = 24  # 255 - longToInt4(Integer.MAX_VALUE)
    if n < free:
        return n
    i = n - free
    bits = i.bit_length()
    if bits >= 4:
        shift = bits - 4
        i = ((i >> shift) | 8) << shift  # keeps the 4 high bits
    return free + i


class Tokens:
    """Every row's stemmed tokens per column, read from the store's fts_stem table."""

    def __init__(self, db: Path) -> None:
        c = sqlite3.connect(db)
        c.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, fts_stem, instance)")
        self.tf: dict[int, list[Counter[str]]] = defaultdict(lambda: [Counter(), Counter()])
        for term, doc, col in c.execute("SELECT term, doc, col FROM temp.v"):
            self.tf[doc][0 if col == "title" else 1][term] += 1
        self.ids = dict(c.execute("SELECT rowid, id FROM items"))
        self.n = len(self.ids)
        c.execute("CREATE VIRTUAL TABLE temp.q USING fts5(t, tokenize='porter unicode61 "
                  "remove_diacritics 2')")  # fmt: skip
        c.execute("CREATE VIRTUAL TABLE temp.qv USING fts5vocab(temp, q, instance)")
        self.c = c
        self.stop = {self.stem(w)[0] for w in ENGLISH_STOPWORDS if self.stem(w)}
        self.df: Counter[str] = Counter()
        self.postings: dict[str, list[int]] = defaultdict(list)
        for d, cols in self.tf.items():
            for t in set(cols[0]) | set(cols[1]):
                self.df[t] += 1
                self.postings[t].append(d)

    def stem(self, text: str) -> list[str]:
        self.c.execute("DELETE FROM temp.q")
        self.c.execute("INSERT INTO temp.q(rowid, t) VALUES (1, ?)", (text,))
        return [t for t, _ in sorted(self.c.execute("SELECT term, offset FROM temp.qv"),
                                     key=lambda r: r[1])]  # fmt: skip


_LENS: dict[tuple[bool, bool], tuple[dict[int, tuple[int, int]], float, float]] = {}


def lengths(
    tok: Tokens, no_stop: bool, norms: bool
) -> tuple[dict[int, tuple[int, int]], float, float]:
    """Each row's (title, body) length under a variant, and the mean whole-row and title
    lengths (Lucene's mean is of the exact lengths, its per-document length the norm's)."""
    key = (no_stop, norms)
    if key not in _LENS:
        drop = tok.stop if no_stop else set()
        exact: dict[int, tuple[int, int]] = {}
        for d, (title, body) in tok.tf.items():
            exact[d] = (
                sum(x for t, x in title.items() if t not in drop),
                sum(x for t, x in body.items() if t not in drop),
            )
        avg_all = sum(a + b for a, b in exact.values()) / tok.n
        avg_title = sum(a for a, _ in exact.values()) / tok.n
        if norms:  # Lucene keeps one norm per field: content (title + body) and title
            lens = {d: (lucene_norm(a), lucene_norm(a + b) - lucene_norm(a))
                    for d, (a, b) in exact.items()}  # fmt: skip
        else:
            lens = exact
        _LENS[key] = (lens, avg_all, avg_title)
    return _LENS[key]


def score_all(tok: Tokens, phrases: list[str], v: dict[str, Any]) -> list[tuple[str, float]]:
    """Every matching row's score under variant `v`, best first, ties by item id."""
    lens, avg_all, avg_title = lengths(tok, v["no_stop_len"], v["norms"])
    b = v["b"]

    def idf(n: int) -> float:
        x = (tok.n - n + 0.5) / (n + 0.5)
        return math.log(1 + x) if v["lucene_idf"] else max(math.log(x), 1e-6) if x > 1 else 1e-6

    qtf = Counter(phrases)
    terms = list(qtf) if v["query_tf"] else phrases
    docs = {d for t in terms for d in tok.postings.get(t, ())}
    out = []
    for d in docs:
        cs = tok.tf[d]
        li, lb = lens[d]
        s = 0.0
        for t in terms:
            ti, bo = cs[0].get(t, 0), cs[1].get(t, 0)
            if not ti and not bo:
                continue
            w = qtf[t] if v["query_tf"] else 1
            f = v["title_weight"] * ti + bo
            s += w * idf(tok.df[t]) * f * (K1 + 1) / (f + K1 * (1 - b + b * (li + lb) / avg_all))
            if v["title_field"] and ti:
                s += (
                    w
                    * v["title_field"]
                    * idf(tok.df[t])
                    * ti
                    * (K1 + 1)
                    / (ti + K1 * (1 - b + b * li / avg_title))
                )
            if v.get("title_row") and ti:  # a second bm25() of the same row, title only
                s += (
                    w
                    * v["title_row"]
                    * idf(tok.df[t])
                    * ti
                    * (K1 + 1)
                    / (ti + K1 * (1 - b + b * (li + lb) / avg_all))
                )
        out.append((tok.ids[d], s))
    out.sort(key=lambda p: (-p[1], p[0]))
    return out


FTS5 = dict(lucene_idf=False, b=0.75, title_weight=1.25, title_field=0.0, no_stop_len=False,
            norms=False, query_tf=False)  # fmt: skip
LUCENE = dict(lucene_idf=True, b=0.6, title_weight=1.0, title_field=0.25, no_stop_len=True,
              norms=True, query_tf=True)  # fmt: skip


def variants() -> dict[str, dict[str, Any]]:
    out = {
        "fts5": FTS5,
        # What the store ships now (sql.bm25_call): vs_embedded 1.0 checks the replay.
        "fts5 as shipped: title weight 1 + 0.3 x title-only bm25()": {
            **FTS5, "title_weight": 1.0, "title_row": 0.3},
    }  # fmt: skip
    for name in LUCENE:  # one difference at a time
        out[f"fts5 + {name}"] = {**FTS5, name: LUCENE[name]}
    out["fts5 + title as Lucene (weight 1, title field 0.25)"] = {
        **FTS5, "title_weight": 1.0, "title_field": 0.25}  # fmt: skip
    # What FTS5 can do: bm25() with other column weights, or two bm25() calls on the same
    # row summed (the second weighing the title only; its length is still the row's).
    for tw in (1.0, 1.5, 2.0, 3.0):
        out[f"fts5, title weight {tw:g}"] = {**FTS5, "title_weight": tw}
    for tw in (1.0, 1.25):
        for c in (0.25, 0.5, 1.0, 1.5, 2.0):
            out[f"fts5, title weight {tw:g} + {c:g} x title-only bm25()"] = {
                **FTS5, "title_weight": tw, "title_row": c}  # fmt: skip
    out["lucene on fts5 tokens"] = LUCENE
    for name in LUCENE:  # all but one
        out[f"lucene but {name} as fts5"] = {**LUCENE, name: FTS5[name]}
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--split", default="test")
    ap.add_argument("--alias", default="bench-agree")
    ap.add_argument("--db", default=str(Path.home() / ".cache" / "suli" / "bench-agree.db"))
    args = ap.parse_args(argv)
    qrels = load_qrels(args.split)
    queries = load_queries(set(qrels))
    settings = Settings(index_alias=args.alias, acl_index=f"{args.alias}-acl",
                        embedded_path=Path(args.db))  # fmt: skip
    vis = visibility_for(Principal("prn_bench", WORKSPACE), [])
    legs: dict[str, dict[str, list[str]]] = {}
    with typo_clauses_off():
        for name in BACKENDS:
            backend = open_backend(settings.model_copy(update={"backend": name}),
                                   build_embedder("minilm", CACHE))  # fmt: skip
            legs[name] = {}
            for qid, text in queries.items():
                flavour: TextFields = "plain" if only_common_words(text) else "stemmed"
                got = backend.search(LegQuery(vis, Filters(), text, None, 100, flavour))
                legs[name][qid] = [h.id for h in got.text]
    tok = Tokens(Path(args.db))
    phrases = {}
    for qid, text in queries.items():
        ws = [w for w in dict.fromkeys(words(text)) if w not in ENGLISH_STOPWORDS]
        raw = [w for w in words(text) if w not in ENGLISH_STOPWORDS]
        phrases[qid] = ([s for w in ws for s in tok.stem(w)], [s for w in raw for s in tok.stem(w)])
    report: dict[str, Any] = {
        "split": args.split,
        "engines": {
            "agreement": round(sum(agreement(legs["embedded"][q], legs["opensearch"][q])
                                   for q in queries) / len(queries), 4),
            "ndcg@10": {n: ndcg(legs[n], qrels) for n in BACKENDS},
        },
        "variants": {},
    }  # fmt: skip
    for name, v in variants().items():
        runs = {}
        for qid in queries:
            unique, every = phrases[qid]
            # Lucene analyses the whole query (repeated words count); Suli's FTS5 expression
            # holds each word once.
            runs[qid] = [d for d, _ in score_all(tok, every if v["query_tf"] else unique, v)[:100]]
        report["variants"][name] = {
            "vs_opensearch": round(sum(agreement(runs[q], legs["opensearch"][q])
                                       for q in queries) / len(queries), 4),
            "vs_embedded": round(sum(agreement(runs[q], legs["embedded"][q])
                                     for q in queries) / len(queries), 4),
            "ndcg@10": ndcg(runs, qrels),
        }  # fmt: skip
        print(name, report["variants"][name], flush=True)
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
