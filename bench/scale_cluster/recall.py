"""The recall phase: filtered recall@10 of the vector leg as Suli sends it, against an exact
numpy top 10 over what each principal of bench.clustered.LEVELS may see."""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bench.clustered import BOARDS, LEVELS, WORKSPACE, visible_mask
from bench.overhead import raw_bodies, with_source
from bench.scale_cluster.size import SizeRun, say
from suli.models import Principal
from suli.visibility import visibility_for


def exact_topk(
    vectors: np.ndarray, qvecs: np.ndarray, masks: Mapping[str, np.ndarray], k: int = 10,
    chunk: int = 50_000,
) -> dict[str, np.ndarray]:  # fmt: skip
    """Row numbers of the k highest dot products per query among the rows each mask allows,
    best first (-1 where fewer than k rows are allowed). One pass over `vectors` (a memory
    map of unit vectors: dot = cosine) in chunks serves every mask."""
    nq = len(qvecs)
    q = np.asarray(qvecs, dtype=np.float32)
    best_s = {m: np.full((nq, k), -np.inf, dtype=np.float32) for m in masks}
    best_i = {m: np.full((nq, k), -1, dtype=np.int64) for m in masks}
    for start in range(0, len(vectors), chunk):
        block = np.asarray(vectors[start : start + chunk], dtype=np.float32)
        scores = q @ block.T
        for name, mask in masks.items():
            rows = np.nonzero(mask[start : start + len(block)])[0]
            if not len(rows):
                continue
            s = scores[:, rows]
            take = min(k, len(rows))
            part = np.argpartition(-s, take - 1, axis=1)[:, :take]
            all_s = np.concatenate([best_s[name], np.take_along_axis(s, part, 1)], axis=1)
            all_i = np.concatenate([best_i[name], rows[part] + start], axis=1)
            order = np.argsort(-all_s, axis=1, kind="stable")[:, :k]
            best_s[name] = np.take_along_axis(all_s, order, 1)
            best_i[name] = np.take_along_axis(all_i, order, 1)
    return best_i


def recall_at(got: Sequence[int], exact: np.ndarray) -> float:
    """Share of the exact top (its -1 padding dropped) found in got; 1.0 when nothing is visible."""
    want = {int(i) for i in exact if i >= 0}
    return len(want & set(got)) / len(want) if want else 1.0


def recall(run: SizeRun) -> dict[str, Any]:
    run.require_loaded()
    texts, qv = run.query_set
    depth = run.settings.candidate_depth
    boards = run.ds.boards()
    masks = {p: visible_mask(boards, p) for p in LEVELS}
    t0 = time.perf_counter()
    exact = exact_topk(run.ds.vectors, qv, masks, 10, run.args.chunk)
    exact_s = time.perf_counter() - t0
    acls = run.backend.acls(WORKSPACE)
    out: dict[str, Any] = {"k_sent": depth, "queries": len(texts),
                           "exact_seconds": round(exact_s, 1), "levels": {}}  # fmt: skip
    for p in LEVELS:
        vis = visibility_for(Principal(p, WORKSPACE), acls)
        scores: list[float] = []
        for s in range(0, len(texts), 20):
            lines: list[dict[str, Any]] = []
            for t, v in zip(texts[s : s + 20], qv[s : s + 20], strict=True):
                # which hits come back does not depend on the `_source` asked for
                body = with_source(raw_bodies(vis, t, v, depth)[1], ["id"])
                lines += [{"index": run.alias}, body]
            resp = run.client.msearch(body=lines, params={"request_timeout": 120})
            for j, r in enumerate(resp["responses"]):
                if "error" in r:
                    raise RuntimeError(f"vector leg failed: {r['error']}")
                ids = [h["_source"]["id"] for h in r["hits"]["hits"][:10]]
                got = [int(i[4:]) for i in ids if i[4:].isdigit()]
                scores.append(recall_at(got, exact[p][s + j]))
        out["levels"][p] = {
            "visible_share": LEVELS[p] / BOARDS, "visible_items": int(masks[p].sum()),
            "mean": round(statistics.fmean(scores), 4), "min": round(min(scores), 4),
        }  # fmt: skip
        say(f"  recall@10 {p}: {out['levels'][p]}")
    return out
