"""Faults on the real 3-node cluster (3 shards, 1 replica): a node killed in the middle of
`suli index`, a storm of 429s from a tiny write queue, a document the mapping refuses, and a
rolling restart under a query loop. Every test counts what was lost, duplicated or failed.

A node restart costs 30-90 s of CPU-bound JVM start on a 2-core machine, so the tests share
them, in file order: the node killed mid-index (n3) comes back with a tiny write queue, which
the storm test uses (its fixture restarts n3 only when run alone), and the rolling restart
brings every node back with the default settings (else the storm fixture's teardown does).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from opensearchpy import OpenSearch
from ops_support import (
    QueryLoop,
    duplicate_ids,
    env_for,
    item_line,
    items,
    restart,
    seed,
    settings_for,
    stored,
    write_queue_sizes,
    wrong_content,
)

import devcluster
from indexer.pipeline import BATCH, WRITE_BATCH, Summary, index_items, write_rejects
from suli.backends.opensearch import OpenSearchBackend
from suli.embedding import FakeEmbedder
from suli.models import Item

pytestmark = pytest.mark.cluster

TINY_NODE = 2  # n3
TINY_QUEUE = {"thread_pool.write.queue_size": 1, "node.processors": 1}
DEFAULT_QUEUE = 10_000


def _client(cluster: devcluster.Cluster) -> OpenSearch:
    return OpenSearch(hosts=cluster.urls, timeout=60, max_retries=3, retry_on_timeout=True)


def _count(client: OpenSearch, alias: str) -> int:
    try:
        return int(client.count(index=alias)["count"])
    except Exception:  # the alias does not exist yet, or the node just died: not yet
        return 0


def _wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _check_exactly(client: OpenSearch, alias: str, expected: dict[str, Item]) -> None:
    client.indices.refresh(index=alias)
    docs = stored(client, alias)
    assert sorted(set(expected) - set(docs)) == [], "lost items"
    assert sorted(set(docs) - set(expected)) == [], "unexpected items"
    assert duplicate_ids(client, alias) == []
    assert client.count(index=alias)["count"] == len(expected)
    assert wrong_content(docs, expected) == []


def test_node_killed_mid_index_loses_and_duplicates_nothing(
    three_node_cluster: devcluster.Cluster,
    make_index_name: Callable[[], str],
    tmp_path: Path,
) -> None:
    cluster = three_node_cluster
    cluster.wait_green()
    s = settings_for(cluster.urls, make_index_name(), tmp_path)
    data = items(1000)
    lines = [item_line(it) + "\n" for it in data]
    # Enough lines for one full write (and a batch more) before the kill; the rest after it.
    first = WRITE_BATCH + 2 * BATCH
    rejects = tmp_path / "rejects.jsonl"
    suli = [sys.executable, "-c", "from cli.main import cli; cli()"]
    out_path, err_path = tmp_path / "out.json", tmp_path / "err.log"
    with out_path.open("w") as out, err_path.open("w") as err:  # files: a full pipe would stall it
        proc = subprocess.Popen(
            [*suli, "index", "-", "--json", "--rejects", str(rejects)],
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=err,
            text=True,
            env={**os.environ, **env_for(s)},
        )
    client = _client(cluster)
    victim = None
    try:
        assert proc.stdin is not None
        proc.stdin.writelines(lines[:first])
        proc.stdin.flush()
        # Mid-run for sure: one write landed, the indexer holds more and waits on stdin.
        _wait_for(lambda: _count(client, s.index_alias) >= WRITE_BATCH, 240, "the first items")
        victim = TINY_NODE
        cluster.kill(victim)
        assert proc.poll() is None, "the indexer finished before the node was killed"
        proc.stdin.writelines(lines[first:])
        proc.stdin.close()
        proc.wait(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
        if victim is not None:
            cluster.start(victim, extra=TINY_QUEUE)  # for the storm test that follows
    assert proc.returncode == 0, err_path.read_text()[-2000:]
    summary = json.loads(out_path.read_text())
    assert (summary["read"], summary["indexed"], summary["rejected"]) == (len(data), len(data), 0)
    assert not rejects.exists()
    cluster.wait_green(timeout=300)
    survivors = _client(cluster)
    _check_exactly(survivors, s.index_alias, {it.id: it for it in data})
    survivors.close()
    client.close()


@pytest.fixture(scope="module")
def tiny_queue_node(three_node_cluster: devcluster.Cluster) -> Iterator[int]:
    """n3 with a one-slot write queue on one processor; the default afterwards."""
    cluster = three_node_cluster
    cluster.wait_green()
    if write_queue_sizes(cluster.urls)["n3"] != 1:  # else the node-kill test left it so
        restart(cluster, TINY_NODE, extra=TINY_QUEUE)
    assert write_queue_sizes(cluster.urls)["n3"] == 1
    yield TINY_NODE
    if cluster.pid(TINY_NODE) is None:
        cluster.start(TINY_NODE)
        cluster.wait_green(timeout=300)
    if write_queue_sizes(cluster.urls).get("n3") != DEFAULT_QUEUE:
        restart(cluster, TINY_NODE)


def _rejected_writes(cluster: devcluster.Cluster) -> int:
    client = _client(cluster)
    try:
        rows = client.cat.thread_pool(
            thread_pool_patterns="write", format="json", h="node_name,rejected"
        )
    finally:
        client.close()
    return sum(int(r["rejected"]) for r in rows)


def test_write_queue_storm_backs_off_and_loses_nothing(
    three_node_cluster: devcluster.Cluster,
    tiny_queue_node: int,
    make_index_name: Callable[[], str],
    tmp_path: Path,
) -> None:
    cluster = three_node_cluster
    s = settings_for(cluster.urls, make_index_name(), tmp_path)
    embedder = FakeEmbedder()
    setup = OpenSearchBackend(s, embedder.dimension, embedder.name)
    setup.ensure_ready()
    data = items(1200)
    # The validator refuses every value we know the mapping refuses, so this item is built in
    # code (as a library caller could): a 40 kB tag is an "immense term" Lucene will not index.
    refused = Item("bad_tag", data[0].workspace, "refused by the mapping", tags=("x" * 40_000,))
    senders = 6
    parts: list[list[tuple[int, Item]]] = [[] for _ in range(senders)]
    for n, it in enumerate([*data, refused], start=1):
        parts[n % senders].append((n, it))
    summaries: list[Summary] = []
    errors: list[BaseException] = []
    rejected_before = _rejected_writes(cluster)

    def send(part: list[tuple[int, Item]]) -> None:
        backend = OpenSearchBackend(s, embedder.dimension, embedder.name)
        try:
            summaries.append(index_items(part, backend, embedder, batch_size=32, write_size=32))
        except BaseException as e:  # surfaced below: a thread must not swallow it
            errors.append(e)
        finally:
            backend.close()

    threads = [threading.Thread(target=send, args=(p,)) for p in parts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert errors == []
    assert len(summaries) == senders
    retried = sum(sm.retried for sm in summaries)
    rejected = [r for sm in summaries for r in sm.rejected]
    assert _rejected_writes(cluster) > rejected_before  # OpenSearch really refused writes
    assert retried > 0  # ... and the indexer re-sent them
    assert sum(sm.read for sm in summaries) == len(data) + 1
    assert sum(sm.indexed for sm in summaries) == len(data)
    rejects = tmp_path / "storm.rejects.jsonl"
    write_rejects(str(rejects), rejected)
    lines = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert [x["id"] for x in lines] == ["bad_tag"]
    assert "immense term" in lines[0]["reason"] or "max_bytes_length" in lines[0]["reason"]
    _check_exactly(setup.client, s.index_alias, {it.id: it for it in data})
    setup.close()


def test_rolling_restart_fails_no_query(
    three_node_cluster: devcluster.Cluster,
    make_index_name: Callable[[], str],
    tmp_path: Path,
) -> None:
    cluster = three_node_cluster
    cluster.wait_green()
    s = settings_for(cluster.urls, make_index_name(), tmp_path)
    embedder = FakeEmbedder()
    backend = OpenSearchBackend(s, embedder.dimension, embedder.name)
    seed(backend, embedder, items(400))
    loop = QueryLoop(s)
    loop.start()
    answered: list[int] = []  # queries answered while each node was restarting
    try:
        _wait_for(lambda: loop.stats.ok > 0, 60, "the first query")
        for i in range(cluster.spec.nodes):
            before = loop.stats.ok
            restart(cluster, i)  # default settings: this also undoes the storm's tiny queue
            answered.append(loop.stats.ok - before)
    finally:
        stats = loop.stop()
        backend.close()
    assert stats.failures == []
    assert all(n > 0 for n in answered), answered
    assert set(write_queue_sizes(cluster.urls).values()) == {DEFAULT_QUEUE}
