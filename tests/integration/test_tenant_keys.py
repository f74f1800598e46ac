"""Upgrading an OpenSearch index of bare-id `_id`s (mapping v3) to per-workspace keys.

Reads keep working on the old index, writes are refused with the command to run, and
`suli reindex` (either copy method) moves every document to `workspace/id`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from opensearchpy import OpenSearch, helpers

import mappings
from indexer.reindex import Reindexer
from suli.backends.opensearch import OpenSearchBackend
from suli.backends.opensearch.bodies import item_to_doc
from suli.embedding import FakeEmbedder
from suli.errors import BackendUnavailable
from suli.models import Item
from suli.settings import Settings
from suli.visibility import Visibility

ITEMS = [Item(f"itm_{n}", "ws_a" if n % 2 else "ws_b", f"note {n}") for n in range(40)]


@pytest.mark.parametrize("method", ["scan", "server"])
def test_reindex_moves_a_bare_id_index_to_workspace_keys(
    opensearch_url: str, make_index_name: Callable[[], str], tmp_path: Path, method: str
) -> None:
    alias = make_index_name()
    s = Settings(
        opensearch_url=opensearch_url, index_alias=alias, acl_index=f"{alias}-acl", home=tmp_path
    )
    client = OpenSearch(hosts=[opensearch_url])
    emb = FakeEmbedder()
    body = mappings.items_index(emb.dimension, model=emb.name)
    body["mappings"]["_meta"]["mapping_version"] = 3
    old = f"{alias}-v3-20250101000000000000"
    client.indices.create(index=old, body=body)
    client.indices.put_alias(index=old, name=alias)
    vectors = emb.embed_documents([it.embed_text() for it in ITEMS])
    actions = [
        {"_index": old, "_id": it.id, "_source": item_to_doc(it, vectors[n])}
        for n, it in enumerate(ITEMS)
    ]
    helpers.bulk(client, actions, refresh=True)
    # A board ACL stored under the global key of before.
    client.indices.create(index=s.acl_index, body=mappings.acl_index())
    legacy_acl = {"doc_type": "acl", "board": "brd_x", "workspace": "ws_a", "name": "X",
                  "members": ["prn_p"], "groups": []}  # fmt: skip
    client.index(index=s.acl_index, id="acl:brd_x", body=legacy_acl, refresh=True)

    backend = OpenSearchBackend(s, emb.dimension, emb.name)
    backend.ensure_ready()  # moves the ACL to its per-workspace key
    assert backend.acl("ws_a", "brd_x") is not None and backend.acl("ws_b", "brd_x") is None
    assert len(backend.acls("ws_a")) == 1
    vis_a = Visibility("ws_a", "prn_p", frozenset())
    assert set(backend.get_many(vis_a, ["itm_1", "itm_2"])) == {"itm_1"}  # reads work
    with pytest.raises(BackendUnavailable, match="suli reindex"):
        backend.upsert([(ITEMS[1], vectors[1])])
    with pytest.raises(BackendUnavailable, match="suli reindex"):
        backend.delete("ws_a", ["itm_1"])

    engine = Reindexer(backend, emb, tmp_path / "rejects")
    report = engine.run(engine.plan(method=method))
    assert report.verification["problems"] == []
    client.indices.refresh(index=alias)
    hits = client.search(index=alias, body={"size": 100, "_source": ["id", "workspace"]})
    stored = {h["_id"]: h["_source"] for h in hits["hits"]["hits"]}
    assert stored == {f"{it.workspace}/{it.id}": {"id": it.id, "workspace": it.workspace}
                      for it in ITEMS}  # fmt: skip

    # Writes go in now, by key: the same id in the other workspace is a second item.
    fresh = OpenSearchBackend(s, emb.dimension, emb.name)
    twin = Item("itm_1", "ws_b", "twin of note 1")
    assert fresh.upsert([(ITEMS[1], vectors[1]), (twin, vectors[1])]).indexed == (
        "itm_1",
        "itm_1",
    )
    fresh.refresh()
    assert fresh.count() == len(ITEMS) + 1
    out = fresh.delete("ws_a", ["itm_1", "itm_2"])  # itm_2 is ws_b's
    assert (out.indexed, out.missing) == (("itm_1",), ("itm_2",))
    fresh.refresh()
    assert fresh.count() == len(ITEMS)
    for b in (fresh, backend):
        b.close()
    client.close()
