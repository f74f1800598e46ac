"""How far the two backends' answers agree on NFCorpus, and where they part.

    SULI_NFCORPUS=/work/shared/data/nfcorpus SULI_OPENSEARCH_URL=http://127.0.0.1:9200 \\
        python -m bench.agreement --split test [--save]

Both backends index NFCorpus alike (bench.quality.ensure_indexed: the bundled model's vectors
from bench.quality's cache) under their own names (`--alias`, `--db`), and every query of the
split runs through `Searcher.search` with the shipped defaults, first page (limit 10), in each
mode: hybrid (what users get), text, vector.

Agreement of one query is |top10_embedded ∩ top10_opensearch| / n with n = the longer of the
two pages (at most 10; a query both backends answer with nothing agrees fully). A page shorter
than 10 on one backend only counts the missing places as disagreement; dividing by the shorter
page (what bench.tuning.overlap does) would not. The mean is given over all queries and over
the queries that return anything on either backend; `*_per_10` divide by 10 instead, so a
short page counts against it even when both backends return the same hits (its ceiling is
the mean page length / 10: the meaning gates keep many NFCorpus pages short).

Where the hybrid pages part (`breakdown`) comes from the legs at the candidate depth, fused
offline by suli.ranking.rank as the service fuses them (checked: the offline pages equal the
service's): the differing places (n - |∩| summed over queries) are split between the text leg
and the vector leg by swapping one leg at a time (the Shapley share of each, so the two add up
to the total), and the text leg's part is looked at again with the typo tier off on both
backends, with the embedded leg's ties ordered by item id as OpenSearch orders them, and with
the meaning gates off (counterfactuals: each is the agreement that change alone would give).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.nfcorpus import WORKSPACE, load_qrels, load_queries
from bench.quality import CACHE, ensure_indexed, fetch_legs
from bench.typos import typo_clauses_off
from suli.backends.base import Backend
from suli.core import open_backend
from suli.embedding import Embedder, build_embedder
from suli.evaluation import mean_metrics
from suli.models import Principal, SearchRequest
from suli.ranking import rank
from suli.service import Searcher
from suli.settings import Settings

RESULTS = Path(__file__).parent / "results"
PAGE = 10
MODES = ("hybrid", "text", "vector")
BACKENDS = ("embedded", "opensearch")
Pairs = list[tuple[str, float]]
Legs = dict[str, tuple[Pairs, Pairs]]
Runs = dict[str, list[str]]


def agreement(a: Sequence[str], b: Sequence[str], page: int = PAGE) -> float:
    """|a ∩ b| / the longer page, both cut at `page`; two empty pages agree."""
    a, b = a[:page], b[:page]
    n = max(len(a), len(b))
    return 1.0 if n == 0 else len(set(a) & set(b)) / n


def differing(a: Sequence[str], b: Sequence[str], page: int = PAGE) -> int:
    """Places of the longer page that the other page does not hold."""
    a, b = a[:page], b[:page]
    return max(len(a), len(b)) - len(set(a) & set(b))


def mean_agreement(a: Mapping[str, Sequence[str]], b: Mapping[str, Sequence[str]]) -> dict:
    """Mean agreement over all queries and over those either backend answers."""
    shares = {q: agreement(a[q], b[q]) for q in a}
    answered = [s for q, s in shares.items() if a[q] or b[q]]
    # The other reading of the issue's figure: |a ∩ b| / 10 whatever the pages' lengths (a
    # query answered with 3 identical hits scores 0.3, so it measures full pages too).
    tens = [len(set(a[q][:PAGE]) & set(b[q][:PAGE])) / PAGE for q in a]
    tens_answered = [t for q, t in zip(a, tens, strict=True) if a[q] or b[q]]
    return {
        "all": round(sum(shares.values()) / max(1, len(shares)), 4),
        "all_per_10": round(sum(tens) / max(1, len(tens)), 4),
        "nonempty_per_10": round(sum(tens_answered) / max(1, len(tens_answered)), 4),
        "mean_page": {
            "a": round(sum(len(x[:PAGE]) for x in a.values()) / max(1, len(a)), 2),
            "b": round(sum(len(x[:PAGE]) for x in b.values()) / max(1, len(b)), 2),
        },
        "nonempty": round(sum(answered) / max(1, len(answered)), 4),
        "queries": len(shares),
        "queries_nonempty": len(answered),
        "identical_sets": sum(1 for q in a if set(a[q][:PAGE]) == set(b[q][:PAGE])),
        "differing_places": sum(differing(a[q], b[q]) for q in a),
    }


def first_pages(searcher: Searcher, queries: Mapping[str, str], mode: str) -> Runs:
    who = Principal("prn_bench", WORKSPACE)
    out = {}
    for qid, text in queries.items():
        resp = searcher.search(who, SearchRequest(query=text, limit=PAGE, mode=mode))  # type: ignore[arg-type]
        assert not resp.degraded, (qid, resp.degraded)
        out[qid] = [r.id for r in resp.results]
    return out


def fuse(legs: Legs, s: Settings, gates: bool = True) -> Runs:
    """Each query's first page as the service fuses its legs (NFCorpus has no outcomes)."""
    return {
        q: [
            r.id
            for r in rank(
                t[: s.candidate_depth],
                v[: s.candidate_depth],
                {},
                k=s.rrf_k,
                text_weight=s.text_weight,
                vector_weight=s.vector_weight,
                margin=s.meaning_margin,
                floor=s.meaning_floor,
                outcome_weights={},
                gates=gates,
            )[:PAGE]
        ]
        for q, (t, v) in legs.items()
    }


def ties_by_id(pairs: Pairs) -> Pairs:
    """A leg with equal scores ordered by item id (OpenSearch's TEXT_SORT)."""
    return sorted(pairs, key=lambda p: (-p[1], p[0]))


def tied_at_cut(pairs: Pairs, page: int = PAGE) -> bool:
    """Whether the page's last place ties a hit past it (the cut falls inside a tie)."""
    return len(pairs) > page and pairs[page - 1][1] == pairs[page][1]


def breakdown(e: Legs, o: Legs, s: Settings) -> dict[str, Any]:
    """The hybrid pages' differing places, split between the legs (Shapley over swapping each
    leg for the other backend's), with the counterfactual agreement of each change alone."""
    ee, oo = fuse(e, s), fuse(o, s)
    oe = fuse({q: (o[q][0], e[q][1]) for q in e}, s)  # OpenSearch's words, embedded vectors
    eo = fuse({q: (e[q][0], o[q][1]) for q in e}, s)
    total = text = vector = 0.0
    for q in e:
        d = differing(ee[q], oo[q])
        d_oe, d_eo = differing(oe[q], oo[q]), differing(eo[q], oo[q])
        total += d
        text += ((d - d_oe) + d_eo) / 2
        vector += ((d - d_eo) + d_oe) / 2
    ties_e = {q: (ties_by_id(t), v) for q, (t, v) in e.items()}
    text_e = {q: [d for d, _ in t] for q, (t, _) in e.items()}
    text_o = {q: [d for d, _ in t] for q, (t, _) in o.items()}
    return {
        "differing_places": int(total),
        "text_leg_share": round(text / max(1, total), 3),
        "vector_leg_share": round(vector / max(1, total), 3),
        "agreement_if": {
            "as_measured": mean_agreement(ee, oo)["all"],
            "same_text_leg": mean_agreement(oe, oo)["all"],
            "same_vector_leg": mean_agreement(eo, oo)["all"],
            "embedded_ties_by_id": mean_agreement(fuse(ties_e, s), oo)["all"],
            "gates_off": mean_agreement(fuse(e, s, False), fuse(o, s, False))["all"],
        },
        "text_leg_top10": mean_agreement(text_e, text_o),
        "text_leg_top100": round(
            sum(
                len(set(text_e[q]) & set(text_o[q])) / max(1, len(text_e[q]), len(text_o[q]))
                for q in e
            )
            / max(1, len(e)),
            4,
        ),
        "text_leg_cut_in_a_tie": {
            "embedded": sum(tied_at_cut(t) for t, _ in e.values()),
            "opensearch": sum(tied_at_cut(t) for t, _ in o.values()),
        },
        "vector_leg_top10": mean_agreement(
            {q: [d for d, _ in v] for q, (_, v) in e.items()},
            {q: [d for d, _ in v] for q, (_, v) in o.items()},
        ),
        "vector_leg_top100": round(
            sum(
                len({d for d, _ in e[q][1]} & {d for d, _ in o[q][1]}) / max(1, len(e[q][1]))
                for q in e
            )
            / max(1, len(e)),
            4,
        ),
    }


def typo_share(e: Legs, o: Legs, e_exact: Legs, o_exact: Legs, s: Settings) -> dict[str, Any]:
    """How many differing places hold a hit found only through the typo tier (on either
    backend), and the agreement with the tier off on both."""
    ee, oo = fuse(e, s), fuse(o, s)
    involved = 0
    for q in e:
        typo_hits = {d for d, _ in e[q][0]} - {d for d, _ in e_exact[q][0]}
        typo_hits |= {d for d, _ in o[q][0]} - {d for d, _ in o_exact[q][0]}
        diff = set(ee[q]) ^ set(oo[q])
        involved += len(diff & typo_hits)
    return {
        "differing_ids_found_by_typo_tier": involved,
        "differing_ids": sum(len(set(ee[q]) ^ set(oo[q])) for q in e),
        "queries_with_typo_hits_on_a_page": sum(
            1
            for q in e
            for typo in [
                ({d for d, _ in e[q][0]} - {d for d, _ in e_exact[q][0]})
                | ({d for d, _ in o[q][0]} - {d for d, _ in o_exact[q][0]})
            ]
            if typo & (set(ee[q]) | set(oo[q]))
        ),
        "agreement_typo_tier_off": mean_agreement(fuse(e_exact, s), fuse(o_exact, s))["all"],
    }


def ndcg(runs: Runs, qrels: Mapping[str, Mapping[str, int]]) -> float:
    return round(mean_metrics(runs, qrels)["ndcg@10"], 4)


def open_both(
    settings: Settings, embedder: Embedder, log: Callable[[str], None]
) -> dict[str, Backend]:
    out: dict[str, Backend] = {}
    for name in BACKENDS:
        backend = open_backend(settings.model_copy(update={"backend": name}), embedder)
        ensure_indexed(backend, embedder, None)
        log(f"{name}: {backend.count()} documents")
        out[name] = backend
    return out


def measure(
    backends: Mapping[str, Backend],
    embedder: Embedder,
    settings: Settings,
    split: str,
    limit_queries: int | None = None,
    log: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
) -> dict[str, Any]:
    qrels = load_qrels(split)
    queries = load_queries(set(qrels))
    if limit_queries:
        queries = dict(list(queries.items())[:limit_queries])
    report: dict[str, Any] = {"split": split, "queries": len(queries), "modes": {}}
    pages: dict[str, dict[str, Runs]] = {}
    for name, backend in backends.items():
        searcher = Searcher(backend, embedder, settings)
        pages[name] = {m: first_pages(searcher, queries, m) for m in MODES}
        log(f"{name}: first pages read")
    for m in MODES:
        report["modes"][m] = {
            "agreement": mean_agreement(pages["embedded"][m], pages["opensearch"][m]),
            "ndcg@10": {n: ndcg(pages[n][m], qrels) for n in backends},
        }
    legs = {n: fetch_legs(b, embedder, queries) for n, b in backends.items()}
    with typo_clauses_off():
        exact = {n: fetch_legs(b, embedder, queries) for n, b in backends.items()}
    log("legs read")
    offline = {n: fuse(legs[n], settings) for n in backends}
    report["offline_fusion_equals_service"] = {
        n: sum(offline[n][q] == pages[n]["hybrid"][q] for q in queries) / len(queries)
        for n in backends
    }
    report["breakdown"] = breakdown(legs["embedded"], legs["opensearch"], settings)
    report["typo_tier"] = typo_share(
        legs["embedded"], legs["opensearch"], exact["embedded"], exact["opensearch"], settings
    )
    return report


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--split", default="test", choices=["train", "dev", "test"])
    ap.add_argument("--alias", default="bench-agree")
    ap.add_argument("--db", default=str(Path.home() / ".cache" / "suli" / "bench-agree.db"))
    ap.add_argument("--limit-queries", type=int)
    ap.add_argument("--save", action="store_true", help="write bench/results/agreement-<date>")
    args = ap.parse_args(argv)
    settings = Settings(
        index_alias=args.alias, acl_index=f"{args.alias}-acl", embedded_path=Path(args.db)
    )
    embedder = build_embedder("minilm", CACHE)
    backends = open_both(settings, embedder, lambda m: print(m, file=sys.stderr))
    report = {"date": time.strftime("%Y-%m-%d"), **measure(
        backends, embedder, settings, args.split, args.limit_queries
    )}  # fmt: skip
    text = json.dumps(report, indent=1)
    print(text)
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        name = f"agreement-{args.split}-{time.strftime('%Y%m%d')}.json"
        (RESULTS / name).write_text(text + "\n")
    return report


if __name__ == "__main__":
    main()
