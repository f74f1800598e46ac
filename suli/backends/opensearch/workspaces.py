"""An index per workspace (SULI_ISOLATE_WORKSPACES): term statistics that never mix tenants.

BM25 weighs a word by how many documents of the shard hold it, whoever may see them, so in
a shared index the rank of two of one's own items can say whether another workspace's
private items hold a word. Isolated, each workspace's items live in their own physical
index behind their own alias, `<alias>-ws-<slug>-<digest>`, made on the workspace's first
write; every read of a workspace addresses only that alias. Each alias is a small copy of
the shared scheme, so `suli reindex`, its rollback and `suli status` handle it the same way
(`OpenSearchBackend.for_workspace` gives a backend on it).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import opensearchpy

import mappings
from suli.backends.opensearch import docs
from suli.backends.opensearch.client import Connection, wrap
from suli.backends.opensearch.indices import index_body
from suli.errors import BackendUnavailable

INFIX = "-ws-"
# A workspace's first index has a fixed name, so two writers making it at once make one
# (the second gets resource_already_exists); later ones are `suli reindex`'s, stamped.
FIRST_STAMP = "0" * 20


def workspace_alias(alias: str, workspace: str) -> str:
    """The alias of one workspace's items: readable slug (index names are lowercase and
    allow few characters) and a digest of the exact name, so distinct workspaces never
    share one."""
    slug = re.sub(r"[^a-z0-9_]+", "-", workspace.lower()).strip("-_")[:40]
    digest = hashlib.sha256(workspace.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{alias}{INFIX}{slug + '-' if slug else ''}{digest}"


class Workspaces:
    """Where a workspace's items live, and the per-workspace indices that exist."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._made: set[str] = set()  # workspaces whose index is known to exist

    def items_index(self, workspace: str) -> str:
        """The alias reads and writes of this workspace address."""
        conn = self.conn
        return (
            workspace_alias(conn.settings.index_alias, workspace) if conn.isolated else conn.alias
        )

    def items_header(self, workspace: str) -> dict[str, Any]:
        """An `_msearch` header for this workspace's items (isolated: none yet, no hits)."""
        if not self.conn.isolated:
            return {"index": self.conn.alias}
        return {"index": self.items_index(workspace), "ignore_unavailable": True}

    def view(self, workspace: str) -> Connection:
        """The connection on one workspace's alias alone, as if it were the shared one (what
        `suli reindex` and its rollback work on); clients are shared, not copied."""
        return self.conn.view(workspace_alias(self.conn.settings.index_alias, workspace), workspace)

    def workspace_aliases(self) -> dict[str, str]:
        """Workspace alias -> workspace, for every per-workspace index made so far (also
        those of a time isolation was on)."""
        client = self.conn.client
        pattern = f"{self.conn.settings.index_alias}{INFIX}*"
        got = wrap(lambda: client.indices.get_alias(name=pattern), "workspace aliases")
        live = {a: index for index, v in got.items() for a in v.get("aliases", {})}
        if not live:
            return {}
        metas = wrap(lambda: client.indices.get_mapping(index=pattern), "workspace mappings")
        out = {}
        for alias, index in sorted(live.items()):
            meta = metas[index]["mappings"].get("_meta") or {}
            if isinstance(meta.get("workspace"), str):
                out[alias] = meta["workspace"]
        return out

    def every_items_index(self) -> list[str]:
        """Every index name items live behind: the shared alias and, isolated, each
        workspace's."""
        if not self.conn.isolated:
            return [self.conn.alias]
        return [self.conn.alias, *self.workspace_aliases()]

    def search_many(self, names: list[str], body: dict[str, Any], what: str) -> dict[str, Any]:
        """One search over these indices or aliases, none of which need exist yet. The names
        go in an `_msearch` header, not the URL: a thousand workspaces' aliases would pass
        the engine's 4 KB limit on a request line."""
        if len(names) == 1:
            return self.conn.search(body, what, index=names[0], missing_ok=True)
        params = self.conn.read_params()
        params.pop("timeout", None)
        lines = [{"index": ",".join(names), "ignore_unavailable": True}, body]
        (got,) = wrap(lambda: self.conn.client.msearch(body=lines, params=params), what)[
            "responses"
        ]
        if "error" in got:
            raise BackendUnavailable(f"OpenSearch failed {what}: {docs.leg_error(got)}")
        return dict(got)

    def refresh(self) -> None:
        """Make every write so far searchable: the items' alias and the ACL index, and
        isolated, every workspace's index (a pattern: none made yet is fine)."""
        names = f"{self.conn.alias},{self.conn.acl_index}"
        if self.conn.isolated:
            names += f",{self.conn.settings.index_alias}{INFIX}*"
        wrap(lambda: self.conn.client.indices.refresh(index=names), "refresh")

    def ready(self, workspace: str, *, create: bool) -> bool:
        """Whether the workspace's index exists; with `create`, make it when it does not."""
        if workspace in self._made:
            return True
        client = self.conn.client
        name = self.items_index(workspace)
        if not wrap(lambda: client.indices.exists_alias(name=name), "alias check"):
            if not create:
                return False
            body = index_body(self.view(workspace))
            body["aliases"] = {name: {}}  # made with the index, in one step
            index = f"{name}-v{mappings.mapping_version()}-{FIRST_STAMP}"
            try:
                # The admin role's (roles.py): the indexer's refusal names what to do.
                what = f"making workspace {workspace!r}'s own index, an admin's write"
                wrap(lambda: client.indices.create(index=index, body=body), what)
            except opensearchpy.RequestError as e:  # made concurrently: fine
                if "resource_already_exists" not in str(e):
                    raise
            if not wrap(lambda: client.indices.exists_alias(name=name), "alias check"):
                raise BackendUnavailable(f"{index} exists without its alias {name}")
        self._made.add(workspace)
        return True
