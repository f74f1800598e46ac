"""Part of the backend contract suite on a secured node, each call made by the least-privilege
user that makes it in a deployment: the admin creates the indices and writes principals and
ACLs (also the suite's ACL changes), the indexer writes items, the query role answers every
read. Rules: visibility on every read path, ACL changes on the next query, filters, tenants."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from contract.helpers import MakeSearcher, World, world_factory
from contract.rules_filters import FilterRules
from contract.rules_tenants import TenantRules
from contract.rules_visibility import AclChangeRules, VisibilityRules
from secured_node import SecuredNode, drop, secured_node, world_names

from suli.backends.opensearch import OpenSearchBackend
from suli.embedding import Embedder

__all__ = ["secured_node"]  # the session fixture, imported so pytest finds it here

# Which user sends what (the rest are reads: the query role's).
ADMIN_CALLS = frozenset(
    {"ensure_ready", "put_acls", "put_principals", "claim_principal", "put_token",
     "revoke_token", "build_visibility"}
)  # fmt: skip
INDEXER_CALLS = frozenset({"upsert", "delete", "stored_hashes", "refresh"})


class ByRole:
    """One world's three real backends, each call sent as the user whose role makes it."""

    def __init__(self, query: Any, indexer: Any, admin: Any) -> None:
        self.query, self.indexer, self.admin = query, indexer, admin

    def __getattr__(self, name: str) -> Any:
        if name in ADMIN_CALLS:
            return getattr(self.admin, name)
        if name in INDEXER_CALLS:
            return getattr(self.indexer, name)
        return getattr(self.query, name)

    def close(self) -> None:
        for backend in (self.query, self.indexer, self.admin):
            backend.close()


class TestSecuredContract(VisibilityRules, AclChangeRules, FilterRules, TenantRules):
    @pytest.fixture(scope="class")
    @classmethod
    def make_searcher(cls, secured_node: SecuredNode) -> Iterator[MakeSearcher]:
        made: list[tuple[ByRole, tuple[str, str]]] = []

        def build(emb: Embedder, overrides: dict[str, Any]) -> World:
            names = world_names()

            def backend(user: str) -> OpenSearchBackend:
                settings = secured_node.settings(user, names, **overrides)
                return OpenSearchBackend(settings, emb.dimension, emb.name)

            split = ByRole(backend("suli-query"), backend("suli-indexer"), backend("suli-admin"))
            made.append((split, names))
            split.admin.ensure_ready()
            return World(split, emb, split.query.settings, split.indexer.refresh)

        yield world_factory(build)
        client = secured_node.admin_client()
        for split, names in made:
            split.close()
            drop(client, names)
        client.close()
