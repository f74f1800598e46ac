"""The settle phase: wait, without force-merge, until the index runs no merge for a while."""

from __future__ import annotations

import time
from typing import Any

from bench.scale_cluster.size import SizeRun, say, segment_summary


def settle(run: SizeRun) -> dict[str, Any]:
    run.require_loaded()
    a, client = run.args, run.client
    t0 = time.perf_counter()
    quiet_since: float | None = None
    timed_out = False
    while True:
        st = client.indices.stats(index=run.alias, metric="merge")["_all"]["total"]
        now = time.perf_counter()
        if st["merges"]["current"] == 0:
            quiet_since = quiet_since or now
            if now - quiet_since >= a.settle_quiet:
                break
        else:
            quiet_since = None
            say(f"  {st['merges']['current']} merges running")
        if now - t0 > a.settle_timeout:
            timed_out = True
            break
        time.sleep(max(0.2, min(5.0, a.settle_quiet / 10)))
    return {
        "waited_s": round(time.perf_counter() - t0, 1), "quiet_s": a.settle_quiet,
        "timed_out": timed_out, "merges_total": st["merges"]["total"],
        "merge_time_s": round(st["merges"]["total_time_in_millis"] / 1000, 1),
        "segments": segment_summary(client, run.alias),
    }  # fmt: skip
