"""Throughput under concurrency: Suli HTTP `POST /api/v1/search` vs OpenSearch's native hybrid.

    suli cluster up --nodes 3 --plugin neural-search           # nodes that run `hybrid`
    SULI_INDEX_ALIAS=suli-items suli serve --port 8000 &         # Suli, in its own process
    python -m bench.concurrency --suli-url http://127.0.0.1:8000 --token "$TOKEN" \\
        --os-url http://127.0.0.1:9200,http://127.0.0.1:9201,http://127.0.0.1:9202 \\
        --index suli-items --levels 1 4 16 32 --seconds 30 --out bench/results/concurrency.json

A closed loop: at each level, N client threads each send a request, wait for its answer and
send the next, looping over the query list, for a short warm-up and then `seconds` measured.
Side (a) is a running Suli service (token auth, body `{"q": ..., "limit": 10}`), and (a') the
same search as `GET /api/v1/search?q=...&limit=10` (the token read with the legs; a POST's
token is checked before its body is read, a round trip of its own); side (b) is
one `hybrid` query (Suli's own BM25 and filtered k-NN legs as sub-queries, same visibility
filter, same depth) through a search pipeline fusing them by RRF with k=60, which needs the
neural-search plugin on the nodes (`suli cluster up --plugin neural-search`). Each level runs
the sides in alternating blocks (A B | B A, the next level B A | A B) so drift hits both.

Errors are counted, never dropped: a non-2xx answer, an exception, an OpenSearch answer with
failed shards or a timeout, and a Suli answer with a degraded leg all count. QPS is successful
answers per second; p50/p99 are over successful answers. The client side is stdlib
http.client on threads, one keep-alive connection each, with every request body encoded once
beforehand: a thread spends its time in the socket with the GIL released, and the CPU the
client threads used (thread CPU clocks) is reported beside each result. Run the Suli service
in its own process (`suli serve`), not in this one, or the two share one GIL.

The Suli service must be configured like the native side for a like-for-like comparison:
same index, candidate depth (`depth`), and its query vectors are its own model's (the native
side is given `vectors`, so it skips embedding: the Suli service embeds each query once, then
serves it from its query cache, which holds 256 queries: run_levels primes it with one pass
over the queries before the first level).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import numpy as np
from opensearchpy import OpenSearch

from bench.native_hybrid import PIPELINE, hybrid_body, put_rrf_pipeline
from suli.visibility import Visibility

# suli_http: POST with a JSON body (its token checked before the body is read, a round trip
# of its own); suli_http_get: GET with the query in the URL (the token read with the legs).
SIDES = ("suli_http", "suli_http_get", "native_hybrid")
LEVELS = (1, 4, 16, 32)
SEARCH_PATH = "/api/v1/search"


@dataclass(frozen=True)
class Side:
    """One side's requests, ready to send: per query a (base URL, path, body, headers), and
    the check a 2xx answer must pass to count as a success. A GET side has a path per query
    (`paths`) and sends no body."""

    name: str
    urls: tuple[str, ...]  # client i talks to urls[i % len(urls)]
    path: str
    bodies: tuple[bytes, ...]
    headers: Mapping[str, str]
    complete: Callable[[bytes], bool]
    paths: tuple[str, ...] = ()

    def send(self, conn: http.client.HTTPConnection, q: int) -> None:
        """Query q's request (mod the number of queries) on `conn`."""
        if self.paths:
            conn.request("GET", self.paths[q % len(self.paths)], headers=self.headers)
        else:
            conn.request("POST", self.path, self.bodies[q % len(self.bodies)], self.headers)

    def __len__(self) -> int:
        return len(self.paths or self.bodies)


def suli_complete(data: bytes) -> bool:
    """A whole Suli answer: no leg degraded (FastAPI renders compact JSON)."""
    return b'"degraded":[]' in data


def opensearch_complete(data: bytes) -> bool:
    """Every shard answered in time: `timed_out` and `_shards` come first in a search answer."""
    head = data[:400]
    return b'"timed_out":false' in head and b'"failed":0' in head


@dataclass
class _Tally:
    """What one client thread saw; merged after the threads end (no lock on the hot path)."""

    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    warmup_requests: int = 0
    warmup_errors: Counter[str] = field(default_factory=Counter)
    cpu_s: float = 0.0
    last_done: float = 0.0


def _connection(url: str, timeout: float) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"url: only http://host:port URLs are supported, not {url!r}")
    return http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)


def _client(
    side: Side, i: int, go: threading.Event, measure_at: float, end_at: float, timeout: float
) -> _Tally:
    """Loop until end_at: send, wait, record; requests started before measure_at are warm-up."""
    tally = _Tally()
    conn = _connection(side.urls[i % len(side.urls)], timeout)
    q = i * 7  # clients start at different queries, so they do not all send the same one
    cpu0: float | None = None
    go.wait()
    try:
        while True:
            t0 = time.perf_counter()
            if t0 >= end_at:
                break
            measuring = t0 >= measure_at
            if measuring and cpu0 is None:
                cpu0 = time.thread_time()
            error = None
            try:
                side.send(conn, q)
                resp = conn.getresponse()
                data = resp.read()
                if not 200 <= resp.status < 300:
                    error = f"HTTP {resp.status}"
                elif not side.complete(data):
                    error = "partial answer"
            except Exception as err:  # any failure is an error of this side, counted below
                error = type(err).__name__
                conn.close()  # http.client reconnects on the next request
            done = time.perf_counter()
            q += 1
            if not measuring:
                tally.warmup_requests += 1
                if error:
                    tally.warmup_errors[error] += 1
                continue
            tally.last_done = done
            if error:
                tally.errors[error] += 1
            else:
                tally.latencies.append(done - t0)
    finally:
        if cpu0 is not None:
            tally.cpu_s = time.thread_time() - cpu0
        conn.close()
    return tally


def prime(side: Side, timeout: float = 60.0) -> dict[str, int]:
    """One request per query, in turn: the service's query cache and the nodes' caches are
    warm for every query before any level (the native side never embeds, so neither should
    Suli inside the measured window). Returns the error kinds seen, counted."""
    errors: Counter[str] = Counter()
    conn = _connection(side.urls[0], timeout)
    try:
        for q in range(len(side)):
            try:
                side.send(conn, q)
                resp = conn.getresponse()
                data = resp.read()
                if not 200 <= resp.status < 300:
                    errors[f"HTTP {resp.status}"] += 1
                elif not side.complete(data):
                    errors["partial answer"] += 1
            except Exception as err:  # counted like the load loop counts it
                errors[type(err).__name__] += 1
                conn.close()
    finally:
        conn.close()
    return dict(errors)


def run_block(
    side: Side, clients: int, seconds: float, warmup: float, timeout: float = 60.0
) -> tuple[list[_Tally], float]:
    """`clients` closed-loop clients on one side for warmup + seconds: a tally per client and
    the measured window's length (requests started in it all finish, none is cut off, so it
    lasts until the last of them is answered, never shorter than `seconds`)."""
    go = threading.Event()
    tallies: list[_Tally] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def work(i: int, measure_at: float, end_at: float) -> None:
        try:
            tally = _client(side, i, go, measure_at, end_at, timeout)
        except BaseException as err:  # a bug in the client itself: re-raised below
            failures.append(err)
            return
        with lock:
            tallies.append(tally)

    start = time.perf_counter() + 0.05 + 0.002 * clients  # every thread is waiting by then
    measure_at, end_at = start + warmup, start + warmup + seconds
    threads = [
        threading.Thread(target=work, args=(i, measure_at, end_at), daemon=True)
        for i in range(clients)
    ]
    for t in threads:
        t.start()
    time.sleep(max(0.0, start - time.perf_counter()))
    go.set()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    last = max((t.last_done for t in tallies if t.last_done), default=end_at)
    return tallies, max(seconds, last - measure_at)


def summarise(tallies: Sequence[_Tally], elapsed: float) -> dict[str, Any]:
    """QPS, latency percentiles, errors and client CPU of one side at one level."""
    lat = np.asarray([x for t in tallies for x in t.latencies], dtype=np.float64)
    errors: Counter[str] = Counter()
    warm_errors: Counter[str] = Counter()
    for t in tallies:
        errors.update(t.errors)
        warm_errors.update(t.warmup_errors)
    ok, failed = int(lat.size), sum(errors.values())
    cpu = sum(t.cpu_s for t in tallies)

    def ms(p: float) -> float | None:
        return round(float(np.percentile(lat, p)) * 1000, 2) if lat.size else None

    return {
        "requests": ok + failed,
        "ok": ok,
        "errors": failed,
        "error_kinds": dict(errors),
        "warmup_requests": sum(t.warmup_requests for t in tallies),
        "warmup_errors": sum(warm_errors.values()),
        "elapsed_s": round(elapsed, 3),
        "qps": round(ok / elapsed, 2),
        "p50_ms": ms(50),
        "p99_ms": ms(99),
        "mean_ms": round(float(lat.mean()) * 1000, 2) if lat.size else None,
        "client_cpu_s": round(cpu, 3),
        # CPU the client threads used per wall second (1.0 = one whole core of the machine).
        "client_cores": round(cpu / elapsed, 3),
        "client_cpu_us_per_request": round(cpu / max(ok + failed, 1) * 1e6, 1),
    }


# Each query's vector: by text, or row i of an array for queries[i].
Vectors = Mapping[str, Sequence[float] | np.ndarray] | np.ndarray


def _vector_of(vectors: Vectors, queries: Sequence[str], i: int) -> Sequence[float]:
    """Query i's vector: row i of an array, or the mapping's entry for its text."""
    vec = vectors[i] if isinstance(vectors, np.ndarray) else vectors[queries[i]]
    return [float(x) for x in vec]


def build_sides(
    suli_url: str,
    token: str,
    os_urls: Sequence[str],
    index: str,
    queries: Sequence[str],
    vectors: Vectors,
    visibility: Visibility,
    depth: int,
    limit: int,
    pipeline: str,
) -> dict[str, Side]:
    """Both sides' requests, each body encoded once."""
    json_headers = {"Content-Type": "application/json", "Connection": "keep-alive"}
    suli = Side(
        "suli_http",
        (suli_url.rstrip("/"),),
        SEARCH_PATH,
        tuple(json.dumps({"q": q, "limit": limit}).encode() for q in queries),
        {**json_headers, "Authorization": f"Bearer {token}"},
        suli_complete,
    )
    get = Side(
        "suli_http_get",
        suli.urls,
        SEARCH_PATH,
        (),
        {"Connection": "keep-alive", "Authorization": f"Bearer {token}"},
        suli_complete,
        tuple(f"{SEARCH_PATH}?{urlencode({'q': q, 'limit': limit})}" for q in queries),
    )
    native_bodies = []
    for i, q in enumerate(queries):
        body = hybrid_body(visibility, q, _vector_of(vectors, queries, i), depth)
        body["size"] = limit
        native_bodies.append(json.dumps(body).encode())
    native = Side(
        "native_hybrid",
        tuple(u.rstrip("/") for u in os_urls),
        f"/{index}/_search?search_pipeline={pipeline}",
        tuple(native_bodies),
        json_headers,
        opensearch_complete,
    )
    return {suli.name: suli, get.name: get, native.name: native}


def run_levels(
    suli_url: str,
    token: str,
    os_url: str | Sequence[str],
    index: str,
    queries: Sequence[str],
    vectors: Vectors,
    visibility: Visibility,
    *,
    levels: Sequence[int] = LEVELS,
    seconds: float = 30.0,
    warmup: float = 3.0,
    blocks: int = 2,
    depth: int = 100,
    limit: int = 10,
    pipeline: str = PIPELINE,
    rank_constant: int = 60,
    timeout: float = 60.0,
    native: bool = True,
    settle: float = 0.0,
) -> dict[str, Any]:
    """Closed-loop throughput of Suli HTTP search and OpenSearch's native hybrid query, per level.

    suli_url: base URL of a running Suli service (`suli serve`) over `index`.
    token: a Suli API token; its principal is the one whose `visibility` the native side uses.
    os_url: an OpenSearch node URL, or several (client i of the native side uses url i mod n,
        as Suli's client spreads over comma-separated hosts); the nodes need neural-search.
    index: the alias Suli searches (its `index_alias`).
    queries: query texts; every client loops over them, each from its own starting point.
    vectors: each query's vector, by text (a mapping) or by position (an array, row i for
        queries[i]); the native side sends them as its k-NN leg's vector.
    visibility: the token principal's Visibility (suli.visibility.visibility_for over the
        current ACLs), rendered into both native sub-queries as Suli renders it.
    levels: concurrent clients per level. seconds: measured time per side and level, split
        into `blocks` alternating blocks, each after `warmup` seconds unmeasured.
    depth, limit: candidates per leg and results per answer, as the Suli service uses.
    pipeline, rank_constant: the RRF search pipeline, (re)written on the nodes first.
    native: False measures Suli alone (nodes without neural-search, e.g. the 3.5 line here).

    Before the levels every query goes once to each side (see prime): Suli's service then
    answers from its query-vector cache, as the native side is handed its vectors. That cache
    holds 256 queries: with more, the Suli side embeds inside the measured window. `settle`:
    seconds waited after the prime (the service's reads of corrections, in the background).

    Returns {"prime_errors": {side: {kind: n}}, "levels": [{"clients": n, "suli_http": {...}, "native_hybrid": {...},
    "qps_ratio_suli_over_native": r, "load_avg_1m": [before, after]}, ...], plus the run's
    settings and "client_cpu_s"}; each side's dict has requests, ok, errors, error_kinds,
    warmup_requests, warmup_errors, elapsed_s, qps, p50_ms, p99_ms, mean_ms, client_cpu_s,
    client_cores, client_cpu_us_per_request.
    """
    if not queries:
        raise ValueError("queries: at least one query is needed")
    if any(n < 1 for n in levels):
        raise ValueError(f"levels: client counts must be >= 1, not {list(levels)}")
    if seconds <= 0 or warmup < 0 or blocks < 1:
        raise ValueError("seconds must be > 0, warmup >= 0 and blocks >= 1")
    os_urls = [os_url] if isinstance(os_url, str) else list(os_url)
    names = SIDES if native else tuple(n for n in SIDES if n != "native_hybrid")
    if native:
        client = OpenSearch(os_urls, timeout=60)
        try:
            put_rrf_pipeline(client, pipeline, rank_constant)
        finally:
            client.close()
    sides = build_sides(
        suli_url, token, os_urls, index, queries, vectors, visibility, depth, limit, pipeline
    )
    primed = {name: prime(sides[name], timeout) for name in names}
    # The service reads the typo words' corrections in the background after the searches that
    # lacked them (corrections.py): `settle` seconds let that finish before any timed block.
    time.sleep(settle)
    per_block = seconds / blocks
    rows = []
    for li, clients in enumerate(levels):
        load_before = os.getloadavg()[0]
        tallies: dict[str, list[_Tally]] = {name: [] for name in names}
        elapsed = dict.fromkeys(names, 0.0)
        for b in range(blocks):
            # A B | B A, and the next level B A | A B: neither side always runs first.
            order = names if (li + b) % 2 == 0 else names[::-1]
            for name in order:
                got, took = run_block(sides[name], clients, per_block, warmup, timeout)
                tallies[name] += got
                elapsed[name] += took
        row: dict[str, Any] = {"clients": clients}
        for name in names:
            row[name] = summarise(tallies[name], elapsed[name])
        native_qps = row["native_hybrid"]["qps"] if native else None
        row["qps_ratio_suli_over_native"] = (
            round(row["suli_http"]["qps"] / native_qps, 3) if native_qps else None
        )
        row["qps_ratio_suli_get_over_native"] = (
            round(row["suli_http_get"]["qps"] / native_qps, 3) if native_qps else None
        )
        row["load_avg_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
        rows.append(row)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "queries": len(queries),
        "seconds": seconds,
        "warmup_s": warmup,
        "blocks": blocks,
        "depth": depth,
        "limit": limit,
        # Errors of the one pass over every query before the levels (see prime).
        "prime_errors": primed,
        "levels": rows,
        "client_cpu_s": round(sum(r[name]["client_cpu_s"] for r in rows for name in names), 3),
    }


# The service's per-token rate limit (600 a minute per process by default) would refuse a
# closed loop's requests with 429 where the native side has no limit: the bench lifts it (the
# check itself still runs on every request).
UNLIMITED = {"SULI_RATE_PER_MINUTE": "100000000", "SULI_RATE_PER_DAY": "1000000000"}


@contextlib.contextmanager
def suli_service(
    settings_env: Mapping[str, str], workers: int = 1, timeout: float = 180.0
) -> Iterator[str]:
    """`suli serve` in a process of its own (not this one: no GIL shared with the clients) on a
    free loopback port, configured by SULI_* variables (e.g. SULI_OPENSEARCH_URL,
    SULI_INDEX_ALIAS, SULI_ACL_INDEX) over this process's environment; yields its base URL
    once /healthz answers, and stops it afterwards. Its log is kept in a temporary file and
    shown when it does not start."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    suli = Path(sys.executable).with_name("suli")
    cmd = [str(suli), "serve", "--port", str(port), "--workers", str(workers)]
    log = tempfile.NamedTemporaryFile(prefix="suli-serve-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen(
        [*cmd, "--log-level", "warning"], env={**os.environ, **UNLIMITED, **settings_env},
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                text = Path(log.name).read_text(errors="replace")[-3000:]
                raise RuntimeError(f"`{' '.join(cmd)}` did not start; its log:\n{text}")
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        Path(log.name).unlink(missing_ok=True)


def visibility_of_token(os_url: str, index: str, acl_index: str, token: str) -> Visibility:
    """The token principal's visibility over the current ACLs, read as Suli reads it."""
    from suli.auth import open_session
    from suli.backends.opensearch import OpenSearchBackend
    from suli.settings import Settings
    from suli.visibility import visibility_for

    settings = Settings(opensearch_url=os_url, index_alias=index, acl_index=acl_index)
    backend = OpenSearchBackend(settings, 384, "all-MiniLM-L6-v2-int8")
    try:
        session = open_session(backend, token)
        assert session.principal is not None  # open_session refuses a token without one
        # The session reads no ACLs on OpenSearch (Session.acls None): read them here.
        acls = session.acls
        if acls is None:
            acls = tuple(backend.acls(session.principal.workspace))
    finally:
        backend.close()
    return visibility_for(session.principal, acls)


def _queries(args: argparse.Namespace) -> list[str]:
    if args.queries_file:
        lines = Path(args.queries_file).read_text().splitlines()
        return [q.strip() for q in lines if q.strip()][: args.queries]
    from bench.nfcorpus import load_qrels, load_queries

    return list(load_queries(set(load_qrels("test"))).values())[: args.queries]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--suli-url", help="base URL of a running `suli serve`")
    where.add_argument(
        "--serve",
        action="store_true",
        help="start `suli serve` here (own process) over --os-url/--index/--acl-index",
    )
    ap.add_argument("--token", default=os.environ.get("SULI_TOKEN"), help="[env SULI_TOKEN]")
    ap.add_argument(
        "--os-url", default="http://127.0.0.1:9200", help="node URL(s), comma-separated"
    )
    ap.add_argument("--index", default="suli-items", help="the alias the service searches")
    ap.add_argument("--acl-index", help="its ACL index [default: SULI_ACL_INDEX or suli-acl]")
    ap.add_argument("--queries", type=int, default=100, help="how many queries to loop over")
    ap.add_argument("--queries-file", help="one query per line [default: NFCorpus test]")
    ap.add_argument("--levels", type=int, nargs="+", default=list(LEVELS))
    ap.add_argument("--seconds", type=float, default=30.0, help="measured, per side and level")
    ap.add_argument("--warmup", type=float, default=3.0, help="unmeasured, before each block")
    ap.add_argument("--blocks", type=int, default=2, help="alternating blocks per level")
    ap.add_argument("--depth", type=int, default=100, help="candidates per leg (as the service)")
    ap.add_argument("--out", help="also write the JSON report to this file")
    args = ap.parse_args(argv)
    if not args.token:
        ap.error("--token: a Suli API token is needed (or set SULI_TOKEN)")
    if min(args.levels) < 1 or args.seconds <= 0 or args.warmup < 0 or args.blocks < 1:
        ap.error("--levels must be >= 1, --seconds > 0, --warmup >= 0, --blocks >= 1")
    from bench.overhead import query_vectors
    from suli.errors import SuliError
    from suli.settings import Settings

    os_urls = [u.strip() for u in args.os_url.split(",") if u.strip()]
    acl_index = args.acl_index or Settings().acl_index
    try:
        vis = visibility_of_token(os_urls[0], args.index, acl_index, args.token)
    except SuliError as err:  # a bad token or ACL index: one line, exit 2
        ap.error(f"--token: {err}")
    queries = _queries(args)
    vectors = query_vectors(queries)
    with contextlib.ExitStack() as stack:
        suli_url = args.suli_url or stack.enter_context(
            suli_service(
                {"SULI_OPENSEARCH_URL": ",".join(os_urls), "SULI_INDEX_ALIAS": args.index,
                 "SULI_ACL_INDEX": acl_index, "SULI_CANDIDATE_DEPTH": str(args.depth)}
            )
        )  # fmt: skip
        report = run_levels(
            suli_url, args.token, os_urls, args.index, queries, vectors, vis,
            levels=args.levels, seconds=args.seconds, warmup=args.warmup, blocks=args.blocks,
            depth=args.depth,
        )  # fmt: skip
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return report


if __name__ == "__main__":
    main()
