"""An index per workspace (SULI_ISOLATE_WORKSPACES): term statistics that never mix tenants.

BM25 weighs a word by how many documents of the shard hold it, whoever may see them, so in
a shared index the rank of two of one's own items can say whether another workspace's
private items hold a word. Isolated, each workspace's items live in their own physical
index behind their own alias, `<alias>-ws-<slug>-<digest>`, made on the workspace's first
write; every read of a workspace addresses only that alias. Each alias is a small copy of
the shared scheme, so `suli reindex`, its rollback and `suli status` handle it the same way
(for_workspace gives a backend on it).
"""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Any, Self

import opensearchpy

import mappings
from suli.backends.opensearch import docs
from suli.backends.opensearch.client import wrap
from suli.backends.opensearch.indices import Indices
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


class Workspaces(Indices):
    """Where a workspace's items live, and the per-workspace indices that exist."""

    def items_index(self, workspace: str) -> str:
        """The alias reads and writes of this workspace address."""
        return (
            workspace_alias(self.settings.index_alias, workspace) if self.isolated else self.alias
        )

    def items_header(self, workspace: str) -> dict[str, Any]:
        """An `_msearch` header for this workspace's items (isolated: none yet, no hits)."""
        if not self.isolated:
            return {"index": self.alias}
        return {"index": self.items_index(workspace), "ignore_unavailable": True}

    def for_workspace(self, workspace: str) -> Self:
        """This backend on one workspace's alias alone, as if it were the shared one (what
        `suli reindex` and its rollback work on); clients are shared, not copied."""
        view = copy.copy(self)
        view.alias = workspace_alias(self.settings.index_alias, workspace)
        view.workspace = workspace
        view.isolated = False
        view._keyed = True  # made by this Suli: keyed from the start
        return view

    def workspace_aliases(self) -> dict[str, str]:
        """Workspace alias -> workspace, for every per-workspace index made so far (also
        those of a time isolation was on)."""
        pattern = f"{self.settings.index_alias}{INFIX}*"
        got = wrap(lambda: self.client.indices.get_alias(name=pattern), "workspace aliases")
        live = {a: index for index, v in got.items() for a in v.get("aliases", {})}
        if not live:
            return {}
        metas = wrap(lambda: self.client.indices.get_mapping(index=pattern), "workspace mappings")
        out = {}
        for alias, index in sorted(live.items()):
            meta = metas[index]["mappings"].get("_meta") or {}
            if isinstance(meta.get("workspace"), str):
                out[alias] = meta["workspace"]
        return out

    def workspace_views(self) -> list[Self]:
        return [self.for_workspace(w) for w in self.workspace_aliases().values()]

    def every_items_index(self) -> list[str]:
        """Every index name items live behind: the shared alias and, isolated, each
        workspace's."""
        if not self.isolated:
            return [self.alias]
        return [self.alias, *self.workspace_aliases()]

    def _search_many(self, names: list[str], body: dict[str, Any], what: str) -> dict[str, Any]:
        """One search over these indices or aliases, none of which need exist yet. The names
        go in an `_msearch` header, not the URL: a thousand workspaces' aliases would pass
        the engine's 4 KB limit on a request line."""
        if len(names) == 1:
            return self._search(body, what, index=names[0], missing_ok=True)
        params = self._params()
        params.pop("timeout", None)
        lines = [{"index": ",".join(names), "ignore_unavailable": True}, body]
        (got,) = wrap(lambda: self.client.msearch(body=lines, params=params), what)["responses"]
        if "error" in got:
            raise BackendUnavailable(f"OpenSearch failed {what}: {docs.leg_error(got)}")
        return dict(got)

    def refresh(self) -> None:
        names = f"{self.alias},{self.acl_index}"
        if self.isolated:  # and every workspace's index (a pattern: none made yet is fine)
            names += f",{self.settings.index_alias}{INFIX}*"
        wrap(lambda: self.client.indices.refresh(index=names), "refresh")

    def _workspace_ready(self, workspace: str, *, create: bool) -> bool:
        """Whether the workspace's index exists; with `create`, make it when it does not."""
        if workspace in self._workspaces:
            return True
        name = self.items_index(workspace)
        if not wrap(lambda: self.client.indices.exists_alias(name=name), "alias check"):
            if not create:
                return False
            view = self.for_workspace(workspace)
            body = view.index_body()
            body["aliases"] = {name: {}}  # made with the index, in one step
            index = f"{name}-v{mappings.mapping_version()}-{FIRST_STAMP}"
            try:
                # The admin role's (roles.py): the indexer's refusal names what to do.
                what = f"making workspace {workspace!r}'s own index, an admin's write"
                wrap(lambda: self.client.indices.create(index=index, body=body), what)
            except opensearchpy.RequestError as e:  # made concurrently: fine
                if "resource_already_exists" not in str(e):
                    raise
            if not wrap(lambda: self.client.indices.exists_alias(name=name), "alias check"):
                raise BackendUnavailable(f"{index} exists without its alias {name}")
        self._workspaces.add(workspace)
        return True
