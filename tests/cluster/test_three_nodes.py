"""A replicated index on the local 3-node cluster survives losing a node, which then rejoins."""

from __future__ import annotations

import time
from collections.abc import Iterator
from uuid import uuid4

import pytest
from opensearchpy import OpenSearch, helpers
from ops_support import index_health

import devcluster

DOCS = 300


def _client(urls: list[str]) -> OpenSearch:
    return OpenSearch(hosts=urls, timeout=30, max_retries=3, retry_on_timeout=True)


@pytest.fixture
def replicated_index(three_node_cluster: devcluster.Cluster) -> Iterator[str]:
    """A 3-shard index with one replica holding DOCS documents, deleted afterwards."""
    client = _client(three_node_cluster.urls)
    name = f"test-{uuid4().hex}"
    client.indices.create(
        index=name,
        body={"settings": {"index": {"number_of_shards": 3, "number_of_replicas": 1}}},
    )
    actions = ({"_index": name, "_id": str(i), "_source": {"n": i}} for i in range(DOCS))
    assert helpers.bulk(client, actions, refresh=True) == (DOCS, [])
    yield name
    index_health(client, name, {"green", "yellow"}, 3, 180)  # every node back before cleanup
    client.indices.delete(index=name)
    client.close()


def _all_ids(client: OpenSearch, name: str) -> set[str]:
    response = client.search(index=name, body={"query": {"match_all": {}}, "size": DOCS + 10})
    assert response["_shards"]["failed"] == 0
    return {hit["_id"] for hit in response["hits"]["hits"]}


def test_replicated_index_survives_a_killed_node(
    three_node_cluster: devcluster.Cluster, replicated_index: str
) -> None:
    cluster = three_node_cluster
    client = _client(cluster.urls)
    health = cluster.wait_green(timeout=120)
    assert (health["status"], health["number_of_nodes"]) == ("green", 3)
    index_health(client, replicated_index, {"green"}, 3, 120)  # rebalancing done
    # The balancer may start moving a copy again right after (another test's index came or
    # went): wait until every copy is started, on all three nodes, before the kill.
    deadline = time.monotonic() + 120
    while True:
        shards = client.cat.shards(index=replicated_index, format="json")
        states, holders = {s["state"] for s in shards}, {s["node"] for s in shards}
        if (states, holders) == ({"STARTED"}, {"n1", "n2", "n3"}) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert states == {"STARTED"}
    assert holders == {"n1", "n2", "n3"}
    assert client.count(index=replicated_index)["count"] == DOCS

    # Kill the elected cluster manager: the hardest node to lose.
    manager = client.cat.cluster_manager(format="json")[0]["node"]
    victim = int(manager.removeprefix("n")) - 1
    cluster.kill(victim)
    try:
        assert victim not in cluster.running()
        survivors = _client([u for i, u in enumerate(cluster.urls) if i != victim])
        health = index_health(survivors, replicated_index, {"yellow", "green"}, 2, 120)
        assert health["number_of_nodes"] == 2
        assert survivors.count(index=replicated_index)["count"] == DOCS
        assert _all_ids(survivors, replicated_index) == {str(i) for i in range(DOCS)}
        assert survivors.cat.cluster_manager(format="json")[0]["node"] != manager
    finally:
        cluster.start(victim)  # the node rejoins even when an assertion above failed
    health = index_health(client, replicated_index, {"green"}, 3, 180)
    assert (health["status"], health["number_of_nodes"]) == ("green", 3)
    names = {n["name"] for n in client.cat.nodes(format="json")}
    assert names == {"n1", "n2", "n3"}
    assert client.count(index=replicated_index)["count"] == DOCS
    survivors.close()
    client.close()
