"""The engine is real: OpenSearch 2.19.1 or 3.5.0 with k-NN, filtered Lucene HNSW, BM25, _msearch."""

from __future__ import annotations

import math
import os
import random
from typing import Any

import pytest
from opensearchpy import OpenSearch, RequestError, helpers

DIM = 8
KNN_PLUGIN = "org.opensearch.knn.plugin.KNNPlugin"
# The lines Suli supports and the Lucene each release ships (its release notes), written here
# apart from devcluster's table: a node of another line, or a mislabelled build, fails.
LUCENE_OF_LINE = {"2.19.1": "9.12.1", "3.5.0": "10.3.2"}
VECTOR_FIELD = {
    "type": "knn_vector",
    "dimension": DIM,
    "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
}


def _create(client: OpenSearch, name: str) -> None:
    client.indices.create(
        index=name,
        body={
            "settings": {"index": {"knn": True, "number_of_shards": 1, "number_of_replicas": 0}},
            "mappings": {
                "properties": {
                    "vec": VECTOR_FIELD,
                    "tag": {"type": "keyword"},
                    "title": {"type": "text"},
                    "body": {"type": "text"},
                }
            },
        },
    )


def _index(client: OpenSearch, name: str, docs: dict[str, dict[str, Any]]) -> None:
    actions = ({"_index": name, "_id": doc_id, "_source": src} for doc_id, src in docs.items())
    indexed, errors = helpers.bulk(client, actions, refresh=True)
    assert (indexed, errors) == (len(docs), [])


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.hypot(*a) * math.hypot(*b))


def _near(rng: random.Random, centre: list[float], noise: float) -> list[float]:
    return [c + rng.uniform(-noise, noise) for c in centre]


def _ids(response: dict[str, Any]) -> list[str]:
    return [hit["_id"] for hit in response["hits"]["hits"]]


def test_engine_is_a_supported_opensearch_line_with_knn_plugin(os_client: OpenSearch) -> None:
    info = os_client.info()
    assert info["version"]["distribution"] == "opensearch"
    number = info["version"]["number"]
    assert number in LUCENE_OF_LINE
    assert info["version"]["lucene_version"] == LUCENE_OF_LINE[number]
    # The line the session asked for (CI's lanes set it; a node started here reads it too).
    asked = os.environ.get("SULI_CLUSTER_VERSION")
    if asked:
        assert number == asked
    nodes = os_client.nodes.info(metric="plugins")["nodes"]
    assert nodes
    for node in nodes.values():
        assert KNN_PLUGIN in {plugin["classname"] for plugin in node["plugins"]}
    stats = os_client.transport.perform_request("GET", "/_plugins/_knn/stats")
    assert stats["_nodes"]["failed"] == 0


def test_knn_vector_mapping_is_lucene_hnsw_cosine(os_client: OpenSearch, index_name: str) -> None:
    _create(os_client, index_name)
    mapping = os_client.indices.get_mapping(index=index_name)[index_name]["mappings"]
    vec = mapping["properties"]["vec"]
    assert vec["type"] == "knn_vector"
    assert vec["dimension"] == DIM
    assert vec["method"]["name"] == "hnsw"
    assert vec["method"]["engine"] == "lucene"
    assert vec["method"]["space_type"] == "cosinesimil"
    with pytest.raises(RequestError):  # the dimension is enforced
        os_client.index(index=index_name, body={"vec": [1.0, 2.0]}, refresh=True)


@pytest.fixture
def filtered_corpus(os_client: OpenSearch, index_name: str) -> dict[str, dict[str, Any]]:
    """1000 docs: 990 `common` ones close to the query, 10 `rare` (1%) ones pointing away."""
    rng = random.Random(7)
    query = [1.0] * DIM
    away = [-1.0 if d % 2 else 1.0 for d in range(DIM)]
    docs = {}
    for i in range(1000):
        rare = i % 100 == 0
        vec = _near(rng, away, 0.8) if rare else _near(rng, query, 0.3)
        docs[f"d{i}"] = {"tag": "rare" if rare else "common", "vec": vec}
    _create(os_client, index_name)
    _index(os_client, index_name, docs)
    return docs


def _filtered_knn(client: OpenSearch, name: str, tag: str, k: int) -> dict[str, Any]:
    body = {
        "size": k,
        "query": {
            "knn": {"vec": {"vector": [1.0] * DIM, "k": k, "filter": {"term": {"tag": tag}}}}
        },
    }
    response: dict[str, Any] = client.search(index=name, body=body)
    return response


def _best(docs: dict[str, dict[str, Any]], tag: str, k: int) -> list[str]:
    matching = [d for d, src in docs.items() if src["tag"] == tag]
    return sorted(matching, key=lambda d: -_cosine(docs[d]["vec"], [1.0] * DIM))[:k]


@pytest.mark.parametrize("k", [5, 10])
def test_filter_inside_knn_returns_k_of_a_1_percent_match(
    os_client: OpenSearch, index_name: str, filtered_corpus: dict[str, dict[str, Any]], k: int
) -> None:
    # The rare docs are the farthest from the query: a post-filter over the top k would
    # return nothing, so k hits means the filter runs inside the k-NN search.
    response = _filtered_knn(os_client, index_name, "rare", k)
    ids = _ids(response)
    assert len(ids) == k
    assert all(filtered_corpus[d]["tag"] == "rare" for d in ids)
    assert ids == _best(filtered_corpus, "rare", k)


def test_filter_inside_knn_returns_only_matches_when_fewer_than_k(
    os_client: OpenSearch, index_name: str, filtered_corpus: dict[str, dict[str, Any]]
) -> None:
    ids = _ids(_filtered_knn(os_client, index_name, "rare", 25))
    assert sorted(ids) == sorted(d for d, src in filtered_corpus.items() if src["tag"] == "rare")


def test_filter_inside_knn_with_a_broad_match(
    os_client: OpenSearch, index_name: str, filtered_corpus: dict[str, dict[str, Any]]
) -> None:
    response = _filtered_knn(os_client, index_name, "common", 10)
    ids = _ids(response)
    assert len(ids) == 10
    assert all(filtered_corpus[d]["tag"] == "common" for d in ids)
    scores = [hit["_score"] for hit in response["hits"]["hits"]]
    assert scores == sorted(scores, reverse=True)


TEXT_DOCS = {
    "raft": {
        "title": "Raft consensus explained",
        "body": "Leader election and log replication keep replicas consistent.",
        "vec": [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
    },
    "paxos": {
        "title": "Notes on Paxos",
        "body": "A consensus protocol older than Raft, with proposers and acceptors.",
        "vec": [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
    },
    "bread": {
        "title": "Sourdough bread",
        "body": "Flour, water and salt; a long cold proof gives the best crumb.",
        "vec": [0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0],
    },
    "garden": {
        "title": "Planting tomatoes",
        "body": "Tomatoes need sun, warm soil and steady water.",
        "vec": [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0],
    },
}
BM25_QUERY = {
    "multi_match": {
        "query": "raft leader election",
        "fields": ["title^3", "body"],
        "type": "best_fields",
    }
}
BREAD_VECTOR = [0.0, 0.0, 0.9, 1.1, 0.0, 0.0, 0.0, 0.0]


@pytest.fixture
def text_index(os_client: OpenSearch, index_name: str) -> str:
    _create(os_client, index_name)
    _index(os_client, index_name, TEXT_DOCS)
    return index_name


def test_bm25_multi_match_ranks_the_expected_doc_first(
    os_client: OpenSearch, text_index: str
) -> None:
    response = os_client.search(index=text_index, body={"query": BM25_QUERY, "size": 10})
    ids = _ids(response)
    assert ids[0] == "raft"
    assert "paxos" in ids  # mentions Raft in its body, ranks below the title match
    assert not {"bread", "garden"} & set(ids)


def test_msearch_answers_bm25_and_knn_in_one_call(os_client: OpenSearch, text_index: str) -> None:
    knn = {"knn": {"vec": {"vector": BREAD_VECTOR, "k": 2}}}
    body = [
        {"index": text_index},
        {"query": BM25_QUERY, "size": 2},
        {"index": text_index},
        {"query": knn, "size": 2},
    ]
    responses = os_client.msearch(body=body)["responses"]
    assert len(responses) == 2
    assert [r.get("status") for r in responses] == [200, 200]
    assert _ids(responses[0])[0] == "raft"
    assert _ids(responses[1])[0] == "bread"
