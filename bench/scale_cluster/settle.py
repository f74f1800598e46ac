"""The settle phase: wait, without force-merge, until the index runs no merge for a while."""

from __future__ import annotations

import time
from typing import Any

from bench.scale_cluster.size import SizeRun, say, segment_summary


def wait_no_merges(client: Any, alias: str, quiet: float, timeout: float
                   ) -> tuple[dict[str, Any], float, bool]:  # fmt: skip
    """Wait until the index has run no merge for `quiet` seconds (or `timeout` passed):
    (its last merge stats, seconds waited, whether it timed out)."""
    t0 = time.perf_counter()
    quiet_since: float | None = None
    while True:
        st = client.indices.stats(index=alias, metric="merge")["_all"]["total"]["merges"]
        now = time.perf_counter()
        if st["current"] == 0:
            quiet_since = quiet_since or now
            if now - quiet_since >= quiet:
                return st, round(now - t0, 1), False
        else:
            quiet_since = None
            say(f"  {st['current']} merges running, {st['total']} done")
        if now - t0 > timeout:
            return st, round(now - t0, 1), True
        time.sleep(max(0.2, min(5.0, quiet / 10)))


def settle(run: SizeRun) -> dict[str, Any]:
    run.require_loaded()
    a, client = run.args, run.client
    st, waited, timed_out = wait_no_merges(client, run.alias, a.settle_quiet, a.settle_timeout)
    return {
        "waited_s": waited, "quiet_s": a.settle_quiet,
        "timed_out": timed_out, "merges_total": st["total"],
        "merge_time_s": round(st["total_time_in_millis"] / 1000, 1),
        "segments": segment_summary(client, run.alias),
    }  # fmt: skip
