"""OpenSearch backend: both legs in one _msearch through the items alias; writes with back-off.

Cut into rooms, each a layer over the ones below it:

    client      clients, transport faults as core errors, the per-read time budget
    visibility  visibility-document upkeep (opensearch_vis holds the pure builders)
    directory   board ACLs, principals, tokens, sessions (the ACL index)
    indices     physical index, alias, ACL index, migrations, the write guard
    workspaces  an index per workspace when SULI_ISOLATE_WORKSPACES is on
    reads       the two legs, browse, get, vectors, facets, referencing, count, export
    writes      bulk upsert and delete with retries

Request bodies are pure and live in suli.backends.opensearch_bodies.
"""

from __future__ import annotations

from suli.backends.opensearch.client import make_client, wrap
from suli.backends.opensearch.reads import Reads
from suli.backends.opensearch.writes import Writes

__all__ = ["OpenSearchBackend", "make_client", "wrap"]


class OpenSearchBackend(Reads, Writes):
    """Items behind the alias `settings.index_alias`; ACLs, principals and tokens in `acl_index`."""

    def ping(self) -> dict[str, object]:
        params = self._params()
        params.pop("timeout", None)  # health's `timeout` means wait-for-status: not that
        health = wrap(lambda: self.client.cluster.health(params=params), "health")
        index = self.current_index()
        info: dict[str, object] = {
            "backend": "opensearch",
            "status": health.get("status"),
            "nodes": health.get("number_of_nodes"),
            "alias": self.alias,
            "index": index,
        }
        if index:
            got = wrap(lambda: self.client.indices.get_mapping(index=index), "mapping read")
            info["model"] = (got[index]["mappings"].get("_meta") or {}).get("model") or None
        return info

    def live_model(self) -> str:
        """The model the live index's vectors come from (its mapping's `_meta`), "" unknown."""
        index = self.current_index()
        if not index:
            return ""
        got = wrap(lambda: self.client.indices.get_mapping(index=index), "mapping read")
        return str((got[index]["mappings"].get("_meta") or {}).get("model") or "")

    def close(self) -> None:
        self.client.close()
        self.write_client.close()
