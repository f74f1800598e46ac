"""Helpers of the operations tests on the 3-node cluster: data, checks, restarts, query loops
(in-process, or over HTTP through a `suli serve` subprocess)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from e2e.served import Served, free_port, wait_ready
from opensearchpy import OpenSearch, helpers

import devcluster
from cli import sample
from suli.auth import create_token
from suli.backends.opensearch import OpenSearchBackend
from suli.backends.opensearch.bodies import doc_to_item, item_to_doc
from suli.embedding import Embedder, FakeEmbedder
from suli.models import Item, Principal
from suli.search_params import search_request
from suli.service import Searcher
from suli.settings import Settings

MARKER_GROUPS = 5
PER_MARKER = 4
PRINCIPAL = "prn_ana"  # sees workspace-wide items of the sample workspace


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Return once `check()` holds; fail naming `what` after `timeout` s (polled every 0.2 s)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def settings_for(urls: Sequence[str], alias: str, home: Path, replicas: int = 1) -> Settings:
    """Settings for all nodes, a test alias, 3 shards with 1 replica and the fake embedder."""
    return Settings(
        opensearch_url=",".join(urls),
        index_alias=alias,
        acl_index=f"{alias}-acl",
        shards=3,
        replicas=replicas,
        embedder="fake",
        home=home,
        # A cluster restarting nodes on a loaded 2-core machine can take longer than the 10 s
        # default to create an index or answer a bulk; searches are cut by their deadline.
        opensearch_timeout_s=60.0,
    )


def env_for(s: Settings) -> dict[str, str]:
    """The same settings as SULI_* variables, for a `suli` subprocess."""
    return {
        "SULI_OPENSEARCH_URL": s.opensearch_url or "",
        "SULI_INDEX_ALIAS": s.index_alias,
        "SULI_ACL_INDEX": s.acl_index,
        "SULI_SHARDS": str(s.shards),
        "SULI_REPLICAS": str(s.replicas),
        "SULI_EMBEDDER": s.embedder,
        "SULI_HOME": str(s.home),
        "SULI_OPENSEARCH_TIMEOUT_S": str(s.opensearch_timeout_s),
    }


def item_line(item: Item) -> str:
    """An item as an input JSON line for `suli index`."""
    data = asdict(item)
    for key in ("created_at", "updated_at", "last_activity_at"):
        data[key] = data[key].isoformat() if data[key] else None
    return json.dumps({k: v for k, v in data.items() if v is not None})


def marker_items() -> list[Item]:
    """Workspace-wide items whose titles carry a rare word: each marker query has known answers."""
    return [
        Item(
            id=f"mrk_{g}_{n}",
            workspace=sample.WORKSPACE,
            title=f"zq{g}marker runbook part {n}",
            body=f"Steps for the zq{g}marker drill, part {n}.",
            outcome="approved",
        )
        for g in range(MARKER_GROUPS)
        for n in range(PER_MARKER)
    ]


def marker_query(g: int) -> str:
    return f"zq{g}marker"


def items(n: int) -> list[Item]:
    """n sample items plus the marker items."""
    return sample.build(n).items + marker_items()


def seed(backend: OpenSearchBackend, embedder: Embedder, data: list[Item]) -> None:
    """Principals, ACLs and items, written through the alias; refreshed."""
    ws = sample.build(1)
    backend.ensure_ready()
    backend.put_principals(ws.principals)
    backend.put_acls(ws.acls)
    vectors = embedder.embed_documents([it.embed_text() for it in data])
    out = backend.upsert([(it, vectors[n]) for n, it in enumerate(data)])
    assert not out.rejected, list(out.rejected.items())[:3]
    backend.refresh()


def stored(client: OpenSearch, index: str) -> dict[str, dict[str, Any]]:
    """Every stored document by item id (a scroll over all shards; one workspace)."""
    docs: dict[str, dict[str, Any]] = {}
    for hit in helpers.scan(client, index=index, query={"query": {"match_all": {}}}, size=1000):
        item_id = hit["_source"]["id"]  # `_id` is the storage key workspace/id
        assert item_id not in docs, f"{item_id} returned twice"
        docs[item_id] = hit["_source"]
    return docs


def duplicate_ids(client: OpenSearch, index: str) -> list[str]:
    """Item ids held by more than one document (should be none)."""
    body = {
        "size": 0,
        "aggs": {"ids": {"terms": {"field": "id", "min_doc_count": 2, "size": 100}}},
    }
    resp = client.search(index=index, body=body)
    return [b["key"] for b in resp["aggregations"]["ids"]["buckets"]]


def as_stored(item: Item) -> Item:
    """What reading an item back gives (binaries keep no body text)."""
    return doc_to_item(item_to_doc(item, []))


def wrong_content(docs: dict[str, dict[str, Any]], expected: dict[str, Item]) -> list[str]:
    """Ids whose stored item differs from the expected one."""
    return [i for i, it in expected.items() if i in docs and doc_to_item(docs[i]) != as_stored(it)]


def restart(cluster: devcluster.Cluster, i: int, extra: dict[str, object] | None = None) -> None:
    """Stop node i cleanly, wait until the others see it gone, start it and wait for green."""
    cluster.stop(i)
    cluster.wait_ready("yellow", nodes=cluster.spec.nodes - 1, timeout=180)
    cluster.start(i, extra=extra)
    cluster.wait_green(timeout=300)


def index_health(
    client: OpenSearch, name: str, status: set[str], nodes: int, timeout: float
) -> dict[str, Any]:
    """Poll this index's health (not the cluster's: other tests' indices may be red meanwhile)
    until it has the status, the node count and no shard moving (green allows relocation)."""
    deadline = time.monotonic() + timeout
    health: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            health = client.cluster.health(index=name)
            settled = health["relocating_shards"] == 0 and health["initializing_shards"] == 0
            if health["status"] in status and health["number_of_nodes"] == nodes and settled:
                return health
        except Exception:  # a node is leaving or joining: ask again
            pass
        time.sleep(0.5)
    raise AssertionError(f"index {name} not {status} with {nodes} nodes after {timeout}s: {health}")


def primaries(client: OpenSearch, index: str) -> dict[str, int]:
    """How many started primary shards of the index each node holds (from _cat/shards)."""
    rows = client.cat.shards(index=index, format="json", h="prirep,state,node")
    held: dict[str, int] = {}
    for r in rows:
        if r["prirep"] == "p" and r["state"] == "STARTED":
            held[r["node"]] = held.get(r["node"], 0) + 1
    return held


def write_queue_sizes(urls: Sequence[str]) -> dict[str, int]:
    """Each node's write thread-pool queue size."""
    client = OpenSearch(hosts=list(urls), timeout=30)
    try:
        rows = client.cat.thread_pool(
            thread_pool_patterns="write", format="json", h="node_name,queue_size"
        )
    finally:
        client.close()
    return {r["node_name"]: int(r["queue_size"]) for r in rows}


@dataclass
class LoopStats:
    ok: int = 0
    failures: list[str] = field(default_factory=list)
    # (monotonic time the query ended, its latency in seconds), answered or failed
    samples: list[tuple[float, float]] = field(default_factory=list)

    def latencies(self, start: float, end: float) -> list[float]:
        """Latencies of the queries that ended between start and end."""
        return [lat for t, lat in self.samples if start <= t <= end]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (nearest rank) of values."""
    ordered = sorted(values)
    assert ordered, "no values"
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


class MarkerLoop(threading.Thread):
    """Runs the marker queries until stopped; a failure is any error the caller sees, a
    degraded answer, or a marker item missing from its query's results. `ask` is one query:
    the ids it returned and its degraded legs, or an exception."""

    def __init__(self, pause: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.pause = pause
        self.stats = LoopStats()
        self._halt = threading.Event()
        self.expected = {
            g: {f"mrk_{g}_{n}" for n in range(PER_MARKER)} for g in range(MARKER_GROUPS)
        }

    def ask(self, q: str) -> tuple[set[str], list[Any]]:
        raise NotImplementedError

    def close(self) -> None:
        """Release the loop's client once it has stopped."""

    def run(self) -> None:
        g = 0
        while not self._halt.is_set():
            q = marker_query(g)
            t0 = time.monotonic()
            try:
                got, degraded = self.ask(q)
                if degraded:
                    self.stats.failures.append(f"{q}: degraded {degraded}")
                elif not self.expected[g] <= got:
                    self.stats.failures.append(f"{q}: missing {sorted(self.expected[g] - got)}")
                else:
                    self.stats.ok += 1
            except Exception as e:  # every kind of failure counts, none may stop the loop
                self.stats.failures.append(f"{q}: {e.__class__.__name__}: {e}")
            done = time.monotonic()
            self.stats.samples.append((done, done - t0))
            g = (g + 1) % MARKER_GROUPS
            time.sleep(self.pause)

    def stop(self) -> LoopStats:
        self._halt.set()
        self.join(timeout=120)
        self.close()
        return self.stats


class QueryLoop(MarkerLoop):
    """The marker queries through the Searcher, in-process (each loop its own backend)."""

    def __init__(self, s: Settings, pause: float = 0.1) -> None:
        super().__init__(pause)
        embedder = FakeEmbedder()
        self.backend = OpenSearchBackend(s, embedder.dimension, embedder.name)
        self.searcher = Searcher(self.backend, embedder, s)
        self._principal: Principal | None = None

    def ask(self, q: str) -> tuple[set[str], list[Any]]:
        if self._principal is None:
            self._principal = self.searcher.principal(PRINCIPAL)
        r = self.searcher.search(self._principal, search_request(q, limit=25))
        return {x.id for x in r.results}, list(r.degraded)

    def close(self) -> None:
        self.backend.close()


class HttpFailure(Exception):
    """A non-200 answer of the service (its status, Retry-After and error code in the text)."""


class HttpQueryLoop(MarkerLoop):
    """The marker queries as GET /api/v1/search on a running `suli serve`, with one bearer
    token and one keep-alive connection; never re-sent (every non-200 answer is a failure)."""

    def __init__(self, url: str, token: str, pause: float = 0.1, timeout: float = 60.0) -> None:
        super().__init__(pause)
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout
        )

    def ask(self, q: str) -> tuple[set[str], list[Any]]:
        r = self.http.get("/api/v1/search", params={"q": q, "limit": 25})
        if r.status_code != 200:
            retry = r.headers.get("retry-after")
            raise HttpFailure(f"HTTP {r.status_code} (Retry-After {retry}): {r.text[:300]}")
        body = r.json()
        return {x["id"] for x in body["results"]}, list(body["degraded"])

    def close(self) -> None:
        self.http.close()


class LoopGroup:
    """Marker loops running at once, as concurrent users of the service."""

    def __init__(self, loops: Sequence[MarkerLoop]) -> None:
        self.loops = list(loops)

    def start(self) -> None:
        for loop in self.loops:
            loop.start()

    def ok(self) -> int:
        return sum(loop.stats.ok for loop in self.loops)

    def stop(self) -> LoopStats:
        """Stop all; their stats merged."""
        merged = LoopStats()
        for loop in self.loops:
            st = loop.stop()
            merged.ok += st.ok
            merged.failures += st.failures
            merged.samples += st.samples
        return merged


class QueryClients(LoopGroup):
    """n in-process QueryLoops (each its own client)."""

    def __init__(self, s: Settings, n: int, pause: float = 0.1) -> None:
        super().__init__([QueryLoop(s, pause) for _ in range(n)])


def principal_ids(n: int) -> list[str]:
    """n principals of the sample workspace (people, then agents, round again when n is
    larger): every one of them sees the workspace-wide marker items."""
    ids = [p.id for p in sample.build(1).principals]
    return [ids[k % len(ids)] for k in range(n)]


class HttpQueryClients(LoopGroup):
    """One HttpQueryLoop per token, all on the same service."""

    def __init__(self, url: str, tokens: Sequence[str], pause: float = 0.1) -> None:
        super().__init__([HttpQueryLoop(url, t, pause) for t in tokens])


@contextlib.contextmanager
def serving_cluster(
    s: Settings, log: Path, principals: Sequence[str], **env_settings: str
) -> Iterator[Served]:
    """A real `suli serve` subprocess (uvicorn, one worker) over the cluster of s, on a free
    loopback port, with a bearer token for each principal (made as every test makes them,
    suli.auth.create_token; stored in s's ACL index); stopped (SIGTERM, then kill) at the end.
    env_settings are more SULI_* settings (key in lower case)."""
    embedder = FakeEmbedder()
    backend = OpenSearchBackend(s, embedder.dimension, embedder.name)
    try:
        tokens = {p: create_token(backend, p) for p in principals}
    finally:
        backend.close()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SULI_")}
    env.update(env_for(s))
    env.update({f"SULI_{k.upper()}": v for k, v in env_settings.items()})
    suli = Path(sys.executable).with_name("suli")
    out = log.open("wb")
    proc = subprocess.Popen(
        [str(suli), "serve", "--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=out,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(proc, url, log)
        yield Served(url, port, proc, tokens, log)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
        out.close()


def latency_line(stats: LoopStats, start: float, end: float) -> str:
    """'<n> queries, p50 <ms> p99 <ms> max <ms>' for the queries that ended in the window."""
    lat = stats.latencies(start, end)
    return (
        f"{len(lat)} queries, p50 {percentile(lat, 50) * 1000:.0f} ms "
        f"p99 {percentile(lat, 99) * 1000:.0f} ms max {max(lat) * 1000:.0f} ms"
    )
