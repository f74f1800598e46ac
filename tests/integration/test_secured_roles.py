"""Suli's least-privilege roles on a secured node: each part works with its role, and what a
role does not allow is refused by the cluster and reported as one clear line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import opensearchpy
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from secured_node import (
    ACL_PATTERN,
    ALIAS_PATTERN,
    USERS,
    SecuredNode,
    drop,
    secured_node,
    world_names,
)

from app.main import create_app
from cli import sample
from cli.main import cli
from devcluster.security import CLIENT_CERT_USER as CLIENT
from indexer.inventory import live_index
from suli.backends.opensearch import OpenSearchBackend, roles
from suli.embedding import FakeEmbedder
from suli.errors import BackendUnavailable, IndexingError
from suli.models import BoardAcl, Item
from suli.search_params import search_request
from suli.service import Searcher

__all__ = ["secured_node"]  # the session fixture, imported so pytest finds it here

N = 60
EMB = FakeEmbedder()


@dataclass
class Prepared:
    """A world made by the admin (indices, principals, ACLs) and the indexer (items)."""

    node: SecuredNode
    names: tuple[str, str]
    data: sample.SampleWorkspace
    tmp: Path

    def backend(self, user: str | None) -> OpenSearchBackend:
        settings = self.node.settings(user, self.names, home=self.tmp)
        return OpenSearchBackend(settings, EMB.dimension, EMB.name)

    def env(self, user: str | None) -> dict[str, str]:
        alias, acl = self.names
        extra = {"SULI_INDEX_ALIAS": alias, "SULI_ACL_INDEX": acl, "SULI_HOME": str(self.tmp)}
        return self.node.env(user, **extra)


@pytest.fixture
def prepared(secured_node: SecuredNode, tmp_path: Path) -> Iterator[Prepared]:
    world = Prepared(secured_node, world_names(), sample.build(N), tmp_path)
    admin = world.backend("suli-admin")
    admin.ensure_ready()
    admin.put_principals(world.data.principals)
    admin.put_acls(world.data.acls)
    indexer = world.backend("suli-indexer")
    vectors = EMB.embed_documents([it.embed_text() for it in world.data.items])
    out = indexer.upsert([(it, vectors[n]) for n, it in enumerate(world.data.items)])
    assert not out.rejected
    indexer.refresh()
    yield world
    for b in (admin, indexer):
        b.close()
    client = secured_node.admin_client()
    drop(client, world.names)
    client.close()


def _search_ids(backend: OpenSearchBackend, principal: str, query: str) -> list[str]:
    searcher = Searcher(backend, EMB, backend.settings)
    who = searcher.principal(principal)
    return [r.id for r in searcher.search(who, search_request(query)).results]


def _a_search(world: Prepared) -> tuple[str, str]:
    """A principal and a query that finds items: the first item's own title."""
    first = world.data.items[0]
    person = next(p.id for p in world.data.principals if p.kind == "person")
    return person, first.title


def test_the_query_role_searches_and_the_cluster_refuses_its_writes(prepared: Prepared) -> None:
    query = prepared.backend("suli-query")
    query.ensure_ready()  # the service's start-up: read-only on a ready deployment
    admin = prepared.backend("suli-admin")
    person, words = _a_search(prepared)
    expected = _search_ids(admin, person, words)
    assert expected and _search_ids(query, person, words) == expected
    acl = prepared.data.acls[0]
    with pytest.raises(BackendUnavailable) as refused:
        query.put_acls([BoardAcl(acl.board, acl.workspace, "renamed", (person,), ())])
    assert "403" in refused.value.message and "'suli-query'" in refused.value.message
    assert admin.acl(acl.workspace, acl.board) == acl  # nothing changed
    item = prepared.data.items[0]
    with pytest.raises((BackendUnavailable, IndexingError)) as write:
        query.upsert([(Item(item.id, item.workspace, "overwritten"), [0.0] * EMB.dimension)])
    assert "403" in write.value.message and "suli-query" in write.value.message
    assert {it.id: it.title for it in admin.all_items()}[item.id] == item.title


def test_the_query_service_over_http_is_ready_and_searches_with_the_query_role(
    prepared: Prepared, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in prepared.env("suli-query").items():
        monkeypatch.setenv(key, value)
    person, words = _a_search(prepared)
    with TestClient(create_app(), raise_server_exceptions=False) as http:
        assert http.get("/readyz").status_code == 200
    code = CliRunner().invoke(cli, ["search", words, "--as", person, "--json"])
    assert code.exit_code == 0, code.stderr
    ids = [r["id"] for r in json.loads(code.stdout)["results"]]
    assert ids == _search_ids(prepared.backend("suli-admin"), person, words)


def test_the_indexer_role_writes_items_but_no_acl_nor_index(prepared: Prepared) -> None:
    indexer = prepared.backend("suli-indexer")
    extra = Item("itm_secured_new", sample.WORKSPACE, "Pangolin migration notes")
    out = indexer.upsert([(extra, EMB.embed_documents([extra.embed_text()])[0])])
    assert not out.rejected
    indexer.refresh()
    person = next(p.id for p in prepared.data.principals if p.kind == "person")
    assert "itm_secured_new" in _search_ids(prepared.backend("suli-query"), person, "pangolin")
    assert not indexer.delete(sample.WORKSPACE, ["itm_secured_new"]).rejected
    acl = prepared.data.acls[0]
    with pytest.raises(BackendUnavailable, match="403"):
        indexer.put_acls([BoardAcl(acl.board, acl.workspace, "renamed", (), ())])
    fresh = OpenSearchBackend(
        prepared.node.settings("suli-indexer", world_names()), EMB.dimension, EMB.name
    )
    with pytest.raises(BackendUnavailable, match=r"403.*indices:admin/create"):
        fresh.ensure_ready()  # making Suli's indices is the admin's


def test_only_the_admin_role_changes_an_alias(prepared: Prepared) -> None:
    """#33: the plugin checks an `_aliases` action against its indices, not the alias name, so
    a role that may alias its own `<alias>-ws-*` index could put it behind the live alias (as
    the write index: every write, and half of every read, then went there). Alias changes and
    index creation are the admin's; the indexer still writes into a workspace's index."""
    alias = prepared.names[0]
    admin = prepared.node.admin_client()
    before = live_index(admin, alias)
    own = f"{alias}-ws-planted"
    admin.indices.create(index=own)  # an index the indexer's patterns cover
    indexer = prepared.backend("suli-indexer").client
    moves = [
        {"add": {"index": own, "alias": alias, "is_write_index": True}},
        {"add": {"index": own, "alias": alias}},
        {"remove": {"index": before, "alias": alias}},
    ]
    for move in moves:
        with pytest.raises(opensearchpy.AuthorizationException):
            indexer.indices.update_aliases(body={"actions": [move]})
    with pytest.raises(opensearchpy.AuthorizationException):
        indexer.indices.put_alias(index=own, name=alias)
    with pytest.raises(opensearchpy.AuthorizationException):  # made with the alias at once
        indexer.indices.create(index=f"{alias}-ws-made", body={"aliases": {alias: {}}})
    assert admin.indices.get_alias(name=alias) == {before: {"aliases": {alias: {}}}}
    assert not admin.indices.exists(index=f"{alias}-ws-made")
    admin.close()


def test_an_isolated_workspaces_index_is_made_by_the_admin_then_written_by_the_indexer(
    prepared: Prepared,
) -> None:
    def isolated(user: str) -> OpenSearchBackend:
        settings = prepared.node.settings(
            user, prepared.names, home=prepared.tmp, isolate_workspaces=True
        )
        return OpenSearchBackend(settings, EMB.dimension, EMB.name)

    first, later = (Item(f"itm_ws_{n}", "ws_isolated", f"Okapi note {n}") for n in (1, 2))
    vec = EMB.embed_documents([first.embed_text()])[0]
    indexer = isolated("suli-indexer")
    with pytest.raises(BackendUnavailable) as refused:
        indexer.upsert([(first, vec)])
    line = refused.value.message
    assert "403" in line and "'ws_isolated'" in line and "admin" in line, line
    assert not isolated("suli-admin").upsert([(first, vec)]).rejected  # makes its index
    assert not indexer.upsert([(later, vec)]).rejected  # into the index that now exists
    indexer.refresh()
    stored = {it.id for it in isolated("suli-admin").for_workspace("ws_isolated").all_items()}
    assert stored == {first.id, later.id}


def test_reindex_and_rollback_work_with_the_admin_role(prepared: Prepared) -> None:
    client = prepared.node.admin_client()
    alias = prepared.names[0]
    before = live_index(client, alias)
    runner = CliRunner()
    done = runner.invoke(cli, ["reindex", "--json"], env=prepared.env("suli-admin"))
    assert done.exit_code == 0, done.stderr
    report = json.loads(done.stdout)["report"]
    assert report["copied"] == N and report["verification"]["problems"] == []
    assert live_index(client, alias) == report["target"] != before
    person, words = _a_search(prepared)
    assert _search_ids(prepared.backend("suli-query"), person, words)
    back = runner.invoke(cli, ["reindex", "--rollback", "--json"], env=prepared.env("suli-admin"))
    assert back.exit_code == 0, back.stderr
    assert live_index(client, alias) == before
    refused = runner.invoke(cli, ["reindex", "--json"], env=prepared.env("suli-indexer"))
    assert refused.exit_code == 1 and "403" in refused.stderr
    assert "Traceback" not in refused.stderr and live_index(client, alias) == before
    client.close()


def test_a_client_certificate_user_searches_without_a_password(prepared: Prepared) -> None:
    by_cert = prepared.backend(None)  # CN=suli-client, mapped to the query role
    assert by_cert.settings.opensearch_user is None
    person, words = _a_search(prepared)
    assert _search_ids(by_cert, person, words) == _search_ids(
        prepared.backend("suli-admin"), person, words
    )
    with pytest.raises(BackendUnavailable, match="'suli-client'"):
        by_cert.put_acls(list(prepared.data.acls[:1]))


def test_suli_security_roles_prints_roles_yml_and_applies_the_same(
    secured_node: SecuredNode,
) -> None:
    import yaml  # a test-only reader: Suli writes roles.yml without a YAML library

    runner = CliRunner()
    patterns = ["--alias", ALIAS_PATTERN, "--acl-index", ACL_PATTERN]
    yml = runner.invoke(cli, ["security", "roles", *patterns], env=secured_node.env("admin"))
    rest = runner.invoke(
        cli, ["security", "roles", "--format", "rest", *patterns], env=secured_node.env("admin")
    )
    assert yml.exit_code == rest.exit_code == 0, yml.stderr + rest.stderr
    parsed = yaml.safe_load(yml.stdout)
    assert parsed.pop("_meta") == {"type": "roles", "config_version": 2}
    assert parsed == json.loads(rest.stdout)
    maps = [f"{role}={user}" for user, role in USERS.items()] + [f"suli_query={CLIENT}"]
    args = ["security", "roles", "--apply", *patterns, *(a for m in maps for a in ("--map", m))]
    applied = runner.invoke(cli, args, env=secured_node.env("admin"))
    assert applied.exit_code == 0, applied.stderr
    client = secured_node.admin_client()
    for name, body in parsed.items():
        got = client.transport.perform_request("GET", f"{roles.API}/roles/{name}")[name]
        assert got["cluster_permissions"] == body["cluster_permissions"]
        assert [
            {k: p[k] for k in ("index_patterns", "allowed_actions")}
            for p in got["index_permissions"]
        ] == body["index_permissions"]
    mapped = client.transport.perform_request("GET", f"{roles.API}/rolesmapping/{roles.QUERY}")
    assert mapped[roles.QUERY]["users"] == sorted(["suli-query", CLIENT])
    client.close()
    refused = runner.invoke(cli, args, env=secured_node.env("suli-query"))
    assert refused.exit_code == 1 and "403" in refused.stderr, refused.stderr
