"""The items' physical index behind its alias, the ACL index, their migrations, the write guard."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import opensearchpy

import mappings
from suli.backends.opensearch import corrections
from suli.backends.opensearch.client import Connection, wrap
from suli.backends.opensearch.hnsw import Hnsw, hnsw_drift
from suli.errors import BackendUnavailable

log = logging.getLogger(__name__)

# Items mappings from this version on store each item under `keys.key(workspace, id)`;
# an older index keeps bare ids as `_id` and takes no writes until `suli reindex` moves it.
KEYED_SINCE = 4


def index_body(
    conn: Connection, shards: int | None = None, replicas: int | None = None
) -> dict[str, Any]:
    """The items index this Suli makes (one workspace's, on a view: its `_meta` names it)."""
    body = mappings.items_index(
        conn.dimension,
        shards=shards or conn.settings.shards,
        replicas=conn.settings.replicas if replicas is None else replicas,
        model=conn.model,
        vector_parameters=conn.settings.hnsw.parameters(),
    )
    if conn.workspace is not None:
        body["mappings"]["_meta"]["workspace"] = conn.workspace
    return body


class Indices:
    """Creates what is missing on start, migrates what an older Suli left, guards writes, and
    knows which physical indices key their items per workspace."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        # The live index keys items per workspace (checked on first write); a workspace's own
        # index is made by this Suli, keyed from the start.
        self._keyed = conn.workspace is not None
        self._keyed_indices: dict[str, bool] = {}  # physical index -> keyed (the page's reads)
        self._stamped: dict[str, bool] = {}  # physical index or alias -> has write stamps

    def physical_name(self) -> str:
        stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")
        return f"{self.conn.alias}-v{mappings.mapping_version()}-{stamp}"

    def index_body(self, shards: int | None = None, replicas: int | None = None) -> dict[str, Any]:
        return index_body(self.conn, shards, replicas)

    def create_physical(self, shards: int | None = None, replicas: int | None = None) -> str:
        name = self.physical_name()
        body = self.index_body(shards, replicas)
        wrap(lambda: self.conn.client.indices.create(index=name, body=body), "create index")
        return name

    def ensure_ready(self) -> None:
        """Create the items index + alias and the ACL index when they do not exist yet; an ACL
        index of an older Suli gains the fields added since."""
        client, alias, acl_index = self.conn.client, self.conn.alias, self.conn.acl_index
        if not wrap(lambda: client.indices.exists_alias(name=alias), "alias check"):
            if wrap(lambda: client.indices.exists(index=alias), "index check"):
                raise BackendUnavailable(f"{alias} is an index, not an alias")
            name = self.create_physical()
            self._keyed_indices[name] = True  # this Suli's mapping: keyed
            wrap(lambda: client.indices.put_alias(index=name, name=alias), "create alias")
        else:
            self._hnsw_check()
        if not wrap(lambda: client.indices.exists(index=acl_index), "acl check"):
            body = mappings.acl_index(replicas=self.conn.settings.replicas)
            try:
                client.indices.create(index=acl_index, body=body)
            except opensearchpy.RequestError as e:  # created concurrently: fine
                if "resource_already_exists" not in str(e):
                    raise
        self._acl_fields_current()

    def _acl_fields_current(self) -> None:
        """An ACL index made by an older Suli gains the fields added since (in place)."""
        client, acl_index = self.conn.client, self.conn.acl_index
        got = wrap(lambda: client.indices.get_mapping(index=acl_index), "acl mapping")
        have = next(iter(got.values()))["mappings"].get("properties") or {}
        missing = {k: v for k, v in mappings.acl_fields().items() if k not in have}
        if missing:
            wrap(
                lambda: client.indices.put_mapping(index=acl_index, body={"properties": missing}),
                "acl mapping update",
            )

    def _hnsw_check(self) -> None:
        """Warn when the live index's vector graph is not the configured one: the HNSW
        parameters are fixed at creation, so a changed setting waits for `suli reindex`."""
        index = self.current_index()
        if index is None:
            return
        try:
            got = wrap(lambda: self.conn.client.indices.get_mapping(index=index), "mapping read")
        except BackendUnavailable as e:  # only a notice: never stops a start
            log.warning("could not read the vector mapping of %s: %s", index, e)
            return
        meta = got[index]["mappings"].get("_meta") or {}
        # Known here, so a search's page need not read the mapping (`keyed`).
        self._keyed_indices[index] = int(meta.get("mapping_version") or 0) >= KEYED_SINCE
        field = (got[index]["mappings"].get("properties") or {}).get("vector") or {}
        if note := hnsw_drift(Hnsw.of_mapping(field), self.conn.settings.hnsw):
            log.warning("%s", note)

    def check_keys(self) -> None:
        """Refuse writes into an index whose documents still have bare-id `_id`s: a write
        there would add a second copy of an item instead of replacing it."""
        if self._keyed or self.conn.isolated:  # per-workspace indices are keyed from the start
            return
        index = self.current_index()
        if index is None:
            return  # no index yet: writes fail with the usual "run suli index" message
        got = wrap(lambda: self.conn.client.indices.get_mapping(index=index), "mapping read")
        version = int((got[index]["mappings"].get("_meta") or {}).get("mapping_version") or 0)
        if version < KEYED_SINCE:
            raise BackendUnavailable(
                f"{index} has mapping version {version}, which keys items by bare id; run "
                "`suli reindex` once to move it to per-workspace keys (reads keep working)"
            )
        self._keyed = True

    def stamped(self, index: str, *, again: bool = False) -> bool:
        """Whether the index (`index` a physical one, or an alias: the one behind it now)
        carries write stamps (`written_at`, mapping version 5 on): writes stamp every item
        there, and reads may use corrections read ahead (corrections.py). An alias is read
        again with `again` (after `suli reindex` moved it: see Writes)."""
        known = None if again else self._stamped.get(index)
        if known is None:
            # Transport faults go to the caller's retries as they are (the bulk's own), on
            # the client without retries of its own (the one the writes and the background
            # reads of corrections use, apart from the searches' connections).
            try:
                got = self.conn.write_client.indices.get_mapping(index=index)
            except opensearchpy.NotFoundError:
                return False  # no index yet: the write fails as it always has
            has = [
                corrections.STAMP_FIELD in (m["mappings"].get("properties") or {})
                for m in got.values()
            ]
            known = bool(has) and all(has)
            self._stamped[index] = known
        return known

    def keyed(self, index: str) -> bool:
        """Whether a physical index keys its items by workspace (`keys.key`), as every index
        of this Suli's mappings does; an older one is read by search (its `_id`s are bare)."""
        known = self._keyed_indices.get(index)
        if known is None:
            got = wrap(lambda: self.conn.client.indices.get_mapping(index=index), "mapping read")
            versions = [
                int((m["mappings"].get("_meta") or {}).get("mapping_version") or 0)
                for m in got.values()
            ]
            known = len(versions) == 1 and versions[0] >= KEYED_SINCE
            if len(got) == 1:  # one physical index: its mapping version never changes
                self._keyed_indices[index] = known
        return known

    def current_index(self) -> str | None:
        try:
            got = self.conn.client.indices.get_alias(name=self.conn.alias)
        except opensearchpy.NotFoundError:
            return None
        return sorted(got)[0] if got else None

    def ping(self) -> dict[str, object]:
        """The cluster's health and the live index with the model of its vectors."""
        client = self.conn.client
        params = self.conn.read_params()
        params.pop("timeout", None)  # health's `timeout` means wait-for-status: not that
        health = wrap(lambda: client.cluster.health(params=params), "health")
        index = self.current_index()
        info: dict[str, object] = {
            "backend": "opensearch",
            "status": health.get("status"),
            "nodes": health.get("number_of_nodes"),
            "alias": self.conn.alias,
            "index": index,
        }
        if index:
            got = wrap(lambda: client.indices.get_mapping(index=index), "mapping read")
            info["model"] = (got[index]["mappings"].get("_meta") or {}).get("model") or None
        return info

    def live_model(self) -> str:
        """The model the live index's vectors come from (its mapping's `_meta`), "" unknown."""
        index = self.current_index()
        if not index:
            return ""
        got = wrap(lambda: self.conn.client.indices.get_mapping(index=index), "mapping read")
        return str((got[index]["mappings"].get("_meta") or {}).get("model") or "")
