"""Candidate depth with a proof (#34 item 7): how often a smaller depth provably gives the same page.

    python -m bench.depth_bound --url http://127.0.0.1:9241 [--n 100000] [--queries 200]
        [--prefix bench-sc] [--depths 25 50 75] [--out bench/results/depth_bound_X.json]

With weighted RRF (suli.ranking.rank), an item outside both legs' top d has a fused score of
at most (w_text + w_vector) / (k + d + 1) x the highest outcome weight, so a page whose last
fused score is above that bound holds no item found deeper in both legs. That is not enough
for the page at depth d to equal the full-depth page: an item in one leg's top d and the other
leg's next ranks loses that leg's part of its score at depth d, and the page's order moves.
For each query of the scale bench (its recorded legs at full depth), this bench fuses the
legs as the service does and reports, per smaller depth d, the share of queries whose bound
holds and the share whose page at depth d (the legs' top d fused alone) equals the
full-depth page: the most any proof could admit. A smaller depth costs the nodes
`legs_depth_half` of bench.engine_cpu; asking again at full depth when the page may differ
costs both, so the scheme pays only if that share exceeds depth-d's cost over the full
depth's (0.90 at d = 50, 3 primaries, 100k).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bench.replay import loaded_run, recorded, report
from suli.ranking import rank


def page(legs: Any, depth: int, s: Any, outcomes: dict[str, str | None]) -> list[Any]:
    text = [(h.id, h.score) for h in legs.text[:depth]]
    vector = [(h.id, h.score) for h in legs.vector[:depth]]
    return rank(
        text,
        vector,
        outcomes,
        k=s.rrf_k,
        text_weight=s.text_weight,
        vector_weight=s.vector_weight,
        margin=s.meaning_margin,
        outcome_weights=s.outcome_weights,
        floor=s.meaning_floor,
    )[:10]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args, run = loaded_run(
        __doc__,
        argv,
        lambda ap: ap.add_argument("--depths", type=int, nargs="+", default=[25, 50, 75]),
    )
    texts = list(run.query_set[0])[: args.queries]
    rec = recorded(run, texts)
    s = run.settings
    top = max(s.outcome_weights.values())
    got: dict[str, Any] = {"queries": 0, "full_depth": s.candidate_depth, "depths": {}}
    counts = {d: {"bound_holds": 0, "same_page": 0} for d in args.depths}
    for q in rec.legs.values():
        legs = run.backend.search(replace(q, depth=s.candidate_depth))
        outcomes = {h.id: h.outcome for h in (*legs.text, *legs.vector)}
        full = page(legs, s.candidate_depth, s, outcomes)
        if not full:
            continue
        got["queries"] += 1
        last = full[-1].score
        for d in args.depths:
            bound = (s.text_weight + s.vector_weight) / (s.rrf_k + d + 1) * top
            short = page(legs, d, s, outcomes)
            counts[d]["bound_holds"] += len(full) == 10 and last > bound
            counts[d]["same_page"] += [r.id for r in short] == [r.id for r in full]
    for d, c in counts.items():
        got["depths"][str(d)] = {
            "bound": round((s.text_weight + s.vector_weight) / (s.rrf_k + d + 1) * top, 5),
            "bound_holds": round(c["bound_holds"] / max(got["queries"], 1), 3),
            "same_page_anyway": round(c["same_page"] / max(got["queries"], 1), 3),
        }
    return report("bench.depth_bound", args, argv, got)


if __name__ == "__main__":
    main()
