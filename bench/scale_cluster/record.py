"""The results file: one JSON line per phase, to stdout and appended to `--out`."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.scale_cluster.size import say


class Recorder:
    """One JSON line per phase: to stdout and appended to the results file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []
        path.parent.mkdir(parents=True, exist_ok=True)

    def run(self, phase: str, n: int | None, kind: str, fn: Callable[[], dict[str, Any]],
            fatal: bool = False) -> dict[str, Any]:  # fmt: skip
        row: dict[str, Any] = {
            "phase": phase, "n": n, "kind": kind,
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "cores": os.cpu_count(),
            "load_avg_start": [round(x, 2) for x in os.getloadavg()],
        }  # fmt: skip
        say(f"phase {phase} n={n} kind={kind}")
        t0 = time.perf_counter()
        try:
            row.update(fn())
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            row["error"] = f"{type(e).__name__}: {e}"
        row["seconds"] = round(time.perf_counter() - t0, 1)
        row["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
        line = json.dumps(row)
        print(line, flush=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
        self.rows.append(row)
        if fatal and "error" in row:
            raise SystemExit(f"phase {phase} failed: {row['error']}")
        return row


def previous_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            with contextlib.suppress(json.JSONDecodeError):
                rows.append(json.loads(line))
    return rows
