"""The writes phase: the latency phase again while another process feeds new items through
the indexer at `--write-rate` a second; those items are deleted afterwards."""

from __future__ import annotations

import itertools
import json
import multiprocessing as mp
import os
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from bench.clustered import DIM, MODEL, DataSet, unit
from bench.overhead import LookupEmbedder
from bench.scale_cluster.latency import timed
from bench.scale_cluster.size import WRITTEN_PREFIX, SizeRun, delete_written, say
from suli.backends.opensearch import OpenSearchBackend
from suli.settings import Settings


def writer_main(spec: dict[str, Any], stop: Any, out: Any) -> None:
    """Feed `rate` new items a second through the indexer (index_stream over a real pipe, as
    `suli index -` reads one) until `stop` is set; put totals on `out`."""
    try:
        from indexer.pipeline import index_stream

        settings = Settings(opensearch_url=spec["url"], index_alias=spec["alias"],
                            acl_index=f"{spec['alias']}-acl")  # fmt: skip
        backend = OpenSearchBackend(settings, DIM, MODEL)
        ds = DataSet(Path(spec["path"]), spec["n"])
        vectors = ds.vectors
        templates = list(itertools.islice(ds.items(), 2000))
        rng = np.random.default_rng(spec["seed"])
        rate = spec["rate"]
        sent = [0]
        rfd, wfd = os.pipe()

        def feed() -> None:
            with os.fdopen(wfd, "wb") as w:
                due = time.monotonic()
                # Also stop when the bench is gone (killed): never feed the index unattended.
                while not stop.is_set() and os.getppid() == spec["parent"]:
                    rows = []
                    for _ in range(rate):
                        j = int(rng.integers(len(templates)))
                        noise = rng.standard_normal(DIM).astype(np.float32) * 0.02
                        vec = unit(np.asarray(vectors[j], dtype=np.float32) + noise)
                        line = {**templates[j], "id": f"{WRITTEN_PREFIX}{sent[0]:07d}",
                                "vector": [round(float(x), 6) for x in vec],
                                "vector_model": MODEL}  # fmt: skip
                        rows.append(json.dumps(line) + "\n")
                        sent[0] += 1
                    w.write("".join(rows).encode())
                    w.flush()
                    due += 1.0
                    time.sleep(max(0.0, due - time.monotonic()))

        out.put({"ready": True})
        t0 = time.monotonic()
        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        with os.fdopen(rfd, "rb") as r:
            # One second's lines per batch and per write: the CLI's sizes (64 / 500) would
            # hold a 20 items/s pipe's items for 25 s before writing them.
            summary = index_stream(r, backend, LookupEmbedder({}, MODEL),
                                   batch_size=rate, write_size=rate)  # fmt: skip
        secs = time.monotonic() - t0
        feeder.join()
        out.put({
            "sent": sent[0], "indexed": summary.indexed, "rejected": len(summary.rejected),
            "rejections": [r.reason for r in summary.rejected[:3]], "retried": summary.retried,
            "stopped": summary.stopped, "seconds": round(secs, 1),
        })  # fmt: skip
    except BaseException as e:  # reported to the bench, which records it as a failure
        out.put({"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()})


def writes(run: SizeRun) -> dict[str, Any]:
    run.require_loaded()
    a = run.args
    _ = run.ds, run.http  # built before the writer starts: it times nothing of ours
    ctx = mp.get_context("spawn")  # this process has threads (uvicorn): no fork
    stop, out = ctx.Event(), ctx.Queue()
    spec = {"url": run.url, "alias": run.alias, "path": str(run.ds.path), "n": run.n,
            "rate": a.write_rate, "seed": a.seed + 99, "parent": os.getpid()}  # fmt: skip
    proc = ctx.Process(target=writer_main, args=(spec, stop, out), daemon=True)
    proc.start()
    try:
        ready = out.get(timeout=300)
        if "error" in ready:
            raise RuntimeError(f"writer failed to start: {ready['error']}")
        say(f"  writer running at {a.write_rate} items/s")
        time.sleep(a.write_warmup)  # the first writes land before timing starts
        lat = timed(run)
        stop.set()
        wrote = out.get(timeout=300)
    finally:
        stop.set()
        proc.join(60)
        if proc.is_alive():
            proc.terminate()
        deleted = delete_written(run.client, run.alias)
    if "error" in wrote:
        raise RuntimeError(f"writer failed: {wrote['error']}\n{wrote.get('trace', '')}")
    secs = wrote["seconds"] or 1.0
    return {
        **lat,
        "write_rate_target": a.write_rate,
        "write_rate_achieved": round(wrote["indexed"] / secs, 2),
        "writer": wrote,
        "write_failures": wrote["rejected"] + (wrote["sent"] - wrote["indexed"]
                                               - wrote["rejected"]),
        "deleted_after": deleted,
    }  # fmt: skip
