"""Suli's least-privilege roles for the OpenSearch security plugin, as data.

Three roles, each exactly what one part of Suli sends (docs/operations.md, "Deploying on a
secured cluster"):

    suli_query    the query service (HTTP API, MCP, web, `suli search`): reads the items
                  aliases and indices and the ACL index; writes nothing. Its start-up checks
                  (alias, mapping, ACL fields, visibility documents) read only, once the
                  admin has created the indices; a search reads the caller's visibility
                  document from the ACL index inside the request (terms lookup).
    suli_indexer  `suli index`, `suli delete`, the ingestion endpoints: writes items into
                  indices that exist; reads the ACL index; writes no ACL, makes no index and
                  changes no alias.
    suli_admin    ACLs, principals, tokens (and the visibility documents those writes
                  update), index creation (with SULI_ISOLATE_WORKSPACES, a workspace's own
                  index on its first write), `suli reindex` (copy, alias swap, rollback, old
                  index removal), every alias change: everything on Suli's indices, nothing
                  on any other.

The bodies are the security REST API's (PUT _plugins/_security/api/roles/<name>);
`roles_yml` renders the same as the plugin's roles.yml.
"""

from __future__ import annotations

import json
from typing import Any

from opensearchpy import OpenSearch

from suli.backends.opensearch.client import wrap

QUERY, INDEXER, ADMIN = "suli_query", "suli_indexer", "suli_admin"
ROLE_NAMES = (QUERY, INDEXER, ADMIN)

# What every Suli process does before its first request: find the alias's index, read its
# mapping (model, HNSW parameters), check the cluster's health for /readyz.
# Validate: the engine's rewrite of a typo word's fuzzy clause, read ahead of the searches that
# need it (suli.backends.opensearch.corrections); it reads term dictionaries, no document.
_INSPECT = [
    "indices:admin/get",
    "indices:admin/aliases/get",
    "indices:admin/mappings/get",
    "indices:admin/validate/query",
]
# Multi-document reads are cluster-level actions in the security plugin; each index they
# touch is then checked against the index permissions.
_MULTI_READ = ["indices:data/read/msearch", "indices:data/read/mget", "indices:data/read/scroll*"]
_HEALTH = ["cluster:monitor/health"]
# Suli finds an alias's index by the alias name alone (GET _alias/<name>), which the plugin
# checks against every index of the cluster: each role may read alias names everywhere. That
# reveals index and alias names, never a document.
_ALIAS_NAMES = {"index_patterns": ["*"], "allowed_actions": ["indices:admin/aliases/get"]}


def item_patterns(alias: str) -> list[str]:
    """The items alias, its physical indices (`<alias>-v<mapping>-<stamp>`) and the
    per-workspace aliases and indices (`<alias>-ws-…`)."""
    return [alias, f"{alias}-*"]


def definitions(alias: str = "suli-items", acl_index: str = "suli-acl") -> dict[str, Any]:
    """Role name -> REST body, for the items alias and ACL index of these settings (either
    may be a pattern such as `tenant1-items*`)."""
    items = item_patterns(alias)
    acl = [acl_index]
    read = ["read", *_INSPECT]
    return {
        QUERY: {
            "description": "Suli query service: reads items and ACLs, writes nothing",
            "cluster_permissions": [*_HEALTH, *_MULTI_READ],
            "index_permissions": [
                {"index_patterns": items + acl, "allowed_actions": read},
                _ALIAS_NAMES,
            ],
        },
        INDEXER: {
            "description": "Suli indexer: writes items; reads ACLs",
            "cluster_permissions": [*_HEALTH, *_MULTI_READ, "indices:data/write/bulk"],
            "index_permissions": [
                {
                    "index_patterns": items,
                    "allowed_actions": [*read, "indices:data/write*", "indices:admin/refresh*"],
                },
                # No index creation and no alias change (#33): the security plugin checks an
                # `_aliases` action against its indices, never the alias name, so a role that
                # may make an isolated workspace's index with its alias (`<alias>-ws-*`) may
                # also put that index behind the live alias, even as its write index. An
                # isolated workspace's index is made by the admin role (its first write).
                # Refresh: a write is made searchable with one refresh of the alias and the
                # ACL index together (it changes no document of either).
                {"index_patterns": acl, "allowed_actions": [*read, "indices:admin/refresh*"]},
                _ALIAS_NAMES,
            ],
        },
        ADMIN: {
            "description": "Suli admin: ACLs, principals, tokens, index creation, reindex",
            "cluster_permissions": [
                *_HEALTH,
                *_MULTI_READ,
                "indices:data/write/bulk",
                "indices:data/write/reindex",
                "indices:data/read/point_in_time/delete*",
                "indices:admin/aliases",  # one _aliases request swaps the alias atomically
                "cluster:monitor/task/get",  # a server-side reindex copy is polled as a task
                "cluster:monitor/state",
                "cluster:monitor/nodes/stats",
            ],
            "index_permissions": [
                {"index_patterns": items + acl, "allowed_actions": ["indices_all"]},
                _ALIAS_NAMES,
            ],
        },
    }


def _yaml_scalar(value: object) -> str:
    return json.dumps(value)  # a JSON string or number is a YAML scalar as it is


def roles_yml(roles: dict[str, Any]) -> str:
    """The roles as the plugin's roles.yml (config_version 2)."""
    lines = ["_meta:", '  type: "roles"', "  config_version: 2"]
    for name, body in roles.items():
        lines.append(f"{name}:")
        lines.append(f"  description: {_yaml_scalar(body['description'])}")
        lines.append("  cluster_permissions:")
        lines += [f"    - {_yaml_scalar(p)}" for p in body["cluster_permissions"]]
        lines.append("  index_permissions:")
        for perm in body["index_permissions"]:
            lines.append("    - index_patterns:")
            lines += [f"        - {_yaml_scalar(p)}" for p in perm["index_patterns"]]
            lines.append("      allowed_actions:")
            lines += [f"        - {_yaml_scalar(a)}" for a in perm["allowed_actions"]]
    return "\n".join(lines) + "\n"


API = "/_plugins/_security/api"


def apply(
    client: OpenSearch, roles: dict[str, Any], users: dict[str, list[str]] | None = None
) -> list[str]:
    """PUT each role (and, for the roles in `users`, its mapping to those users) through the
    security REST API with an admin credential; returns what was written. A role is replaced
    whole, so running it again converges on the same definitions."""

    def put(path: str, body: dict[str, Any], what: str) -> None:
        wrap(lambda: client.transport.perform_request("PUT", f"{API}/{path}", body=body), what)

    done = []
    for name, body in roles.items():
        put(f"roles/{name}", body, f"role {name}")
        done.append(f"role {name}")
    for name, members in (users or {}).items():
        mapping = {"users": sorted(set(members)), "backend_roles": [], "hosts": []}
        put(f"rolesmapping/{name}", mapping, f"role mapping {name}")
        done.append(f"mapping {name} -> {', '.join(mapping['users'])}")
    return done
