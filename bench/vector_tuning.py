"""Vector search tuning: HNSW build parameters, the sq encoder and ef_search, measured on one node.

    python -m bench.vector_tuning --url http://127.0.0.1:9200 --n 100000 --out bench/results/vt.json
    python -m bench.vector_tuning --n 10000 --configs m16-efc128-f32 m16-efc128-sq \\
        --searches k100 ef200 --queries 50

Data: `bench.clustered.generate(n)` (clustered near real MiniLM vectors; `--kind uniform` for
random unit vectors), its exact visibility levels (bench.clustered.LEVELS: 30 / 10 / 1 / 0.1 %
of the items) and real NFCorpus questions as queries.

Per index config (`m<M>-efc<EFC>-<f32|sq>`) an index is built through Suli's own index creation
(OpenSearchBackend with the SULI_HNSW_* settings) behind the alias `<prefix>-<data set>-<config>`;
an alias that already holds n items is reused, so an interrupted run resumes where it stopped.
Per search (`k<K>`: k raised to K; `ef<N>`: k = candidate depth plus method_parameters.ef_search
N) the vector leg is sent as Suli builds it (`size` = candidate depth, visibility inside the
k-NN clause) and its top 10 compared with a numpy brute force over exactly the visible items.

Every (config, search) pair is asked each query in turn, in a rotating order, so load drifts
hit all pairs alike. Reported per pair: recall@10 mean and minimum per level, the node's `took`
and the client's wall time p50/p99; per config: build seconds, store bytes and segments. A pair
is kept only if its mean recall@10 is >= 0.98 at every level (the recall goal). JSON goes to stdout
(one line per pair) and --out (the whole report); progress to stderr. `--shards N` builds every
index with N primaries, `--merge` force-merges each to one segment (a live index never is),
`--drop` deletes this run's indices afterwards.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from opensearchpy import OpenSearch, helpers

from bench import clustered
from suli.backends import keys
from suli.backends import opensearch_bodies as bodies
from suli.backends.base import LegQuery
from suli.backends.opensearch import OpenSearchBackend
from suli.hnsw import Hnsw
from suli.models import Filters, Item
from suli.settings import Settings
from suli.visibility import Visibility

K = 10
RULE = 0.98  # the recall goal: a choice is kept only if mean recall@10 >= this at every level
DEPTH = Settings().candidate_depth
DEFAULT_CONFIGS = [
    "m16-efc128-f32",  # today's mapping (items.json)
    "m16-efc128-sq",
    "m8-efc128-f32",
    "m32-efc128-f32",
    "m16-efc64-f32",
    "m16-efc200-f32",
]
DEFAULT_SEARCHES = [f"k{DEPTH}", "ef200", "ef400", "k200", "k400"]
LEVEL_LABELS = {"prn_v30": "30%", "prn_v10": "10%", "prn_v1": "1%", "prn_v01": "0.1%"}
BULK_CHUNK = 500


@dataclass(frozen=True)
class Search:
    """How the k-NN clause asks: k, and ef_search when set (None: not sent)."""

    name: str
    k: int
    ef_search: int | None

    @classmethod
    def parse(cls, spec: str) -> Search:
        m = re.fullmatch(r"(k|ef)([0-9]+)", spec)
        if not m:
            raise SystemExit(f"--searches: {spec!r} is not k<K> or ef<N>")
        n = int(m.group(2))
        return cls(spec, n, None) if m.group(1) == "k" else cls(spec, DEPTH, n)

    def body(self, vis: Visibility, vector: np.ndarray) -> dict[str, Any]:
        """Suli's own vector leg; only k differs when it is raised."""
        leg = LegQuery(vis, Filters(), None, [float(x) for x in vector], DEPTH)
        body = bodies.vector_leg(leg, self.ef_search)
        body["query"]["knn"]["vector"]["k"] = self.k
        return body


def parse_config(spec: str) -> Hnsw:
    m = re.fullmatch(r"m([0-9]+)-efc([0-9]+)-(f32|sq)", spec)
    if not m:
        raise SystemExit(f"--configs: {spec!r} is not m<M>-efc<EFC>-<f32|sq>")
    return Hnsw(int(m.group(1)), int(m.group(2)), "sq" if m.group(3) == "sq" else "float32")


def recall_at(got: Sequence[str], exact: Sequence[str], k: int = K) -> float:
    """Share of the exact top k found in the first k answers (1.0 when nothing is visible)."""
    want = set(exact[:k])
    return len(set(got[:k]) & want) / len(want) if want else 1.0


def exact_top(vectors: np.ndarray, ids: np.ndarray, query: np.ndarray, k: int = K) -> list[str]:
    """The k nearest by cosine (vectors are unit length: the dot product orders alike)."""
    if len(ids) == 0:
        return []
    scores = vectors @ query
    top = (
        np.argpartition(-scores, min(k, len(ids)) - 1)[:k] if len(ids) > k else np.arange(len(ids))
    )
    return [str(ids[i]) for i in top[np.argsort(-scores[top], kind="stable")]]


def visibility(principal: str) -> Visibility:
    boards = frozenset(f"brd_{b}" for b in range(clustered.LEVELS[principal]))
    return Visibility(clustered.WORKSPACE, principal, boards)


def pct(values: Sequence[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 2)


def loadavg() -> float:
    """The machine's 1-minute load (other work skews latencies: reported with them)."""
    return round(float(Path("/proc/loadavg").read_text().split()[0]), 2)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---- building ------------------------------------------------------------------------


def backend_for(url: str, alias: str, hnsw: Hnsw, shards: int = 1) -> OpenSearchBackend:
    settings = Settings(
        opensearch_url=url,
        shards=shards,
        index_alias=alias,
        acl_index=f"{alias}-acl",
        hnsw_m=hnsw.m,
        hnsw_ef_construction=hnsw.ef_construction,
        vector_encoder=hnsw.encoder,  # type: ignore[arg-type]
        opensearch_timeout_s=120,
    )
    return OpenSearchBackend(settings, clustered.DIM, clustered.MODEL)


def store_facts(client: OpenSearch, alias: str) -> dict[str, Any]:
    stats = client.indices.stats(index=alias, metric="store,docs,segments")["_all"]["primaries"]
    return {
        "docs": stats["docs"]["count"],
        "store_bytes": stats["store"]["size_in_bytes"],
        "segments": stats["segments"]["count"],
    }


def build(
    url: str, alias: str, hnsw: Hnsw, data: clustered.DataSet, merge: bool, shards: int = 1
) -> dict[str, Any]:
    """The index for one config: reused when its alias holds n items, else (re)built."""
    backend = backend_for(url, alias, hnsw, shards)
    client = backend.client
    if client.indices.exists_alias(name=alias):
        client.indices.refresh(index=alias)
        have = client.count(index=alias)["count"]
        built = Hnsw.of_mapping(
            next(iter(client.indices.get_mapping(index=alias).values()))["mappings"]["properties"][
                "vector"
            ]
        )
        if have == data.n and built == hnsw:
            log(f"[{alias}] reused ({have} items)")
            return {"reused": True, "build_s": None, **store_facts(client, alias)}
        log(f"[{alias}] holds {have} items of {data.n}: rebuilding")
        client.indices.delete(index=",".join(client.indices.get_alias(name=alias)))
    backend.ensure_ready()
    index = backend.current_index()
    assert index is not None
    # As `suli reindex` loads: no refresh while bulk loading, then the product's interval.
    client.indices.put_settings(index=index, body={"index": {"refresh_interval": "-1"}})
    vectors = data.vectors
    t0 = time.perf_counter()

    def actions() -> Any:
        for i, line in enumerate(data.items()):
            item = Item(**line)
            yield {
                "_index": index,
                "_id": keys.key(item.workspace, item.id),
                "_source": bodies.item_to_doc(item, vectors[i]),
            }
            if (i + 1) % 10_000 == 0:
                log(f"[{alias}] {i + 1}/{data.n} sent")

    _, errors = helpers.bulk(
        backend.write_client, actions(), chunk_size=BULK_CHUNK, request_timeout=300,
        raise_on_error=False, max_retries=8,
    )  # fmt: skip
    if errors:
        raise SystemExit(f"[{alias}] bulk errors: {errors[:3]}")
    client.indices.put_settings(index=index, body={"index": {"refresh_interval": "1s"}})
    client.indices.refresh(index=index, request_timeout=600)
    if merge:
        client.indices.forcemerge(index=index, max_num_segments=1, request_timeout=3600)
    secs = time.perf_counter() - t0
    log(f"[{alias}] built in {secs:.1f} s")
    backend.close()
    return {"reused": False, "build_s": round(secs, 2), **store_facts(client, alias)}


# ---- measuring -----------------------------------------------------------------------


def measure(
    client: OpenSearch,
    pairs: list[tuple[str, str, Search]],  # (config name, alias, search)
    data: clustered.DataSet,
    qvecs: np.ndarray,
    warmup: int,
) -> dict[tuple[str, str], dict[str, Any]]:
    """Recall per level and latency of every pair, the pairs interleaved query by query."""
    vectors = np.asarray(data.vectors)
    ids = np.array([f"itm_{i:07d}" for i in range(data.n)])
    boards = data.boards()
    rec: dict[tuple[str, str], dict[str, list[float]]] = {
        (c, s.name): {"took": [], "wall": [], **{lab: [] for lab in LEVEL_LABELS.values()}}
        for c, _, s in pairs
    }
    visible: dict[str, int] = {}
    turn = 0
    for principal, label in LEVEL_LABELS.items():
        mask = clustered.visible_mask(boards, principal)
        visible[label] = int(mask.sum())
        vis_vecs, vis_ids, vis = vectors[mask], ids[mask], visibility(principal)
        for qi, q in enumerate(qvecs):
            exact = exact_top(vis_vecs, vis_ids, q)
            for j in range(len(pairs)):  # rotate who goes first
                config, alias, search = pairs[(turn + j) % len(pairs)]
                t0 = time.perf_counter()
                r = client.search(index=alias, body=search.body(vis, q), request_timeout=120)
                wall = (time.perf_counter() - t0) * 1000
                got = [h["fields"]["id"][0] for h in r["hits"]["hits"]]  # the item id
                row = rec[(config, search.name)]
                row[label].append(recall_at(got, exact))
                if qi >= warmup or principal != "prn_v30":  # first queries warm the caches
                    row["took"].append(float(r["took"]))
                    row["wall"].append(wall)
            turn += 1
            if (qi + 1) % 50 == 0:
                log(f"  {label}: {qi + 1}/{len(qvecs)} queries x {len(pairs)} pairs")
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for key, row in rec.items():
        levels = {
            lab: {
                "visible_items": visible[lab],
                "recall@10_mean": round(float(np.mean(row[lab])), 4),
                "recall@10_min": round(float(np.min(row[lab])), 3),
            }
            for lab in LEVEL_LABELS.values()
        }
        out[key] = {
            "levels": levels,
            "kept": all(v["recall@10_mean"] >= RULE for v in levels.values()),
            "worst_mean": min(v["recall@10_mean"] for v in levels.values()),
            "took_ms": {"p50": pct(row["took"], 50), "p99": pct(row["took"], 99)},
            "wall_ms": {"p50": pct(row["wall"], 50), "p99": pct(row["wall"], 99)},
            "latency_samples": len(row["wall"]),
        }
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--url", default="http://127.0.0.1:9200")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--kind", choices=["clustered", "uniform"], default="clustered")
    ap.add_argument("--root", type=Path, default=clustered.CACHE_DIR, help="data set cache")
    ap.add_argument("--centres", type=int, default=3000, help="real vectors the data clusters on")
    ap.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS)
    ap.add_argument("--searches", nargs="+", default=DEFAULT_SEARCHES)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10, help="queries left out of the latencies")
    ap.add_argument("--prefix", default="bench-vt")
    ap.add_argument("--shards", type=int, default=1, help="primary shards of every index")
    ap.add_argument("--merge", action="store_true", help="force-merge each index to 1 segment")
    ap.add_argument("--drop", action="store_true", help="delete this run's indices afterwards")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)

    configs = {c: parse_config(c) for c in args.configs}
    searches = [Search.parse(s) for s in args.searches]
    data = clustered.generate(args.n, args.kind, n_centres=args.centres, root=args.root)
    log(f"data: {data.path}")
    _, qvecs = clustered.queries(args.queries)
    client = OpenSearch(args.url, timeout=120)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    # Named for the data set (kind, n, seed, centres) and the config: a rerun reuses it.
    extra = ("-merged" if args.merge else "") + (f"-sh{args.shards}" if args.shards != 1 else "")
    aliases = {c: f"{args.prefix}-{data.path.name}-{c}{extra}" for c in configs}
    load_before = loadavg()
    built = {
        c: build(args.url, aliases[c], h, data, args.merge, args.shards) for c, h in configs.items()
    }
    pairs = [(c, aliases[c], s) for c in configs for s in searches]
    try:
        measured = measure(client, pairs, data, qvecs, args.warmup)
    finally:
        if args.drop:
            for alias in aliases.values():
                names = list(client.indices.get_alias(name=alias))
                client.indices.delete(index=",".join([*names, f"{alias}-acl"]))
    rows = []
    for c, hnsw in configs.items():
        for s in searches:
            rows.append(
                {
                    "config": c,
                    "hnsw": {
                        "m": hnsw.m,
                        "ef_construction": hnsw.ef_construction,
                        "encoder": hnsw.encoder,
                    },
                    "search": {"name": s.name, "k": s.k, "ef_search": s.ef_search, "size": DEPTH},
                    "index": {"alias": aliases[c], **built[c]},
                    **measured[(c, s.name)],
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    report = {
        "date": started,
        "url": args.url,
        "kind": args.kind,
        "n": args.n,
        "queries": len(qvecs),
        "candidate_depth": DEPTH,
        "merged": args.merge,
        "shards": args.shards,
        "rule": f"kept: mean recall@10 >= {RULE} at every level",
        "load_1m": {"start": load_before, "end": loadavg()},
        "results": rows,
    }
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
