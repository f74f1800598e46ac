"""Scale bench on a 3-node cluster with replicas: load, steady state, writes, recall, resources.

The run the lead makes, alone on a quiet machine (each size loads once, then is reused):

    python -m bench.scale_cluster --sizes 100000 1000000 --out bench/results/scale_cluster.jsonl
    python -m bench.scale_cluster --sizes 1000000 --kind uniform --out ...     # uniform vectors
    python -m bench.scale_cluster --sizes 1000000 --phases settle latency     # resume later
    python -m bench.scale_cluster --url http://host:9200 --sizes 100000       # own cluster
    python -m bench.scale_cluster --sizes 100000 --no-load-replicas --no-load-refresh
                                            # load with replicas 1 and a 1 s refresh throughout

Phases (`--phases`, in this order; each prints one JSON line to stdout and appends it to
`--out`, progress goes to stderr; a failed phase is recorded with `error` and the run goes on,
except when the cluster or the load fails):

- cluster: start (or reuse) a devcluster of `--nodes` nodes in its own state dir (default
  ~/.cache/suli/bench-cluster, ports 9241-9243, `--heap` 2g, the newest JDK >= 21 that
  devcluster picks), or use `--url`. Reports the JDK per node, whether the node was started with
  jdk.incubator.vector and whether its log says "Java vector incubator API enabled".
  Without this phase and without `--url` the cluster in the state dir must already run.
- load: the data set of bench.clustered (generated once, cached), an index created by Suli's
  OpenSearchBackend (alias `<prefix>-<kind>-<n>`, `--shards` default one per data node,
  `--replicas` 1), filled with Backend.upsert in batches from `--load-threads` threads, with
  replicas 0 and refresh_interval -1 during the load (OpenSearch's bulk-load advice), then the
  index's own settings back. Reports items/s, seconds to green, segments. An index holding
  exactly n items is reused; an interrupted load resumes from its checkpoint (in
  `<data-root>/progress/`). Board ACLs (1000 boards) and the LEVELS principals are written too.
- settle: waits, without force-merge, until the index reports no running merge for
  `--settle-quiet` seconds (default 60); reports the wait and the segments per shard.
- latency: `--queries` real NFCorpus questions (real MiniLM vectors, precomputed) as principal
  `--principal`: Suli core (Searcher.search), Suli HTTP (the real app under uvicorn) and raw
  `_msearch` of the same two bodies, interleaved query by query; p50/p99, ratios to raw, the
  core's phase clocks.
- writes: the latency phase again while another process feeds `--write-rate` new items a
  second through the indexer (indexer.pipeline.index_stream over a pipe, lines carrying their
  own `vector` and `vector_model`); reports the achieved rate and failures. The written items
  (ids `itm_w...`) are deleted afterwards, so the index holds n items again.
- recall: filtered recall@10 of the vector leg exactly as Suli builds it (visibility inside
  the k-NN clause, k = candidate depth) against an exact numpy top 10 over the items each
  principal of bench.clustered.LEVELS may see (30 / 10 / 1 / 0.1 %); mean and minimum.
- resources: heap used/max and RSS per node, store size of the index (primaries, total) and
  bytes per million items.
- concurrency: NOT in the default phases (needs `--plugins neural-search` on the nodes):
  bench.concurrency.run_levels against `suli serve` and the native hybrid query.
- growth: p50/p99 growth from the smallest to the largest size in `--out` (latency and
  writes phases of this kind), per side, and a projection to 10M items (latency on the power
  law through those sizes, load hours at the largest load's rate, disk at its bytes per item).

Every phase records os.getloadavg() at its start and end.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import itertools
import json
import multiprocessing as mp
import os
import statistics
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
from opensearchpy import OpenSearch

from bench.clustered import (
    BOARDS,
    CACHE_DIR,
    DIM,
    LEVELS,
    MODEL,
    WORKSPACE,
    DataSet,
    generate,
    queries,
    unit,
    visible_mask,
)
from bench.overhead import LookupEmbedder, http_client, interleave, pct, raw_bodies, summarise
from mappings import items_index
from suli.backends.opensearch import OpenSearchBackend
from suli.models import BoardAcl, Principal, SearchRequest
from suli.service import Searcher
from suli.settings import Settings
from suli.validate import parse_item
from suli.visibility import visibility_for

PHASES = ("cluster", "load", "settle", "latency", "writes", "recall", "resources", "concurrency",
          "growth")  # fmt: skip
DEFAULT_PHASES = tuple(p for p in PHASES if p != "concurrency")
STATE = Path.home() / ".cache" / "suli" / "bench-cluster"
VECTOR_LOG = "Java vector incubator API enabled"
WRITTEN_PREFIX = "itm_w"  # ids of the items the writes phase adds (and deletes afterwards)
NORMAL_REFRESH = items_index(DIM)["settings"]["index"]["refresh_interval"]


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---- exact filtered top k ------------------------------------------------------------------


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


# ---- data, index, cluster helpers ----------------------------------------------------------


def acl_rows() -> list[BoardAcl]:
    """Board b's members: every LEVELS principal with more than b boards (prn_v30: 0..299)."""
    return [
        BoardAcl(f"brd_{b}", WORKSPACE, f"board {b}",
                 tuple(p for p, boards in LEVELS.items() if b < boards))
        for b in range(BOARDS)
    ]  # fmt: skip


def segment_summary(client: OpenSearch, alias: str) -> dict[str, Any]:
    rows = client.cat.segments(index=alias, format="json")
    per: dict[str, int] = {}
    for r in rows:
        key = f"{r['shard']}{r['prirep']}"
        per[key] = per.get(key, 0) + 1
    return {
        "total": len(rows),
        "primaries": sum(1 for r in rows if r["prirep"] == "p"),
        "per_shard": dict(sorted(per.items())),
    }


def wait_green(client: OpenSearch, index: str, timeout: float) -> float:
    """Seconds until the index is green (all replicas placed); raises after timeout."""
    t0 = time.perf_counter()
    while True:
        h = client.cluster.health(index=index, wait_for_status="green", timeout="10s",
                                  params={"ignore": 408, "request_timeout": 30})  # fmt: skip
        if h.get("status") == "green" and not h.get("timed_out"):
            return round(time.perf_counter() - t0, 1)
        if time.perf_counter() - t0 > timeout:
            raise RuntimeError(f"{index} not green after {timeout:.0f} s: {h.get('status')}")
        say(f"  waiting for green: {h.get('status')}, {h.get('unassigned_shards')} unassigned, "
            f"{h.get('initializing_shards')} initializing")  # fmt: skip


def delete_written(client: OpenSearch, alias: str) -> int:
    """Drop what a writes phase added (also after a crash), so the index holds n items."""
    r = client.delete_by_query(
        index=alias, body={"query": {"prefix": {"id": WRITTEN_PREFIX}}},
        params={"refresh": "true", "conflicts": "proceed", "request_timeout": 600},
    )  # fmt: skip
    return int(r.get("deleted", 0))


def node_logs_say(home: Path, line: str) -> bool:
    for path in sorted((home / "logs").glob("*.log")):
        with contextlib.suppress(OSError), path.open(errors="replace") as f:
            if any(line in row for row in f):
                return True
    return False


def rss_bytes(pid: int) -> int | None:
    try:
        for row in Path(f"/proc/{pid}/status").read_text().splitlines():
            if row.startswith("VmRSS:"):
                return int(row.split()[1]) * 1024
    except OSError:
        return None
    return None


# ---- the writer (its own process, so it does not share this process's interpreter) ---------


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


# ---- one size ------------------------------------------------------------------------------


class SizeRun:
    """Everything the phases of one size share, built on first use."""

    def __init__(self, args: argparse.Namespace, url: str, shards: int, n: int) -> None:
        self.args, self.url, self.shards, self.n = args, url, shards, n
        self.alias = f"{args.prefix}-{args.kind}-{n}"
        self.progress_file = args.data_root / "progress" / f"{self.alias}.json"

    @cached_property
    def ds(self) -> DataSet:
        say(f"data set {self.args.kind} n={self.n}")
        return generate(self.n, self.args.kind, self.args.seed, self.args.centres,
                        self.args.data_root)  # fmt: skip

    @cached_property
    def settings(self) -> Settings:
        s = Settings(opensearch_url=self.url, index_alias=self.alias,
                     acl_index=f"{self.alias}-acl", shards=self.shards,
                     replicas=self.args.replicas)  # fmt: skip
        if self.args.kind == "uniform":
            # Random unit vectors sit near cosine 0 to every query: the meaning floor (tuned
            # for real embeddings) would drop every meaning-only hit (as in bench.scale).
            s = s.model_copy(update={"meaning_floor": -1.0})
        return s

    @cached_property
    def backend(self) -> OpenSearchBackend:
        return OpenSearchBackend(self.settings, DIM, MODEL)

    @cached_property
    def loader(self) -> OpenSearchBackend:
        """The load's writer: a bulk of 500 vectors on a busy node can take longer than the
        product's 10 s timeout, and a timed-out bulk is sent again (work done twice)."""
        s = self.settings.model_copy(update={"opensearch_timeout_s": self.args.load_timeout})
        return OpenSearchBackend(s, DIM, MODEL)

    @property
    def client(self) -> OpenSearch:
        return self.backend.client

    @cached_property
    def query_set(self) -> tuple[list[str], np.ndarray]:
        texts, vecs = queries(self.args.queries)
        return texts, vecs

    @cached_property
    def searcher(self) -> Searcher:
        texts, vecs = self.query_set
        emb = LookupEmbedder(dict(zip(texts, vecs, strict=True)), MODEL)
        return Searcher(self.backend, emb, self.settings)

    @cached_property
    def principal(self) -> Principal:
        return Principal(self.args.principal, WORKSPACE)

    @cached_property
    def http(self) -> tuple[Any, dict[str, str]]:
        return http_client(self.searcher, self.principal.id)

    def require_loaded(self) -> None:
        if not self.client.indices.exists_alias(name=self.alias):
            raise RuntimeError(f"no index {self.alias}: run the load phase first")
        have = self.backend.count()
        if have > self.n and delete_written(self.client, self.alias):  # a writes phase's, left
            have = self.backend.count()
        if have != self.n:
            raise RuntimeError(f"{self.alias} holds {have} items, not {self.n}: run the load phase")

    # ---- load

    def load(self) -> dict[str, Any]:
        a, client = self.args, self.client
        _ = self.ds  # generated (or found) before any index is made
        fresh = not client.indices.exists_alias(name=self.alias)
        if fresh:
            self.progress_file.unlink(missing_ok=True)  # a checkpoint of a dropped index
        self.backend.ensure_ready()
        result: dict[str, Any] = {"alias": self.alias, "index": self.backend.current_index(),
                                  "shards": self.shards, "replicas": a.replicas}  # fmt: skip
        if not fresh and (gone := delete_written(client, self.alias)):
            result["deleted_leftover_writes"] = gone
        have = self.backend.count()
        if have == self.n and not self.progress_file.exists():
            result["loaded"] = "reused"
        elif have > self.n:
            raise SystemExit(f"{self.alias} holds {have} items, more than {self.n}: drop it")
        else:
            result.update(self._fill())
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
        client.indices.refresh(index=self.alias, params={"request_timeout": 3600})
        self.progress_file.unlink(missing_ok=True)
        result["green_after_s"] = wait_green(client, index, a.green_timeout)
        count = self.backend.count()
        if count != self.n:
            raise RuntimeError(f"{self.alias} holds {count} items after the load, not {self.n}")
        result["items"] = count
        t0 = time.perf_counter()
        result["acls_written"] = self._acls()
        result["acl_seconds"] = round(time.perf_counter() - t0, 1)
        result["segments"] = segment_summary(client, self.alias)
        return result

    def _acls(self) -> int:
        """The board ACLs and principals; checked through the backend's own read."""
        want = acl_rows()
        have = set(self.backend.acls(WORKSPACE))
        todo = [acl for acl in want if acl not in have]
        if todo:
            # The backend writes one ACL per request, each refreshed (about 40 s for 1000 on a
            # busy node): here one bulk request with the same ids and fields, one refresh,
            # then the backend's read must give back exactly these ACLs.
            lines: list[dict[str, Any]] = []
            for a in todo:
                lines += [
                    {"index": {"_index": self.backend.acl_index,
                               "_id": OpenSearchBackend._acl_id(a.workspace, a.board)}},
                    {"doc_type": "acl", "board": a.board, "workspace": a.workspace,
                     "name": a.name, "members": list(a.members), "groups": list(a.groups)},
                ]  # fmt: skip
            r = self.client.bulk(body=lines, params={"refresh": "true", "request_timeout": 300})
            if r.get("errors"):
                raise RuntimeError(f"ACL bulk write failed: {r['items'][:2]}")
            if sorted(self.backend.acls(WORKSPACE), key=lambda a: a.board) != sorted(
                want, key=lambda a: a.board
            ):
                raise RuntimeError("the backend does not read back the ACLs written")
        self.backend.put_principals([Principal(p, WORKSPACE) for p in LEVELS])
        return len(todo)

    def _fill(self) -> dict[str, Any]:
        a, client = self.args, self.client
        index = self.backend.current_index()
        load_body: dict[str, Any] = {}
        if a.load_replicas:
            load_body["number_of_replicas"] = 0
        if a.load_refresh:
            load_body["refresh_interval"] = "-1"
        start = 0
        if self.progress_file.exists():
            start = int(json.loads(self.progress_file.read_text())["done"])
            say(f"resuming the load of {self.alias} at item {start}")
        if load_body and start < self.n:
            client.indices.put_settings(index=index, body={"index": load_body})
        self.progress_file.parent.mkdir(parents=True, exist_ok=True)
        vectors, n, batch = self.ds.vectors, self.n, a.batch

        def batches() -> Iterator[tuple[int, list[dict[str, Any]]]]:
            lines = itertools.islice(self.ds.items(), start, None)
            pos = start
            while chunk := list(itertools.islice(lines, batch)):
                yield pos, chunk
                pos += len(chunk)

        def write(pos: int, rows: list[dict[str, Any]]) -> int:
            items = [parse_item(r) for r in rows]
            vecs = np.asarray(vectors[pos : pos + len(items)], dtype=np.float32)
            outcome = self.loader.upsert(list(zip(items, vecs, strict=True)))
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
                    self.progress_file.write_text(json.dumps({"done": mark}))
                    rate = (mark - start) / (last_say - t0)
                    say(f"  {self.alias}: {mark}/{n} items, {rate:.0f} items/s")
            for f in pending:
                f.result()
        self.progress_file.write_text(json.dumps({"done": n}))
        secs = time.perf_counter() - t0
        say(f"  {self.alias}: loaded {n - start} items in {secs:.0f} s")
        return {
            "loaded": n - start, "resumed_at": start, "load_seconds": round(secs, 1),
            "items_per_s": round((n - start) / secs, 1) if secs else None,
            "load_threads": a.load_threads, "batch": batch,
            "load_settings": load_body or "as in production (replicas and 1 s refresh)",
        }  # fmt: skip

    # ---- settle

    def settle(self) -> dict[str, Any]:
        self.require_loaded()
        a, client = self.args, self.client
        t0 = time.perf_counter()
        quiet_since: float | None = None
        timed_out = False
        while True:
            st = client.indices.stats(index=self.alias, metric="merge")["_all"]["total"]
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
            "segments": segment_summary(client, self.alias),
        }  # fmt: skip

    # ---- latency

    def latency(self) -> dict[str, Any]:
        self.require_loaded()
        return self._timed()

    def _timed(self) -> dict[str, Any]:
        texts, vecs = self.query_set
        vectors = dict(zip(texts, vecs, strict=True))
        texts = list(vectors)
        searcher, client, alias = self.searcher, self.client, self.alias
        vis = visibility_for(self.principal, self.backend.acls(WORKSPACE))
        depth = self.settings.candidate_depth
        phases: dict[str, list[float]] = {}

        def core(q: str) -> Any:
            resp = searcher.search(self.principal, SearchRequest(query=q, limit=10))
            for k, v in resp.timings_ms.items():
                phases.setdefault(k, []).append(v)
            return resp

        def raw(q: str) -> Any:
            lines: list[dict[str, Any]] = []
            for body in raw_bodies(vis, q, vectors[q], depth):
                lines += [{"index": alias}, body]
            return client.msearch(body=lines)

        http, headers = self.http

        def over_http(q: str) -> Any:
            params: dict[str, Any] = {"q": q, "limit": 10}
            return http.get("/api/v1/search", params=params, headers=headers).raise_for_status()

        sides: dict[str, Callable[[str], Any]] = {"raw_msearch": raw, "suli_core": core,
                                                  "suli_http": over_http}  # fmt: skip
        for q in texts[: self.args.warmup]:  # warm caches and connections on every side
            for fn in sides.values():
                fn(q)
        phases.clear()
        times = interleave(sides, texts, self.args.rounds)
        first = searcher.search(self.principal, SearchRequest(query=texts[0], limit=1))
        return {
            "principal": self.principal.id, "queries": len(texts), "rounds": self.args.rounds,
            "depth": depth, "total_for_first_query": first.total,
            "sides": summarise(times, "raw_msearch"),
            "core_phases_p50_ms": {k: round(pct(v, 50), 2) for k, v in phases.items()},
            "core_phases_p99_ms": {k: round(pct(v, 99), 2) for k, v in phases.items()},
        }  # fmt: skip

    # ---- writes

    def writes(self) -> dict[str, Any]:
        self.require_loaded()
        a = self.args
        _ = self.ds, self.http  # built before the writer starts: it times nothing of ours
        ctx = mp.get_context("spawn")  # this process has threads (uvicorn): no fork
        stop, out = ctx.Event(), ctx.Queue()
        spec = {"url": self.url, "alias": self.alias, "path": str(self.ds.path), "n": self.n,
                "rate": a.write_rate, "seed": a.seed + 99, "parent": os.getpid()}  # fmt: skip
        proc = ctx.Process(target=writer_main, args=(spec, stop, out), daemon=True)
        proc.start()
        try:
            ready = out.get(timeout=300)
            if "error" in ready:
                raise RuntimeError(f"writer failed to start: {ready['error']}")
            say(f"  writer running at {a.write_rate} items/s")
            time.sleep(a.write_warmup)  # the first writes land before timing starts
            lat = self._timed()
            stop.set()
            wrote = out.get(timeout=300)
        finally:
            stop.set()
            proc.join(60)
            if proc.is_alive():
                proc.terminate()
            deleted = delete_written(self.client, self.alias)
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

    # ---- recall

    def recall(self) -> dict[str, Any]:
        self.require_loaded()
        texts, qv = self.query_set
        depth = self.settings.candidate_depth
        boards = self.ds.boards()
        masks = {p: visible_mask(boards, p) for p in LEVELS}
        t0 = time.perf_counter()
        exact = exact_topk(self.ds.vectors, qv, masks, 10, self.args.chunk)
        exact_s = time.perf_counter() - t0
        acls = self.backend.acls(WORKSPACE)
        out: dict[str, Any] = {"k_sent": depth, "queries": len(texts),
                               "exact_seconds": round(exact_s, 1), "levels": {}}  # fmt: skip
        for p in LEVELS:
            vis = visibility_for(Principal(p, WORKSPACE), acls)
            scores: list[float] = []
            for s in range(0, len(texts), 20):
                lines: list[dict[str, Any]] = []
                for t, v in zip(texts[s : s + 20], qv[s : s + 20], strict=True):
                    body = raw_bodies(vis, t, v, depth)[1]
                    body["_source"] = ["id"]  # which hits come back does not depend on it
                    lines += [{"index": self.alias}, body]
                resp = self.client.msearch(body=lines, params={"request_timeout": 120})
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

    # ---- resources

    def resources(self) -> dict[str, Any]:
        self.require_loaded()
        client = self.client
        stats = client.nodes.stats(metric="jvm,process")["nodes"]
        info = client.nodes.info(metric="process")["nodes"]
        local = urlparse(self.url).hostname in ("127.0.0.1", "localhost", "::1")
        nodes = {}
        for nid, st in stats.items():
            pid = info.get(nid, {}).get("process", {}).get("id")
            mem = st["jvm"]["mem"]
            nodes[st["name"]] = {
                "heap_used_mb": round(mem["heap_used_in_bytes"] / 2**20, 1),
                "heap_max_mb": round(mem["heap_max_in_bytes"] / 2**20, 1),
                "rss_mb": (round(r / 2**20, 1) if local and pid and (r := rss_bytes(pid))
                           else None),
                "virtual_mb": round(st["process"]["mem"]["total_virtual_in_bytes"] / 2**20, 1),
            }  # fmt: skip
        store = client.indices.stats(index=self.alias, metric="store,docs")["_all"]
        prim, total = store["primaries"]["store"]["size_in_bytes"], store["total"]["store"]["size_in_bytes"]  # fmt: skip
        return {
            "nodes": nodes, "docs": store["primaries"]["docs"]["count"],
            "docs_deleted": store["primaries"]["docs"]["deleted"],
            "store_primaries_mb": round(prim / 2**20, 1), "store_total_mb": round(total / 2**20, 1),
            "primary_bytes_per_million_items": int(prim / self.n * 1e6),
            "total_bytes_per_million_items": int(total / self.n * 1e6),
        }  # fmt: skip

    # ---- concurrency (bench.concurrency)

    def concurrency(self) -> dict[str, Any]:
        """Closed-loop clients against `suli serve` (its own process: no GIL shared with the
        clients) and against OpenSearch's native hybrid query over the same index; the nodes
        need the neural-search plugin (`--plugins neural-search` with the cluster phase)."""
        from bench import concurrency

        self.require_loaded()
        _, headers = self.http  # creates the principal's token
        token = headers["Authorization"].split()[1]
        texts, vecs = self.query_set
        vis = visibility_for(self.principal, self.backend.acls(WORKSPACE))
        env = {"SULI_OPENSEARCH_URL": self.url, "SULI_INDEX_ALIAS": self.alias,
               "SULI_ACL_INDEX": self.settings.acl_index,
               "SULI_MEANING_FLOOR": str(self.settings.meaning_floor)}  # fmt: skip
        with concurrency.suli_service(env, workers=self.args.serve_workers) as suli_url:
            return dict(concurrency.run_levels(
                suli_url, token, self.url.split(","), self.alias, texts, vecs, vis,
                levels=tuple(self.args.levels), seconds=self.args.concurrency_seconds,
                depth=self.settings.candidate_depth,
            ))  # fmt: skip


# ---- cluster and growth --------------------------------------------------------------------


def cluster_phase(args: argparse.Namespace) -> tuple[dict[str, Any], str, Any]:
    """(result, url, devcluster Cluster or None)."""
    import devcluster

    cluster = None
    if args.url:
        url = args.url
    elif "cluster" in args.phases:
        kw: dict[str, Any] = {"nodes": args.nodes, "http_port": args.http_port,
                              "heap": args.heap, "state": args.state, "java": args.java}  # fmt: skip
        if args.plugins:
            # Hook for the extra-plugin option of devcluster (neural-search for the native
            # hybrid side of the concurrency phase): passed through once devcluster has it.
            if "plugins" not in inspect.signature(devcluster.up).parameters:
                raise SystemExit("--plugins: this devcluster cannot load extra plugins yet")
            kw["plugins"] = args.plugins
        say(f"cluster: {args.nodes} node(s) from port {args.http_port} in {args.state}")
        cluster = devcluster.up(**kw)
        url = cluster.url
    else:
        cluster = devcluster.load(args.state)
        if cluster is None or len(cluster.running()) != cluster.spec.nodes:
            raise SystemExit(f"no running cluster in {args.state}: add the cluster phase or --url")
        url = cluster.url
    client = OpenSearch(url, timeout=60)
    health = client.cluster.health()
    jvm = client.nodes.info(metric="jvm")["nodes"]
    nodes = {}
    for nd in jvm.values():
        row = {"java": nd["jvm"]["version"], "vm": nd["jvm"].get("vm_name"),
               "vector_module": any("jdk.incubator.vector" in x
                                    for x in nd["jvm"].get("input_arguments", []))}  # fmt: skip
        nodes[nd["name"]] = row
    if cluster is not None:
        for i, name in enumerate(cluster.spec.names):
            if name in nodes:
                nodes[name]["log_says_vector_api"] = node_logs_say(cluster.home(i), VECTOR_LOG)
    result = {
        "url": url, "managed": cluster is not None, "status": health["status"],
        "data_nodes": health["number_of_data_nodes"], "nodes": nodes,
        "heap": cluster.spec.heap if cluster is not None else None,
        "jdk": ({"home": str(jdk.home), "version": jdk.version, "simd": jdk.simd}
                if cluster is not None and (jdk := cluster.jdk()) else None),
        "version": client.info()["version"]["number"],
    }  # fmt: skip
    return result, url, cluster


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


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--kind", choices=["clustered", "uniform"], default="clustered")
    ap.add_argument("--phases", nargs="+", choices=PHASES, default=list(DEFAULT_PHASES))
    ap.add_argument("--out", type=Path, default=Path("bench/results/scale_cluster.jsonl"))
    g = ap.add_argument_group("cluster")
    g.add_argument("--url", help="an existing cluster (no devcluster)")
    g.add_argument("--state", type=Path, default=STATE, help="devcluster state dir")
    g.add_argument("--nodes", type=int, default=3)
    g.add_argument("--http-port", type=int, default=9241)
    g.add_argument("--heap", default="2g")
    g.add_argument("--java", help="JDK home for the nodes (default: devcluster's choice)")
    g.add_argument("--plugins", nargs="*", default=[], help="extra node plugins (devcluster)")
    g = ap.add_argument_group("data and load")
    g.add_argument("--data-root", type=Path, default=CACHE_DIR)
    g.add_argument("--seed", type=int, default=11)
    g.add_argument("--centres", type=int, default=3000)
    g.add_argument("--prefix", default="bench-sc", help="alias = PREFIX-KIND-N")
    g.add_argument("--shards", type=int, help="primary shards (default: one per data node)")
    g.add_argument("--replicas", type=int, default=1)
    g.add_argument("--load-threads", type=int, default=2)
    g.add_argument("--batch", type=int, default=500)
    g.add_argument(
        "--no-load-replicas",
        dest="load_replicas",
        action="store_false",
        help="keep the replicas during the load (default: 0 until loaded)",
    )
    g.add_argument(
        "--no-load-refresh",
        dest="load_refresh",
        action="store_false",
        help="keep the 1 s refresh during the load (default: -1 until loaded)",
    )
    g.add_argument("--green-timeout", type=float, default=3600)
    g.add_argument("--load-timeout", type=float, default=120, help="seconds per bulk request")
    g = ap.add_argument_group("settle, latency, writes, recall")
    g.add_argument("--settle-quiet", type=float, default=60)
    g.add_argument("--settle-timeout", type=float, default=3600)
    g.add_argument("--queries", type=int, default=200)
    g.add_argument("--rounds", type=int, default=2)
    g.add_argument("--warmup", type=int, default=10, help="queries asked untimed first")
    g.add_argument("--principal", default="prn_v30", choices=list(LEVELS))
    g.add_argument("--write-rate", type=int, default=20, help="items per second")
    g.add_argument("--write-warmup", type=float, default=3.0, help="seconds before timing")
    g.add_argument("--chunk", type=int, default=50_000, help="rows per exact-search chunk")
    g.add_argument("--levels", type=int, nargs="+", default=[1, 4, 16, 32])
    g.add_argument(
        "--serve-workers",
        type=int,
        default=os.cpu_count() or 1,
        help="`suli serve --workers` for the concurrency phase (default: one per core)",
    )
    g.add_argument("--concurrency-seconds", type=float, default=30)
    args = ap.parse_args(argv)
    if args.write_rate < 1:
        ap.error("--write-rate: at least 1 item a second")
    args.phases = [p for p in PHASES if p in args.phases]  # the documented order
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    rec = Recorder(args.out)
    found: dict[str, Any] = {}

    def cluster() -> dict[str, Any]:
        result, found["url"], found["cluster"] = cluster_phase(args)
        return result

    if "cluster" in args.phases:
        rec.run("cluster", None, args.kind, cluster, fatal=True)
    else:
        cluster()  # the URL and node count, without a result row
    client = OpenSearch(found["url"], timeout=60)
    shards = args.shards or int(client.cluster.health()["number_of_data_nodes"])
    per_size = [p for p in args.phases if p not in ("cluster", "growth")]
    for n in args.sizes:
        run = SizeRun(args, found["url"], shards, n)
        for phase in per_size:
            rec.run(phase, n, args.kind, getattr(run, phase), fatal=phase == "load")
    if "growth" in args.phases:
        rec.run("growth", None, args.kind, lambda: growth(previous_rows(args.out), args.kind))
    return {"url": found["url"], "rows": rec.rows,
            "errors": [r for r in rec.rows if "error" in r]}  # fmt: skip


if __name__ == "__main__":
    sys.exit(1 if main()["errors"] else 0)
