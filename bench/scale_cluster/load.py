"""The load phase: the data set into an index made by Suli's backend, with the board ACLs and
principals; replicas and refresh off while loading, resumable from a checkpoint."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from bench.clustered import BOARDS, LEVELS, WORKSPACE
from bench.scale_cluster.size import (
    NORMAL_REFRESH,
    SizeRun,
    delete_written,
    say,
    segment_summary,
    wait_green,
)
from suli.backends.opensearch.directory import acl_id
from suli.models import BoardAcl, Principal
from suli.validate import parse_item


def acl_rows() -> list[BoardAcl]:
    """Board b's members: every LEVELS principal with more than b boards (prn_v30: 0..299)."""
    return [
        BoardAcl(f"brd_{b}", WORKSPACE, f"board {b}",
                 tuple(p for p, boards in LEVELS.items() if b < boards))
        for b in range(BOARDS)
    ]  # fmt: skip


def load(run: SizeRun) -> dict[str, Any]:
    a, client = run.args, run.client
    _ = run.ds  # generated (or found) before any index is made
    fresh = not client.indices.exists_alias(name=run.alias)
    if fresh:
        run.progress_file.unlink(missing_ok=True)  # a checkpoint of a dropped index
    run.backend.ensure_ready()
    result: dict[str, Any] = {"alias": run.alias, "index": run.backend.current_index(),
                              "shards": run.shards, "replicas": a.replicas}  # fmt: skip
    if not fresh and (gone := delete_written(client, run.alias)):
        result["deleted_leftover_writes"] = gone
    have = run.backend.count()
    if have == run.n and not run.progress_file.exists():
        result["loaded"] = "reused"
    elif have > run.n:
        raise SystemExit(f"{run.alias} holds {have} items, more than {run.n}: drop it")
    else:
        result.update(_fill(run))
    index = result["index"]
    live = client.indices.get_settings(index=index)[index]["settings"]["index"]
    # Commit the load before replicas are added: a replica then copies segment files
    # instead of replaying the translog (re-indexing every vector since the last flush;
    # measured: 38k operations per shard, over 5 minutes, at 1M).
    client.indices.flush(index=index, params={"request_timeout": 3600})
    result["flushed"] = True
    if int(live["number_of_replicas"]) != a.replicas or live.get("refresh_interval",
                                                                  NORMAL_REFRESH) != NORMAL_REFRESH:  # fmt: skip
        client.indices.put_settings(index=index, body={"index": {
            "number_of_replicas": a.replicas, "refresh_interval": NORMAL_REFRESH}})  # fmt: skip
    # The first refresh after a load with refresh off writes every buffered segment (and
    # its HNSW graph): far longer than the client's 10 s.
    client.indices.refresh(index=run.alias, params={"request_timeout": 3600})
    run.progress_file.unlink(missing_ok=True)
    result["green_after_s"] = wait_green(client, index, a.green_timeout)
    count = run.backend.count()
    if count != run.n:
        raise RuntimeError(f"{run.alias} holds {count} items after the load, not {run.n}")
    result["items"] = count
    t0 = time.perf_counter()
    result["acls_written"] = _acls(run)
    result["acl_seconds"] = round(time.perf_counter() - t0, 1)
    result["segments"] = segment_summary(client, run.alias)
    return result


def _acls(run: SizeRun) -> int:
    """The board ACLs and principals; checked through the backend's own read."""
    want = acl_rows()
    have = set(run.backend.acls(WORKSPACE))
    todo = [acl for acl in want if acl not in have]
    if todo:
        # The backend writes one ACL per request, each refreshed (about 40 s for 1000 on a
        # busy node): here one bulk request with the same ids and fields, one refresh,
        # then the backend's read must give back exactly these ACLs.
        lines: list[dict[str, Any]] = []
        for a in todo:
            lines += [
                {"index": {"_index": run.backend.acl_index,
                           "_id": acl_id(a.workspace, a.board)}},
                {"doc_type": "acl", "board": a.board, "workspace": a.workspace,
                 "name": a.name, "members": list(a.members), "groups": list(a.groups)},
            ]  # fmt: skip
        r = run.client.bulk(body=lines, params={"refresh": "true", "request_timeout": 300})
        if r.get("errors"):
            raise RuntimeError(f"ACL bulk write failed: {r['items'][:2]}")
        if sorted(run.backend.acls(WORKSPACE), key=lambda a: a.board) != sorted(
            want, key=lambda a: a.board
        ):
            raise RuntimeError("the backend does not read back the ACLs written")
    run.backend.put_principals([Principal(p, WORKSPACE) for p in LEVELS])
    return len(todo)


def _fill(run: SizeRun) -> dict[str, Any]:
    a, client = run.args, run.client
    index = run.backend.current_index()
    load_body: dict[str, Any] = {}
    if a.load_replicas:
        load_body["number_of_replicas"] = 0
    if a.load_refresh:
        load_body["refresh_interval"] = "-1"
    start = 0
    if run.progress_file.exists():
        start = int(json.loads(run.progress_file.read_text())["done"])
        say(f"resuming the load of {run.alias} at item {start}")
    if load_body and start < run.n:
        client.indices.put_settings(index=index, body={"index": load_body})
    run.progress_file.parent.mkdir(parents=True, exist_ok=True)
    vectors, n, batch = run.ds.vectors, run.n, a.batch

    def batches() -> Iterator[tuple[int, list[dict[str, Any]]]]:
        lines = itertools.islice(run.ds.items(), start, None)
        pos = start
        while chunk := list(itertools.islice(lines, batch)):
            yield pos, chunk
            pos += len(chunk)

    def write(pos: int, rows: list[dict[str, Any]]) -> int:
        items = [parse_item(r) for r in rows]
        vecs = np.asarray(vectors[pos : pos + len(items)], dtype=np.float32)
        outcome = run.loader.upsert(list(zip(items, vecs, strict=True)))
        if outcome.rejected:
            raise RuntimeError(f"items rejected: {dict(list(outcome.rejected.items())[:3])}")
        return pos

    done_ranges: set[int] = set()  # batch starts written, beyond the contiguous watermark
    mark = start
    t0 = last_say = time.perf_counter()
    with ThreadPoolExecutor(a.load_threads) as pool:
        pending: set[Future[int]] = set()
        for pos, rows in batches():
            pending.add(pool.submit(write, pos, rows))
            if len(pending) < 2 * a.load_threads:
                continue
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                done_ranges.add(f.result())
            while mark in done_ranges:  # resume point: every item below it is written
                done_ranges.remove(mark)
                mark = min(mark + batch, n)
            if time.perf_counter() - last_say > 10:
                last_say = time.perf_counter()
                run.progress_file.write_text(json.dumps({"done": mark}))
                rate = (mark - start) / (last_say - t0)
                say(f"  {run.alias}: {mark}/{n} items, {rate:.0f} items/s")
        for f in pending:
            f.result()
    run.progress_file.write_text(json.dumps({"done": n}))
    secs = time.perf_counter() - t0
    say(f"  {run.alias}: loaded {n - start} items in {secs:.0f} s")
    return {
        "loaded": n - start, "resumed_at": start, "load_seconds": round(secs, 1),
        "items_per_s": round((n - start) / secs, 1) if secs else None,
        "load_threads": a.load_threads, "batch": batch,
        "load_settings": load_body or "as in production (replicas and 1 s refresh)",
    }  # fmt: skip
