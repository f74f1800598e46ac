"""A rolling upgrade 2.19.1 -> 3.5.0 of a live 3-node cluster, as an ops team does it, then
`suli reindex` onto an index the 3.x line created; queries and a stream of writes go on
throughout, and nothing is lost, duplicated or failed.

The cluster is this module's own (ports 9250-9252, transport 9255-9257 unless
SULI_TEST_UPGRADE_HTTP_PORT moves them), since it ends on another version than the shared
three-node cluster. Each step is devcluster.upgrade_node, the code of `suli cluster
upgrade-node`: replica allocation limited to primaries, flush, clean stop, start on 3.5.0 with
the same data path, allocation back, wait for green. The elected cluster manager goes last, so
the cluster elects a new manager once, onto a 3.5 node.

The queries go the way a user's do: 8 clients, each with its own principal's bearer token,
send GET /api/v1/search over HTTP to a real `suli serve` subprocess (uvicorn) that knows all
three node URLs. A failed query is any answer but a 200 (any 503 included: the test's clients
never retry, whether or not an answer carries Retry-After), a 200 with a degraded leg, or a
marker item missing. The one retry is inside the service: Suli's read client re-sends a
request once to another node on a connection error or a 502/503/504
(`make_client(max_retries=1)`), within the request's deadline. One in-process client beside
them (the search core, no HTTP) gives the same run's latency to compare with.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from opensearchpy import OpenSearch
from ops_support import (
    HttpQueryClients,
    QueryClients,
    duplicate_ids,
    env_for,
    items,
    latency_line,
    principal_ids,
    seed,
    serving_cluster,
    settings_for,
    stored,
    wait_for,
    wrong_content,
)
from write_stream import Feed, StreamIndexer, assert_exact, count_stream

import devcluster
from cli.main import cli
from indexer.inventory import live_index
from suli.backends.opensearch import OpenSearchBackend
from suli.embedding import FakeEmbedder

FROM, TO = "2.19.1", "3.5.0"
HTTP_PORT = int(os.environ.get("SULI_TEST_UPGRADE_HTTP_PORT", "9250"))
QUERY_CLIENTS = 8  # over HTTP through `suli serve`, one principal and token each
# Each client's pause between queries: 8 clients pausing 0.5 s ask about as many queries a
# second (~10) as the 4 in-process clients pausing 0.1 s did, so the cluster's load, and the
# node restarts that dominate the test's wall time, stay as they were.
PAUSE_S = 0.5
# One more client beside them calls the search core in-process (no HTTP, no token lookup), with
# the same pause: the latency of the same cluster in the same run, to compare the served ones to.
REFERENCE_CLIENTS = 1
WRITE_RATE = 20.0  # items per second, the indexer's steady feed
RESULTS = os.environ.get("SULI_TEST_UPGRADE_RESULTS")  # a file to append the figures to


@pytest.fixture
def old_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[devcluster.Cluster]:
    """A fresh 3-node 2.19.1 cluster; state in $SULI_CLUSTER_DIR/upgrade when set (CI stops it
    on exit), else in pytest's tmp."""
    base = os.environ.get("SULI_CLUSTER_DIR")
    state = Path(base) / "upgrade" if base else tmp_path_factory.mktemp("upgrade")
    devcluster.down(state, wipe=True)  # leftovers of an aborted run, maybe on 3.5 already
    try:
        cluster = devcluster.up(
            nodes=3, http_port=HTTP_PORT, transport_port=HTTP_PORT + 5, state=state, version=FROM
        )
    except devcluster.ClusterError as err:
        pytest.fail(f"could not start the 3-node {FROM} cluster: {err}", pytrace=False)
    try:
        yield cluster
    finally:
        devcluster.down(state, wipe=True)


def _versions(client: OpenSearch) -> dict[str, str]:
    return {n["name"]: n["version"] for n in client.cat.nodes(format="json", h="name,version")}


def _created_by(client: OpenSearch, index: str) -> str:
    """The version that created an index (`index.version.created`, in its readable form)."""
    got = client.indices.get_settings(
        index=index, params={"human": "true", "flat_settings": "true"}
    )
    return str(got[index]["settings"]["index.version.created_string"])


def _upgrade_order(client: OpenSearch) -> list[int]:
    """0-based node indices, the elected cluster manager last."""
    manager = client.cat.cluster_manager(format="json")[0]["node"]
    names = ["n1", "n2", "n3"]
    return [names.index(n) for n in names if n != manager] + [names.index(manager)]


def _report(line: str) -> None:
    print(line)
    if RESULTS:
        with open(RESULTS, "a") as out:
            out.write(line + "\n")


def _progress(what: str, clients: HttpQueryClients) -> None:
    """A line as the test goes (seen with -s): a slow run shows where its time went."""
    failed = sum(len(loop.stats.failures) for loop in clients.loops)
    print(f"[upgrade] {what}; queries ok {clients.ok()}, failed {failed}", flush=True)


# The node restarts are CPU-bound JVM starts: 4-9 min on the shared 2-core machine, more than
# pytest's 600 s default when it is loaded.
@pytest.mark.timeout(1200)
def test_rolling_upgrade_then_reindex_under_queries_and_writes(
    old_cluster: devcluster.Cluster, tmp_path: Path
) -> None:
    cluster = old_cluster
    s = settings_for(cluster.urls, "suli-upgrade", tmp_path)
    embedder = FakeEmbedder()
    backend = OpenSearchBackend(s, embedder.dimension, embedder.name)
    seed(backend, embedder, items(300))
    client = backend.client
    source = live_index(client, s.index_alias)
    assert source and _created_by(client, source) == FROM
    assert set(_versions(client).values()) == {FROM}

    # The service's own limits are not under test here: no client may be refused for its rate.
    limits = {"rate_per_minute": "100000", "rate_per_day": "10000000"}
    log = tmp_path / "serve.log"
    with serving_cluster(s, log, principal_ids(QUERY_CLIENTS), **limits) as served:
        clients = HttpQueryClients(served.url, list(served.tokens.values()), PAUSE_S)
        reference = QueryClients(s, REFERENCE_CLIENTS, PAUSE_S)
        feed = Feed(WRITE_RATE, "upg")
        writer = StreamIndexer(feed, OpenSearchBackend(s, embedder.dimension, embedder.name))
        clients.start()
        reference.start()
        writer.start()
        steps: list[str] = []
        try:
            assert writer.tracked.started.wait(60), "the indexer never wrote"
            start = time.monotonic()
            for i in _upgrade_order(client):
                t0 = time.monotonic()
                health = devcluster.upgrade_node(i, TO, cluster.root, timeout=300)
                assert health["status"] == "green"
                steps.append(f"{cluster.spec.names[i]} {time.monotonic() - t0:.0f}s")
                _progress(f"upgraded {steps[-1]}", clients)
            end = time.monotonic()
            assert set(_versions(client).values()) == {TO}
            assert devcluster.load(cluster.root).spec.version == TO  # type: ignore[union-attr]
            upgraded_ok = clients.ok()

            r_start = time.monotonic()
            out = CliRunner().invoke(cli, ["reindex", "--json"], env=env_for(s))
            r_end = time.monotonic()
            _progress(f"reindexed in {r_end - r_start:.0f}s", clients)
            # Some queries and writes after the swap too, so both are checked on the new index.
            swapped_ok, swapped_writes = clients.ok(), writer.tracked.completed
            wait_for(
                lambda: (
                    clients.ok() >= swapped_ok + QUERY_CLIENTS
                    and writer.tracked.completed > swapped_writes
                ),
                120,
                "queries and writes after the swap",
            )
        finally:
            summary = writer.finish()
            stats = clients.stop()
            ref = reference.stop()
        assert served.proc.poll() is None, log.read_text()  # the service ran throughout

    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)["report"]
    _report(
        f"rolling upgrade {FROM} -> {TO}, 3 nodes, replicas 1 ({end - start:.0f}s: "
        f"{', '.join(steps)}): {QUERY_CLIENTS} HTTP clients through suli serve, "
        f"{latency_line(stats, start, end)}; "
        f"suli reindex ({r_end - r_start:.0f}s, {report['copied']} copied, "
        f"{report['caught_up']} caught up, writes held {report['blocked_ms']:.0f} ms): "
        f"{latency_line(stats, r_start, r_end)}; "
        f"failed {len(stats.failures)} of {stats.ok + len(stats.failures)}; "
        f"writes {summary.read} lines at {WRITE_RATE:.0f}/s, "
        f"indexed {summary.indexed}, rejected {len(summary.rejected)} (malformed on purpose), "
        f"re-sent {writer.tracked.retries}"
    )
    _report(
        f"  same run, {REFERENCE_CLIENTS} in-process client (the core, no HTTP): upgrade "
        f"{latency_line(ref, start, end)}; reindex {latency_line(ref, r_start, r_end)}; "
        f"failed {len(ref.failures)} of {ref.ok + len(ref.failures)}"
    )
    assert stats.failures == [], stats.failures[:10]
    assert ref.failures == [], ref.failures[:10]
    assert upgraded_ok > 0 and clients.ok() > upgraded_ok  # queries ran in both phases
    assert report["verification"]["problems"] == []
    target = live_index(client, s.index_alias)
    assert target is not None and target == report["target"] != source
    assert _created_by(client, target) == TO
    count = count_stream(client, s.index_alias, feed, summary)
    assert_exact(count, feed)
    assert count.indexed > WRITE_RATE * (end - start) * 0.5  # the feed kept up
    expected = {it.id: it for it in items(300)}
    docs = stored(client, s.index_alias)
    assert sorted(set(expected) - set(docs)) == []
    assert wrong_content(docs, expected) == []
    assert duplicate_ids(client, s.index_alias) == []
    backend.close()
