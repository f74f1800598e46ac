"""Snippet fidelity: the words the core marks (suli.snippets) against the words OpenSearch's
unified highlighter marks, under today's page highlight request, on NFCorpus.

NFCorpus documents go into a fresh index made from mappings/items.json's text analysis (no
vectors: only the words matter). Each query (test queries, and a one-typo copy of each) runs
as the text leg's scoring clause with bench.native_hybrid.highlight (the block the page fetch sent before); for every hit and every
highlighted field (title, body, caption) the engine's fragment is compared with the core's
marks on the same text: the same marked tokens, or no fragment and no core mark. A hit agrees
when all its fields do. Prints the figure and each difference with its cause.

    python -m bench.snippet_fidelity [--url URL] [--docs N] [--queries N] [--analysis]

--analysis also measures suli.analysis against the node's `_analyze` (tokens per document,
stems per token) over the indexed documents.
"""

from __future__ import annotations

import argparse
import html
import json
import random
import re
import sys
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch, helpers

from bench import native_hybrid, nfcorpus
from suli import analysis, snippets
from suli.backends.opensearch import bodies
from suli.text import only_common_words

MAPPING = Path(__file__).resolve().parents[1] / "mappings" / "items.json"
FIELDS = ("title", "body", "caption")
PAGE = 10  # hits compared per query: a page
_MARK = re.compile(r"<mark>(.*?)</mark>", re.DOTALL)


def create_index(client: OpenSearch, index: str) -> None:
    """An index with the items mapping's analysis and text fields (no vector)."""
    spec = json.loads(MAPPING.read_text())
    settings = {k: v for k, v in spec["settings"]["index"].items() if not k.startswith("knn")}
    settings["number_of_replicas"] = 0
    props = {k: v for k, v in spec["mappings"]["properties"].items() if k != "vector"}
    body = {
        "settings": {"index": settings, "analysis": spec["settings"]["analysis"]},
        "mappings": {"dynamic": "strict", "properties": props},
    }
    client.indices.create(index=index, body=body)


def load(client: OpenSearch, index: str, docs: list[dict[str, str]]) -> None:
    actions = ({"_index": index, "_id": d["id"], "_source": d} for d in docs)
    helpers.bulk(client, actions, refresh="wait_for")


def documents(limit: int | None) -> list[dict[str, str]]:
    return [
        {"id": it.id, "workspace": "w", "title": it.title, "body": it.body}
        for it in nfcorpus.load_items(limit)
    ]


def test_queries(limit: int) -> list[str]:
    """The first `limit` NFCorpus test queries (in id order, for a stable sample)."""
    qrels = nfcorpus.load_qrels("test")
    queries = nfcorpus.load_queries(set(qrels))
    return [queries[k] for k in sorted(queries)][:limit]


def typo_copy(query: str, rng: random.Random) -> str | None:
    """The query with one typo (a swap, a dropped, doubled or wrong letter; never the first
    letter, as the typo rule assumes) in one of its words that may carry one; None if none."""
    ws = query.split()
    cands = [i for i, w in enumerate(ws) if w.isalpha() and len(w) >= 5]
    if not cands:
        return None
    i = rng.choice(cands)
    w = ws[i]
    k = rng.randrange(1, len(w) - 1)
    kind = rng.choice(("swap", "drop", "double", "wrong"))
    if kind == "swap":
        w = w[:k] + w[k + 1] + w[k] + w[k + 2 :]
    elif kind == "drop":
        w = w[:k] + w[k + 1 :]
    elif kind == "double":
        w = w[:k] + w[k] + w[k:]
    else:
        w = w[:k] + rng.choice("aeioust".replace(w[k].lower(), "")) + w[k + 1 :]
    ws[i] = w
    return " ".join(ws)


@dataclass
class Report:
    hits: int = 0
    agree: int = 0
    differences: list[dict[str, Any]] = field(default_factory=list)
    causes: Counter[str] = field(default_factory=Counter)

    @property
    def figure(self) -> float:
        return self.agree / self.hits if self.hits else 1.0


def cause(token: str, m: snippets.Matcher, engine: bool) -> str:
    """Why the core and the engine differ on one token (engine: only the engine marks it)."""
    term = analysis.english_term(token) if m.stemmed else analysis.plain_term(token)
    if term is None:
        return "stop word"
    if term in m.terms:
        return "exact term"
    if m.prefix is not None and term.startswith(m.prefix):
        return "prefix"
    if term[0] in m.firsts and snippets.is_match(term, m):
        return "typo rule"
    if engine and not any(term == analysis.english_term(t) for t in analysis.words(token)):
        return "tokenizer"
    return "engine marks what no core rule does" if engine else "core rule"


def compare_field(text: str, frag: str | None, m: snippets.Matcher) -> list[tuple[str, str]]:
    """[(side, token)] where the engine's marks and the core's differ in one field."""
    if frag is None:
        # No fragment: the core must mark nothing within what the highlighter analyses.
        return [("core", text[a:b]) for a, b in snippets.marks(text, m)]
    plain = html.unescape(_MARK.sub(r"\1", frag))
    engine = [html.unescape(x) for x in _MARK.findall(frag)]
    at = text.find(plain)
    if at < 0:  # not found verbatim (should not happen): compare on the fragment alone
        core = [plain[a:b] for a, b in snippets.marks(plain, m)]
    else:
        # A fragment may end inside a token ("Alliance’s" cut after "Alliance"): the engine
        # marks what of it the fragment holds, so the core's marks are cut to it too.
        end = at + len(plain)
        core = [
            text[max(a, at) : min(b, end)] for a, b in snippets.marks(text, m) if a < end and b > at
        ]
    out = [("engine", t) for t in (Counter(engine) - Counter(core)).elements()]
    return out + [("core", t) for t in (Counter(core) - Counter(engine)).elements()]


def run(client: OpenSearch, index: str, queries: list[str]) -> Report:
    report = Report()
    for q in queries:
        flavour: Any = "plain" if only_common_words(q) else "stemmed"
        match = bodies.text_match(q, flavour)
        body = {
            "size": PAGE,
            "query": match,
            "_source": list(FIELDS),
            "highlight": native_hybrid.highlight(match, flavour),
        }
        resp = client.search(index=index, body=body)
        m = snippets.matcher(q, flavour)
        for hit in resp["hits"]["hits"]:
            report.hits += 1
            src, hl = hit["_source"], hit.get("highlight", {})
            diffs = []
            for f in FIELDS:
                frags = hl.get(f) or hl.get(f"{f}.plain")
                for side, tok in compare_field(src.get(f) or "", frags[0] if frags else None, m):
                    why = cause(tok, m, side == "engine")
                    diffs.append({"field": f, "only": side, "token": tok, "cause": why})
            if diffs:
                report.causes.update(f"{d['only']} only: {d['cause']}" for d in diffs)
                report.differences.append({"query": q, "id": hit["_id"], "diffs": diffs})
            else:
                report.agree += 1
    return report


def measure_analysis(client: OpenSearch, docs: list[dict[str, str]]) -> dict[str, Any]:
    """suli.analysis against `_analyze`: documents whose token list differs from the standard
    tokenizer's; tokens whose `english` term differs from the english analyzer's."""
    tok_bad = term_bad = terms = 0
    for d in docs:
        text = d["title"] + "\n" + d["body"]
        want = client.indices.analyze(body={"tokenizer": "standard", "text": text})
        got = analysis.words(text)
        tok_bad += [t["token"] for t in want["tokens"]] != got
        eng = client.indices.analyze(body={"analyzer": "english", "text": text})
        ours = [t for t in map(analysis.english_term, got) if t]
        terms += len(eng["tokens"])
        term_bad += sum(
            a != b for a, b in zip([t["token"] for t in eng["tokens"]], ours, strict=False)
        )
        term_bad += abs(len(eng["tokens"]) - len(ours))
    return {"documents": len(docs), "token lists differing": tok_bad, "terms": terms,
            "terms differing": term_bad}  # fmt: skip


def queries_with_typos(n: int, seed: int = 34) -> list[str]:
    rng = random.Random(seed)
    base = test_queries(n)
    typos = [t for t in (typo_copy(q, rng) for q in base) if t]
    return base + typos


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:9200")
    ap.add_argument("--docs", type=int, default=0, help="documents indexed (0: all)")
    ap.add_argument("--queries", type=int, default=200, help="test queries (+ a typo copy each)")
    ap.add_argument("--analysis", action="store_true", help="also measure suli.analysis")
    ap.add_argument("--show", type=int, default=40, help="differences printed")
    args = ap.parse_args(argv)
    client = OpenSearch(args.url, timeout=120)
    index = f"suli-snippet-fidelity-{uuid.uuid4().hex[:8]}"
    docs = documents(args.docs or None)
    create_index(client, index)
    try:
        load(client, index, docs)
        queries = queries_with_typos(args.queries)
        report = run(client, index, queries)
        if args.analysis:
            print(json.dumps({"analysis": measure_analysis(client, docs)}))
    finally:
        client.indices.delete(index=index)
    print(f"queries {len(queries)}  text hits {report.hits}  same marked words {report.agree}"
          f"  fidelity {report.figure:.4f}")  # fmt: skip
    for why, n in report.causes.most_common():
        print(f"  {n:5d}  {why}")
    for d in report.differences[: args.show]:
        print(json.dumps(d, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
