"""The OpenSearch backend is parts over one connection: the parts share its clients, a view
on one workspace's alias shares them too, and where items live is decided without I/O.

Clients are built but never asked anything (nothing listens on the URL)."""

from __future__ import annotations

from suli.backends.opensearch import OpenSearchBackend
from suli.backends.opensearch.client import Connection
from suli.backends.opensearch.indices import Indices, index_body
from suli.backends.opensearch.workspaces import Workspaces, workspace_alias
from suli.settings import Settings

URL = "http://127.0.0.1:9"  # the discard port: a request here would fail the test


def _settings(**kw: object) -> Settings:
    return Settings(opensearch_url=URL, index_alias="items", acl_index="items-acl", **kw)


def test_workspaces_part_places_items_without_asking_the_engine() -> None:
    shared = Workspaces(Connection(_settings(), 8))
    assert shared.items_index("ws_a") == "items"
    assert shared.items_header("ws_a") == {"index": "items"}

    isolated = Workspaces(Connection(_settings(isolate_workspaces=True), 8))
    own = workspace_alias("items", "ws_a")
    assert isolated.items_index("ws_a") == own
    assert isolated.items_header("ws_a") == {"index": own, "ignore_unavailable": True}

    view = isolated.view("ws_a")
    assert (view.alias, view.workspace, view.isolated) == (own, "ws_a", False)
    assert view.client is isolated.conn.client  # the same clients, not new ones
    assert view.write_client is isolated.conn.write_client
    assert index_body(view)["mappings"]["_meta"]["workspace"] == "ws_a"
    assert "workspace" not in index_body(isolated.conn)["mappings"]["_meta"]


def test_a_workspace_view_needs_no_mapping_read_before_writing() -> None:
    conn = Connection(_settings(isolate_workspaces=True), 8)
    Indices(Workspaces(conn).view("ws_a")).check_keys()  # made by this Suli: keyed, no request


def test_the_backend_composes_its_parts_over_one_connection() -> None:
    backend = OpenSearchBackend(_settings(isolate_workspaces=True), 8, "m")
    conn = backend.conn
    parts = (
        backend.visibility,
        backend.directory,
        backend.indices,
        backend.workspaces,
        backend.reads,
        backend.writes,
    )
    assert all(part.conn is conn for part in parts)
    assert backend.directory.visibility is backend.visibility
    assert backend.reads.visibility is backend.visibility
    assert backend.reads.indices is backend.writes.indices is backend.indices
    assert backend.reads.workspaces is backend.writes.workspaces is backend.workspaces
    assert (backend.client, backend.alias, backend.acl_index) == (conn.client, "items", "items-acl")
    assert (backend.dimension, backend.model, backend.isolated) == (8, "m", True)

    backend.settings = backend.settings.model_copy(update={"ef_search": 50})
    assert backend.reads.conn.settings.ef_search == 50  # what the vector leg is sent with
    view = backend.for_workspace("ws_a")
    assert view.conn is not conn and view.client is backend.client
    assert view.alias == workspace_alias("items", "ws_a") and not view.isolated
    assert view.reads.conn is view.conn and view.writes.indices is view.indices
    assert view.settings.ef_search == 50  # the view searches as the backend does
    assert backend.alias == "items"  # the backend itself is unchanged
    backend.close()
