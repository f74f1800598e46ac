"""`python -m bench.quality --tune`: every relevance choice measured on NFCorpus dev, test once.

Stages, each a coordinate descent from the code's defaults (one parameter at a time over its
values, the others held, repeated until nothing moves; ties keep the current value):
  legs    per backend: the OpenSearch text-query form and title boost, BM25 k1/b (set on the
          closed index, no re-index) and the k-NN search's candidates (ef_search); the embedded
          store's title-only bm25() weight (FTS5 fixes k1/b; its vector search is exact)
  fusion  shared by both backends (one Settings): leg weights, candidate depth, the meaning
          margin; RRF k (DESIGN 3.3) and the meaning floor (bench.floor) are held and swept
The objective is hybrid nDCG@10 with the gates on (what users get), on dev qrels only; the text
stage adds the text leg's own nDCG@10 (it is served alone when the vector leg fails). After the
choice the test split is read once and both the code's defaults ("baseline") and the chosen
point are scored on it, with the top-10 overlap between the backends.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import mappings
from bench.nfcorpus import WORKSPACE, load_qrels, load_queries
from bench.text_forms import SHIPPED, TextForm, embedded_title_boost, opensearch_form
from suli.backends.base import Backend, LegQuery
from suli.embedding import Embedder
from suli.evaluation import mean_metrics
from suli.models import Filters, Principal
from suli.ranking import rank
from suli.settings import Settings
from suli.text import only_common_words
from suli.visibility import visibility_for

TUNE_SPLIT = "dev"
RESULTS = Path(__file__).parent / "results"

# Text-leg values per backend. OpenSearch forms: see bench.text_forms.TextForm.
OPENSEARCH_TEXT_GRID: dict[str, tuple[Any, ...]] = {
    "form": (
        TextForm("most_fields"),
        TextForm("cross_fields"),
        TextForm("content", 0.25),
        TextForm("content", 0.5),
        TextForm("content", 1.0),
    ),
    "bm25": ((0.9, 0.4), (1.2, 0.75), (1.2, 0.6), (0.9, 0.75)),
    # Candidates the HNSW search explores; 100 is the depth itself (the query before the knob).
    "ef_search": (100, 200, 400),
}
# OpenSearch parameters that change the vector leg, not the text leg (each leg is fetched again
# only when its own parameters change).
VECTOR_PARAMS = frozenset({"ef_search"})
# Embedded: the weight of the title-only bm25() added to the row's (sql.TITLE_BOOST; the
# columns stay 1, tags 2), as OpenSearch adds its title field to `content`. DESIGN 3.1 boosts
# the title, so neither grid has an unboosted title.
EMBEDDED_TEXT_GRID: dict[str, tuple[Any, ...]] = {
    "title_boost": (0.15, 0.25, 0.3, 0.5, 1.0),
}
# Fusion values, keyed by Settings field. A field Settings lacks (the meaning floor before its
# helper lands) is left out; adding one is one entry here and one in RANK_ARGS.
FUSION_GRID: dict[str, tuple[Any, ...]] = {
    "rrf_k": (5, 10, 20, 30, 40, 60, 80, 100),
    "vector_weight": (0.5, 0.6, 0.8, 1.0, 1.2, 1.5, 2.0),
    # Not past 100: a deeper leg costs latency (the text leg stays within 1.1x of its old form).
    "candidate_depth": (25, 50, 100),
    # Not past 0.3: NFCorpus is one topic, so a wide margin costs nothing there, but in a
    # small mixed workspace it keeps unrelated meaning-only items (tests/api's "kite" search).
    "meaning_margin": (0.05, 0.1, 0.15, 0.2, 0.3),
    "meaning_floor": (0.0, 0.1, 0.2, 0.3, 0.4),
}
# DESIGN 3.3 sets k = 60 by default: measured (a sweep at the chosen point), never chosen.
FIXED_BY_SPEC = {"rrf_k": 60}
# Held at the code's default and only swept, because another objective chose them: the meaning
# floor is calibrated so nonsense queries answer nothing (`python -m bench.floor`);
# dev nDCG@10 alone would always lower it (NFCorpus relevance never punishes a kept match).
FIXED_ELSEWHERE = ("meaning_floor",)
# Settings field -> keyword of suli.ranking.rank (candidate_depth cuts the legs instead).
RANK_ARGS = {
    "rrf_k": "k",
    "text_weight": "text_weight",
    "vector_weight": "vector_weight",
    "meaning_margin": "margin",
    "meaning_floor": "floor",
}
MAX_ROUNDS = 3
# A move must gain this much mean dev nDCG@10: smaller steps are noise on 324 queries and
# would only fit dev.
MIN_GAIN = 0.001
# A text-leg trial re-fetches every query (~2 min for dev on a loaded 2-core box): one pass,
# the form first, then k1/b at the chosen form.
TEXT_ROUNDS = 2
FETCH_THREADS = 2

Pairs = list[tuple[str, float]]
Legs = dict[str, tuple[Pairs, Pairs]]


class TestSplitRefused(ValueError):
    """Tuning was asked to read the test split."""


def refuse_test(split: str) -> None:
    if split != TUNE_SPLIT:
        raise TestSplitRefused(
            f"tuning reads the {TUNE_SPLIT} split only, not {split!r}: test is scored once, "
            "after the choice"
        )


def fusion_grid() -> dict[str, tuple[Any, ...]]:
    """FUSION_GRID restricted to what Settings and rank() both know."""
    known = set(inspect.signature(rank).parameters)
    return {
        name: values
        for name, values in FUSION_GRID.items()
        if name in Settings.model_fields and (name not in RANK_ARGS or RANK_ARGS[name] in known)
    }


def fusion_defaults(s: Settings) -> dict[str, Any]:
    return {"text_weight": s.text_weight, **{n: getattr(s, n) for n in fusion_grid()}}


def descend(
    start: Mapping[str, Any],
    grid: Mapping[str, Iterable[Any]],
    score: Callable[[dict[str, Any]], float],
    log: list[dict[str, Any]],
    rounds: int = MAX_ROUNDS,
) -> tuple[dict[str, Any], float]:
    """Coordinate descent: each parameter over its values, the others held, until stable."""
    point = dict(start)
    best = score(point)
    log.append({"point": point, "score": best})
    for _ in range(rounds):
        moved = False
        for name, values in grid.items():
            for v in values:
                if v == point[name]:
                    continue
                trial = {**point, name: v}
                s = score(trial)
                log.append({"point": trial, "score": s})
                if s >= best + MIN_GAIN:  # ties and noise keep the current value
                    point, best, moved = trial, s, True
        if not moved:
            break
    return point, best


def _jsonable(v: Any) -> Any:
    if isinstance(v, TextForm):
        return asdict(v)
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


# ---- legs -----------------------------------------------------------------------------------


@dataclass
class Subject:
    """One backend under tuning: how to fetch its legs at a point of its text parameters
    (`apply(p)`: a block inside which the backend answers as p says)."""

    name: str
    backend: Backend
    grid: dict[str, tuple[Any, ...]]
    apply: Callable[[dict[str, Any]], AbstractContextManager[None]]
    defaults: dict[str, Any]

    def keys(self, p: Mapping[str, Any]) -> tuple[str, str]:
        """Cache keys of the text leg and of the vector leg fetched at point p."""
        text = {n: v for n, v in p.items() if n not in VECTOR_PARAMS}
        vector = {n: v for n, v in p.items() if n in VECTOR_PARAMS}
        return (
            f"{self.name}:text:{json.dumps(_jsonable(text), sort_keys=True)}",
            f"{self.name}:vector:{json.dumps(_jsonable(vector), sort_keys=True)}",
        )


def _query(text: str, vec: list[float] | None, depth: int, with_text: bool = True) -> LegQuery:
    vis = visibility_for(Principal("prn_bench", WORKSPACE), [])
    fields = "plain" if only_common_words(text) else "stemmed"
    return LegQuery(vis, Filters(), text if with_text else None, vec, depth, fields)


def fetch_text(backend: Backend, queries: Mapping[str, str], depth: int) -> dict[str, Pairs]:
    def one(text: str) -> Pairs:
        legs = backend.search(_query(text, None, depth))
        assert not legs.errors, legs.errors
        return [(h.id, h.score) for h in legs.text]

    with ThreadPoolExecutor(FETCH_THREADS) as pool:
        return dict(zip(queries, pool.map(one, queries.values()), strict=True))


def fetch_vectors(
    backend: Backend, qvecs: Mapping[str, list[float]], queries: Mapping[str, str], depth: int
) -> dict[str, Pairs]:
    def one(qid: str) -> Pairs:
        legs = backend.search(_query(queries[qid], qvecs[qid], depth, with_text=False))
        assert not legs.errors, legs.errors
        return [(h.id, h.score) for h in legs.vector]

    with ThreadPoolExecutor(FETCH_THREADS) as pool:
        return dict(zip(queries, pool.map(one, queries), strict=True))


def hybrid_runs(legs: Legs, p: Mapping[str, Any], gates: bool = True) -> dict[str, list[str]]:
    depth = p.get("candidate_depth", 100)
    kw = {RANK_ARGS[n]: v for n, v in p.items() if n in RANK_ARGS}
    return {
        qid: [
            r.id for r in rank(text[:depth], vec[:depth], {}, outcome_weights={}, gates=gates, **kw)
        ]
        for qid, (text, vec) in legs.items()
    }


def ndcg(runs: Mapping[str, list[str]], qrels: Mapping[str, Mapping[str, int]]) -> float:
    return mean_metrics(runs, qrels)["ndcg@10"]


def figures(legs: Legs, qrels: Mapping[str, Mapping[str, int]], p: Mapping[str, Any]) -> dict:
    depth = p.get("candidate_depth", 100)
    text = {q: [d for d, _ in t[:depth]] for q, (t, _) in legs.items()}
    vec = {q: [d for d, _ in v[:depth]] for q, (_, v) in legs.items()}
    on = mean_metrics(hybrid_runs(legs, p), qrels)
    off = mean_metrics(hybrid_runs(legs, p, gates=False), qrels)
    r = {
        "text": mean_metrics(text, qrels),
        "vector": mean_metrics(vec, qrels),
        "hybrid_no_gates": off,
        "hybrid": on,
        "gates_cost_ndcg@10": off["ndcg@10"] - on["ndcg@10"],
    }
    return {k: ({m: round(x, 4) for m, x in v.items()} if isinstance(v, dict) else round(v, 4))
            for k, v in r.items()}  # fmt: skip


def overlap(a: Mapping[str, list[str]], b: Mapping[str, list[str]]) -> float:
    shares = [len(set(a[q][:10]) & set(b[q][:10])) / max(1, min(10, len(a[q]))) for q in a]
    return round(sum(shares) / max(1, len(shares)), 4)


def choose_fusion(
    dev_legs: Mapping[str, Legs],
    qrels: Mapping[str, Mapping[str, int]],
    grid: Mapping[str, tuple[Any, ...]],
    start: Mapping[str, Any],
) -> tuple[dict[str, Any], float, list[dict[str, Any]]]:
    """The fusion point shared by both backends (mean dev hybrid nDCG@10 over them), the fixed
    values held and then swept alone, for the record."""

    def score(p: dict[str, Any]) -> float:
        return sum(ndcg(hybrid_runs(legs, p), qrels) for legs in dev_legs.values()) / len(dev_legs)

    fixed = {**FIXED_BY_SPEC, **{n: start[n] for n in FIXED_ELSEWHERE if n in start}}
    raw: list[dict[str, Any]] = []
    free = {n: v for n, v in grid.items() if n not in fixed}
    point, best = descend({**start, **fixed}, free, score, raw)
    for name in fixed:  # what the fixed value costs on dev, for the record
        for v in grid.get(name, ()):
            if v != point[name]:
                trial = {**point, name: v}
                raw.append({"point": trial, "score": score(trial), "sweep": name})
    return point, best, raw


# ---- the run --------------------------------------------------------------------------------


def tune(
    subjects: list[Subject],
    embedder: Embedder,
    settings: Settings,
    *,
    split: str = TUNE_SPLIT,
    limit_queries: int | None = None,
    out_dir: Path = RESULTS,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Tune on `split` (dev only), write the grid and the choice, then score test once."""
    refuse_test(split)
    grid_fusion = fusion_grid()
    fetch_depth = max(grid_fusion.get("candidate_depth", (settings.candidate_depth,)))

    def load(which: str) -> tuple[dict[str, dict[str, int]], dict[str, str]]:
        qrels = load_qrels(which)
        queries = load_queries(set(qrels))
        if limit_queries:
            queries = dict(list(queries.items())[:limit_queries])
            qrels = {q: qrels[q] for q in queries}
        return qrels, queries

    qrels, queries = load(split)
    qvecs = {q: [float(x) for x in embedder.embed_query(t)] for q, t in queries.items()}
    fusion_start = fusion_defaults(settings)
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "tuned_on": split,
        "queries": len(queries),
        "grids": {
            "fusion": _jsonable(grid_fusion),
            **{s.name: _jsonable(s.grid) for s in subjects},
        },
        "baseline": {"fusion": fusion_start, **{s.name: _jsonable(s.defaults) for s in subjects}},
        "trials": {},
    }

    # Stage 1: each backend's leg parameters, with the default fusion.
    chosen_text: dict[str, dict[str, Any]] = {}
    cache: dict[str, dict[str, Pairs]] = {}  # legs by Subject.keys

    def fetched(s: Subject, p: dict[str, Any]) -> Legs:
        """Both legs of every dev query at point p (each fetched once per its own parameters)."""
        tkey, vkey = s.keys(p)
        if tkey not in cache or vkey not in cache:
            t0 = time.perf_counter()
            with s.apply(p):
                if vkey not in cache:
                    cache[vkey] = fetch_vectors(s.backend, qvecs, queries, fetch_depth)
                if tkey not in cache:
                    cache[tkey] = fetch_text(s.backend, queries, fetch_depth)
                    log(f"  {s.name} {_jsonable(p)} fetched in {time.perf_counter() - t0:.0f}s")
        return {q: (cache[tkey][q], cache[vkey][q]) for q in queries}

    for s in subjects:
        trials: list[dict[str, Any]] = []

        def score_text(p: dict[str, Any], s: Subject = s, trials: list = trials) -> float:
            legs = fetched(s, p)
            text = {q: t for q, (t, _) in legs.items()}
            trials.append(
                {
                    "text_ndcg@10": round(
                        ndcg({q: [d for d, _ in t] for q, t in text.items()}, qrels), 4
                    ),
                    "vector_ndcg@10": round(
                        ndcg({q: [d for d, _ in v] for q, (_, v) in legs.items()}, qrels), 4
                    ),
                }
            )
            # The text leg is also served alone (a failed or slow vector leg), so it counts too.
            alone = ndcg({q: [d for d, _ in t] for q, t in text.items()}, qrels)
            return ndcg(hybrid_runs(legs, fusion_start), qrels) + alone

        log(f"{s.name}: text leg on {split}")
        raw: list[dict[str, Any]] = []
        point, best = descend(s.defaults, s.grid, score_text, raw, TEXT_ROUNDS)
        chosen_text[s.name] = point
        report["trials"][s.name] = [
            {**_jsonable(r["point"]), "hybrid+text_ndcg@10": round(r["score"], 4), **t}
            for r, t in zip(raw, trials, strict=True)
        ]
        log(f"{s.name}: chose {_jsonable(point)} (dev hybrid {best:.4f})")

    # Stage 2: fusion shared by both backends, on the chosen text legs; mean over backends.
    dev_legs = {s.name: fetched(s, chosen_text[s.name]) for s in subjects}

    fusion, best, raw = choose_fusion(dev_legs, qrels, grid_fusion, fusion_start)
    report["trials"]["fusion"] = [
        {**r["point"], "mean_hybrid_ndcg@10": round(r["score"], 4)}
        | ({"sweep": r["sweep"]} if "sweep" in r else {})
        for r in raw
    ]
    report["chosen"] = {"fusion": fusion, **{n: _jsonable(p) for n, p in chosen_text.items()}}
    report["dev"] = {}
    for s in subjects:
        base = fetched(s, s.defaults)
        report["dev"][s.name] = {
            "baseline": figures(base, qrels, fusion_start),
            "chosen": figures(dev_legs[s.name], qrels, fusion),
        }
    log(f"fusion: chose {fusion} (mean dev hybrid {best:.4f})")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tuning-grid.json").write_text(json.dumps(report, indent=1) + "\n")

    # The choice is written; now, and only now, the test split.
    test_qrels, test_queries = load("test")
    tvecs = {q: [float(x) for x in embedder.embed_query(t)] for q, t in test_queries.items()}
    test: dict[str, Any] = {}
    hybrid_top: dict[str, dict[str, list[str]]] = {}
    for s in subjects:
        test[s.name] = {}
        for label, text_p, fusion_p in (
            ("baseline", s.defaults, fusion_start),
            ("chosen", chosen_text[s.name], fusion),
        ):
            with s.apply(text_p):
                text = fetch_text(s.backend, test_queries, fetch_depth)
                vec = fetch_vectors(s.backend, tvecs, test_queries, fetch_depth)
            legs = {q: (text[q], vec[q]) for q in test_queries}
            test[s.name][label] = figures(legs, test_qrels, fusion_p)
            hybrid_top[f"{s.name}:{label}"] = hybrid_runs(legs, fusion_p)
    if len(subjects) == 2:
        a, b = (s.name for s in subjects)
        test["top10_overlap"] = {
            label: overlap(hybrid_top[f"{a}:{label}"], hybrid_top[f"{b}:{label}"])
            for label in ("baseline", "chosen")
        }
    report["test"] = test
    (out_dir / "tuning-grid.json").write_text(json.dumps(report, indent=1) + "\n")
    summary = {
        k: report[k] for k in ("date", "tuned_on", "queries", "baseline", "chosen", "dev", "test")
    }
    (out_dir / "tuning.json").write_text(json.dumps(summary, indent=1) + "\n")
    return report


# ---- the backends -----------------------------------------------------------------------------


def _similarity(client: Any, index: str) -> tuple[float, float]:
    got = client.indices.get_settings(index=index)[index]["settings"]["index"]["similarity"]
    return float(got["default"]["k1"]), float(got["default"]["b"])


def mapping_bm25() -> tuple[float, float]:
    """k1 and b of mappings/items.json: the code's default, whatever the bench index holds now."""
    sim = mappings.items_index(1)["settings"]["index"]["similarity"]["default"]
    return float(sim["k1"]), float(sim["b"])


def opensearch_subject(backend: Any) -> Subject:
    """The OpenSearch backend; k1/b are set on the closed index (norms do not depend on them)
    and ef_search in its settings, both left as the last point set them; the text form holds
    inside the block only (bench.text_forms)."""
    from indexer.inventory import live_index

    client = backend.client
    index = live_index(client, backend.alias)
    assert index, f"no index behind {backend.alias}"

    @contextmanager
    def apply(p: dict[str, Any]) -> Iterator[None]:
        if backend.settings.ef_search != p["ef_search"]:
            backend.settings = backend.settings.model_copy(update={"ef_search": p["ef_search"]})
        k1, b = p["bm25"]
        if _similarity(client, index) != (k1, b):
            client.indices.close(index=index)
            try:
                client.indices.put_settings(
                    index=index,
                    body={"index": {"similarity": {"default": {"type": "BM25", "k1": k1, "b": b}}}},
                )
            finally:
                client.indices.open(index=index, wait_for_active_shards=1)
                client.cluster.health(index=index, wait_for_status="yellow", request_timeout=60)
        with opensearch_form(p["form"]):
            yield

    return Subject(
        "opensearch",
        backend,
        OPENSEARCH_TEXT_GRID,
        apply,
        {
            "form": SHIPPED,
            "bm25": mapping_bm25(),
            "ef_search": backend.settings.ef_search,
        },
    )


def embedded_subject(backend: Any) -> Subject:
    """The embedded store; FTS5's bm25() takes column weights, its k1/b are fixed."""
    from suli.backends.embedded import sql as embedded_sql

    def apply(p: dict[str, Any]) -> AbstractContextManager[None]:
        return embedded_title_boost(p["title_boost"])

    return Subject(
        "embedded",
        backend,
        EMBEDDED_TEXT_GRID,
        apply,
        {"title_boost": embedded_sql.TITLE_BOOST},
    )
