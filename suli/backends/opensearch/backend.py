"""OpenSearchBackend: every layer of the package in one class (see the package docstring)."""

from __future__ import annotations

from suli.backends.opensearch.client import wrap
from suli.backends.opensearch.reads import Reads
from suli.backends.opensearch.writes import Writes


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
