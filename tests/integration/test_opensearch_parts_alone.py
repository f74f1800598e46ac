"""The OpenSearch backend's parts work alone on a real node: each built over a `Connection` and
the parts it asks, with no `OpenSearchBackend` around them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from suli.backends.opensearch.client import Connection, counting
from suli.backends.opensearch.indices import Indices
from suli.backends.opensearch.reads import Reads
from suli.backends.opensearch.visibility import VisibilityUpkeep
from suli.backends.opensearch.workspaces import Workspaces
from suli.backends.opensearch.writes import Writes
from suli.embedding import FakeEmbedder
from suli.models import Item
from suli.settings import Settings
from suli.visibility import Visibility

EMB = FakeEmbedder()
ITEMS = [Item(f"itm_{n}", "ws_a", f"note {n}") for n in range(3)]


def _connection(url: str, alias: str, home: Path) -> Connection:
    s = Settings(opensearch_url=url, index_alias=alias, acl_index=f"{alias}-acl", home=home)
    return Connection(s, EMB.dimension, EMB.name)


def test_indices_writes_and_reads_as_parts_over_one_connection(
    opensearch_url: str, make_index_name: Callable[[], str], tmp_path: Path
) -> None:
    conn = _connection(opensearch_url, make_index_name(), tmp_path)
    try:
        indices = Indices(conn)
        indices.ensure_ready()
        index = indices.current_index()
        assert index is not None and index.startswith(f"{conn.alias}-v")
        assert indices.live_model() == EMB.name
        with counting(conn.client) as sent:
            assert indices.keyed(index)  # made here: known without reading the mapping
        assert sent == []

        workspaces = Workspaces(conn)
        writes = Writes(conn, indices, workspaces)
        vectors = EMB.embed_documents([it.embed_text() for it in ITEMS])
        out = writes.upsert(list(zip(ITEMS, vectors, strict=True)))
        assert sorted(out.indexed) == [it.id for it in ITEMS] and not out.rejected
        workspaces.refresh()

        reads = Reads(conn, VisibilityUpkeep(conn), indices, workspaces)
        assert reads.count() == len(ITEMS)
        vis = Visibility("ws_a", "prn_p", frozenset())
        assert set(reads.get_many(vis, ["itm_0", "itm_9"])) == {"itm_0"}
        assert set(reads.get_many(Visibility("ws_b", "prn_q", frozenset()), ["itm_0"])) == set()
    finally:
        conn.close()
