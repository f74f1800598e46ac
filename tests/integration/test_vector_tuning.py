"""The vector knobs on the real node: ef_search in the k-NN clause, the sq encoder, drift notes."""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import pytest
from opensearchpy import OpenSearch

import mappings
from indexer.inventory import status
from suli.backends.base import LegQuery
from suli.backends.opensearch import OpenSearchBackend, bodies
from suli.backends.opensearch.hnsw import Hnsw
from suli.models import Filters, Item
from suli.settings import Settings
from suli.visibility import Visibility

DIM = 16
READER = Visibility("ws", "prn_reader", frozenset({"brd_a"}))  # sees brd_a, not brd_b
# Hits a Lucene k-NN query with k=5 and ef_search=25 answers, by major version (size 100).
HITS_FOR_K5_EF25 = {2: 25, 3: 5}


def loaded(url: str, alias: str, **knobs: object) -> tuple[OpenSearchBackend, np.ndarray]:
    """60 items, even ones on brd_a (visible to READER), odd ones on brd_b; their vectors."""
    settings = Settings(opensearch_url=url, index_alias=alias, acl_index=f"{alias}-acl", **knobs)
    backend = OpenSearchBackend(settings, DIM, "test-random")
    backend.ensure_ready()
    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((60, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    items = [
        Item(f"itm_{i}", "ws", f"item {i}", board="brd_a" if i % 2 == 0 else "brd_b")
        for i in range(60)
    ]
    assert not backend.upsert(list(zip(items, vecs.tolist(), strict=True))).rejected
    backend.refresh()
    return backend, vecs


def exact_visible(vecs: np.ndarray, q: np.ndarray, k: int) -> list[str]:
    order = [i for i in np.argsort(-(vecs @ q), kind="stable") if i % 2 == 0]
    return [f"itm_{i}" for i in order[:k]]


def test_ef_search_is_accepted_and_the_leg_keeps_its_depth_inside_the_filter(
    opensearch_url: str, index_name: str, os_client: OpenSearch
) -> None:
    backend, vecs = loaded(opensearch_url, index_name, ef_search=25)
    q = vecs[7]  # an invisible item's vector: its neighbours are mixed
    got = backend.search(LegQuery(READER, Filters(), None, q.tolist(), 5))
    assert not got.errors
    ids = [h.id for h in got.vector]
    assert len(ids) == 5  # exactly the depth asked, not ef_search
    boards = {it.board for it in backend.get_many(READER, ids).values()}
    assert boards == {"brd_a"}  # the filter is inside k-NN
    assert ids == exact_visible(vecs, q, 5)
    # The body Suli sends, as the node takes it: ef_search accepted, depth hits, all visible.
    sent = bodies.vector_leg(LegQuery(READER, Filters(), None, q.tolist(), 5), 25)
    assert sent["query"]["knn"]["vector"]["method_parameters"] == {"ef_search": 25}
    hits = os_client.search(index=index_name, body=sent)["hits"]["hits"]
    assert [h["fields"]["id"][0] for h in hits] == ids  # doc values: no `_source` read
    # Why `size` bounds the leg: on Lucene the 2.x node answers max(k, ef_search) hits, the 3.x
    # node k; the line is read from the node, since that is where the behaviour differs.
    body = {"size": 100, "query": {"knn": {"vector": {
        "vector": q.tolist(), "k": 5, "method_parameters": {"ef_search": 25},
        "filter": {"term": {"board": "brd_a"}}}}}}  # fmt: skip
    answered = os_client.search(index=index_name, body=body)["hits"]["hits"]
    major = int(os_client.info()["version"]["number"].split(".", 1)[0])
    assert major in HITS_FOR_K5_EF25, f"no known k-NN answer size for OpenSearch {major}.x"
    assert len(answered) == HITS_FOR_K5_EF25[major]
    # Either way the first k are the exact visible nearest neighbours, as the leg returned.
    assert [h["_source"]["id"] for h in answered[:5]] == ids
    backend.close()


def test_an_sq_encoded_index_serves_suli_search_and_drift_is_reported(
    opensearch_url: str,
    make_index_name: Callable[[], str],
    os_client: OpenSearch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    alias = make_index_name()
    knobs = {"vector_encoder": "sq", "hnsw_m": 8, "hnsw_ef_construction": 64}
    backend, vecs = loaded(opensearch_url, alias, **knobs)
    index = backend.current_index()
    assert index is not None
    field = os_client.indices.get_mapping(index=index)[index]["mappings"]["properties"]["vector"]
    assert Hnsw.of_mapping(field) == Hnsw(8, 64, "sq")
    for i in (0, 10, 42):  # an item's own vector finds it first
        got = backend.search(LegQuery(READER, Filters(), None, vecs[i].tolist(), 10))
        assert not got.errors
        assert got.vector[0].id == f"itm_{i}"
        found = backend.get_many(READER, [h.id for h in got.vector])
        assert len(got.vector) == 10 and {it.board for it in found.values()} == {"brd_a"}
    expected = (mappings.mapping_version(), "test-random", DIM)
    same = status(os_client, alias, expected, hnsw=Hnsw(8, 64, "sq"))
    assert not [n for n in same["notes"] if "vector graph" in n]
    other = status(os_client, alias, expected, hnsw=Hnsw())
    assert [n for n in other["notes"] if "vector graph" in n and "suli reindex" in n]
    # A start with other settings serves the index as it is, and says so in the log.
    plain = Settings(opensearch_url=opensearch_url, index_alias=alias, acl_index=f"{alias}-acl")
    with caplog.at_level(logging.WARNING, logger="suli.backends.opensearch"):
        started = OpenSearchBackend(plain, DIM, "test-random")
        started.ensure_ready()
        started.close()
    assert any("m=8" in r.message and "suli reindex" in r.message for r in caplog.records)
    backend.close()


def test_status_says_when_an_index_is_split_finer_than_the_layout_rule(
    opensearch_url: str, make_index_name: Callable[[], str], os_client: OpenSearch
) -> None:
    """Two primaries for 60 small items: `suli status` names the rule's one primary and the
    command; an index of one primary gets no such note."""
    expected = (mappings.mapping_version(), "test-random", DIM)
    split = make_index_name()
    loaded(opensearch_url, split, shards=2)[0].close()
    notes = status(os_client, split, expected)["notes"]
    assert [n for n in notes if "2 primary shards" in n and "--shards 1" in n], notes
    whole = make_index_name()
    loaded(opensearch_url, whole, shards=1)[0].close()
    assert not [n for n in status(os_client, whole, expected)["notes"] if "primary" in n]
