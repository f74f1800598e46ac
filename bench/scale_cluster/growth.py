"""The growth phase: p50/p99 growth from the smallest to the largest size in the results file,
and a projection to 10M items."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def growth(rows: Sequence[dict[str, Any]], kind: str, target: int = 10_000_000) -> dict[str, Any]:
    """p50/p99 at the largest size over the smallest, per phase and side (latest run of each),
    and a projection to `target` items: latency on the power law through those two sizes,
    load time at the largest load's rate, disk at the largest size's bytes per item."""
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for r in rows:
        if r.get("kind") != kind or "error" in r:
            continue
        if r.get("phase") in ("latency", "writes") and "sides" in r:
            latest[(r["phase"], r["n"])] = r
        elif r.get("phase") == "load" and r.get("items_per_s"):
            latest[("load", r["n"])] = r
        elif r.get("phase") == "resources":
            latest[("resources", r["n"])] = r
    out: dict[str, Any] = {}
    for phase in ("latency", "writes"):
        sizes = sorted(n for p, n in latest if p == phase)
        if len(sizes) < 2:
            continue
        (n0, small), (n1, large) = [(n, latest[(phase, n)]["sides"]) for n in (sizes[0], sizes[-1])]

        def project(v0: float, v1: float, n0: int = n0, n1: int = n1) -> float:
            return round(v1 * (target / n1) ** (np.log(v1 / v0) / np.log(n1 / n0)), 1)

        out[phase] = {"from": n0, "to": n1, "sides": {
            side: {
                "p50_growth": round(large[side]["p50_ms"] / s["p50_ms"], 2),
                "p99_growth": round(large[side]["p99_ms"] / s["p99_ms"], 2),
                f"p50_ms_projected_{target}": project(s["p50_ms"], large[side]["p50_ms"]),
                f"p99_ms_projected_{target}": project(s["p99_ms"], large[side]["p99_ms"]),
            } for side, s in small.items() if side in large}}  # fmt: skip
    if not out:
        return {"skipped": f"needs latency results of two sizes of {kind} in the results file"}
    if loads := sorted(n for p, n in latest if p == "load"):
        rate = latest[("load", loads[-1])]["items_per_s"]
        out[f"load_hours_projected_{target}"] = round(target / rate / 3600, 1)
    if res := sorted(n for p, n in latest if p == "resources"):
        per_m = latest[("resources", res[-1])]["total_bytes_per_million_items"]
        out[f"disk_gb_projected_{target}"] = round(per_m * target / 1e6 / 1e9, 1)
    return out
