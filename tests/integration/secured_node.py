"""One secured OpenSearch node per session (security plugin, TLS, users), for test_secured_*.

The node is `devcluster.up(secure=True)` on free ports in a state dir of the session, or the
running one of $SULI_TEST_SECURED_STATE (CI starts it with `suli cluster up --secure`). On it
the session applies Suli's roles (suli.backends.opensearch.roles) for the test names below and
creates one internal user per role, each with a random password; the client certificate's
user `suli-client` is mapped to the query role.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from opensearchpy import OpenSearch

import devcluster
from devcluster import security
from suli.backends.opensearch import roles
from suli.settings import Settings

STATE_ENV = "SULI_TEST_SECURED_STATE"
# Test names: every world gets `sitems-<uuid>` and `sacl-<uuid>`; the roles cover the patterns.
ALIAS_PATTERN, ACL_PATTERN = "sitems-*", "sacl-*"
USERS = {"suli-query": roles.QUERY, "suli-indexer": roles.INDEXER, "suli-admin": roles.ADMIN}


@dataclass(frozen=True)
class SecuredNode:
    cluster: devcluster.Cluster
    material: security.Material
    passwords: dict[str, str]  # internal user -> password

    @property
    def url(self) -> str:
        return self.cluster.url

    @property
    def admin_password(self) -> str:
        return self.material.admin_password

    def env(self, user: str | None = "suli-query", **extra: str) -> dict[str, str]:
        """SULI_* variables that connect as `user` (None: the client certificate)."""
        env = {
            "SULI_BACKEND": "opensearch",
            "SULI_OPENSEARCH_URL": self.url,
            "SULI_OPENSEARCH_CA_CERTS": str(self.material.ca),
            "SULI_EMBEDDER": "fake",
        }
        if user is None:
            cert, key = self.material.cert("client")
            env |= {
                "SULI_OPENSEARCH_CLIENT_CERT": str(cert),
                "SULI_OPENSEARCH_CLIENT_KEY": str(key),
            }
        else:
            password = self.admin_password if user == security.ADMIN_USER else self.passwords[user]
            env |= {"SULI_OPENSEARCH_USER": user, "SULI_OPENSEARCH_PASSWORD": password}
        return env | extra

    def settings(self, user: str | None, names: tuple[str, str], **overrides: Any) -> Settings:
        """Settings for `user` on the world `names` (alias, ACL index)."""
        env = self.env(user)
        values: dict[str, Any] = {
            "backend": "opensearch",
            "opensearch_url": self.url,
            "opensearch_ca_certs": env["SULI_OPENSEARCH_CA_CERTS"],
            "opensearch_user": env.get("SULI_OPENSEARCH_USER"),
            "opensearch_password": env.get("SULI_OPENSEARCH_PASSWORD"),
            "opensearch_client_cert": env.get("SULI_OPENSEARCH_CLIENT_CERT"),
            "opensearch_client_key": env.get("SULI_OPENSEARCH_CLIENT_KEY"),
            "index_alias": names[0],
            "acl_index": names[1],
            "embedder": "fake",
        }
        return Settings(**(values | overrides))

    def admin_client(self) -> OpenSearch:
        """The cluster's super user (all_access), for set-up and clean-up only."""
        return OpenSearch(
            hosts=[self.url],
            http_auth=(security.ADMIN_USER, self.admin_password),
            ca_certs=str(self.material.ca),
            timeout=60,
        )


def world_names() -> tuple[str, str]:
    """A fresh (alias, ACL index) pair the roles cover."""
    tag = uuid4().hex
    return f"sitems-{tag}", f"sacl-{tag}"


def drop(client: OpenSearch, names: tuple[str, str]) -> None:
    """Delete a world's indices (every physical index behind the alias, and the ACL index)."""
    alias, acl = names
    found = client.indices.get(index=f"{alias}*,{acl}", ignore_unavailable=True)
    if found:
        client.indices.delete(index=",".join(found), ignore=[404])


def _prepare(node: SecuredNode) -> None:
    client = node.admin_client()
    try:
        for user, password in node.passwords.items():
            client.transport.perform_request(
                "PUT", f"{roles.API}/internalusers/{user}", body={"password": password}
            )
        users = {role: [u] for u, role in USERS.items()}
        users[roles.QUERY].append(security.CLIENT_CERT_USER)
        roles.apply(client, roles.definitions(ALIAS_PATTERN, ACL_PATTERN), users)
    finally:
        client.close()


def _start(state: Path) -> devcluster.Cluster:
    try:
        return devcluster.up(http_port=devcluster.free_port_pair(), state=state, secure=True)
    except devcluster.ClusterError as err:
        pytest.fail(f"could not start a secured OpenSearch node: {err}", pytrace=False)


@pytest.fixture(scope="session")
def secured_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredNode]:
    """The session's secured node with Suli's roles and one user per role."""
    given = os.environ.get(STATE_ENV)
    state = Path(given) if given else tmp_path_factory.mktemp("secured")
    cluster = devcluster.load(state) if given else _start(state)
    if cluster is None or not cluster.spec.secure or not cluster.running():
        pytest.fail(f"{STATE_ENV}={given} holds no running secured cluster", pytrace=False)
    node = SecuredNode(
        cluster, security.material(state), {u: secrets.token_urlsafe(18) for u in USERS}
    )
    _prepare(node)
    try:
        yield node
    finally:
        if not given:
            devcluster.down(state)
