"""The items' physical index behind its alias, the ACL index, and their migrations."""

from __future__ import annotations

import contextlib
import logging
from datetime import UTC, datetime
from typing import Any

import opensearchpy

import mappings
from suli.backends.opensearch.client import wrap
from suli.backends.opensearch.directory import Directory
from suli.backends.opensearch.hnsw import Hnsw, hnsw_drift
from suli.errors import BackendUnavailable

log = logging.getLogger(__name__)

# Items mappings from this version on store each item under `keys.key(workspace, id)`;
# an older index keeps bare ids as `_id` and takes no writes until `suli reindex` moves it.
KEYED_SINCE = 4


class Indices(Directory):
    """Creates what is missing on start, migrates what an older Suli left, guards writes."""

    def physical_name(self) -> str:
        stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")
        return f"{self.alias}-v{mappings.mapping_version()}-{stamp}"

    def index_body(self, shards: int | None = None, replicas: int | None = None) -> dict[str, Any]:
        """The items index this Suli makes (one workspace's: its `_meta` names it)."""
        body = mappings.items_index(
            self.dimension,
            shards=shards or self.settings.shards,
            replicas=self.settings.replicas if replicas is None else replicas,
            model=self.model,
            vector_parameters=self.settings.hnsw.parameters(),
        )
        if self.workspace is not None:
            body["mappings"]["_meta"]["workspace"] = self.workspace
        return body

    def create_physical(self, shards: int | None = None, replicas: int | None = None) -> str:
        name = self.physical_name()
        body = self.index_body(shards, replicas)
        wrap(lambda: self.client.indices.create(index=name, body=body), "create index")
        return name

    def ensure_ready(self) -> None:
        """Create the items index + alias and the ACL index when they do not exist yet."""
        if not wrap(lambda: self.client.indices.exists_alias(name=self.alias), "alias check"):
            if wrap(lambda: self.client.indices.exists(index=self.alias), "index check"):
                raise BackendUnavailable(f"{self.alias} is an index, not an alias")
            name = self.create_physical()
            self._keyed_indices[name] = True  # this Suli's mapping: keyed
            wrap(lambda: self.client.indices.put_alias(index=name, name=self.alias), "create alias")
        else:
            self._hnsw_check()
        if not wrap(lambda: self.client.indices.exists(index=self.acl_index), "acl check"):
            body = mappings.acl_index(replicas=self.settings.replicas)
            try:
                self.client.indices.create(index=self.acl_index, body=body)
            except opensearchpy.RequestError as e:  # created concurrently: fine
                if "resource_already_exists" not in str(e):
                    raise
        self._acl_fields_current()
        self._rekey_acls()
        self.build_visibility()

    def _acl_fields_current(self) -> None:
        """An ACL index made by an older Suli gains the fields added since (in place)."""
        got = wrap(lambda: self.client.indices.get_mapping(index=self.acl_index), "acl mapping")
        have = next(iter(got.values()))["mappings"].get("properties") or {}
        missing = {k: v for k, v in mappings.acl_fields().items() if k not in have}
        if missing:
            wrap(
                lambda: self.client.indices.put_mapping(
                    index=self.acl_index, body={"properties": missing}
                ),
                "acl mapping update",
            )

    def _hnsw_check(self) -> None:
        """Warn when the live index's vector graph is not the configured one: the HNSW
        parameters are fixed at creation, so a changed setting waits for `suli reindex`."""
        index = self.current_index()
        if index is None:
            return
        try:
            got = wrap(lambda: self.client.indices.get_mapping(index=index), "mapping read")
        except BackendUnavailable as e:  # only a notice: never stops a start
            log.warning("could not read the vector mapping of %s: %s", index, e)
            return
        meta = got[index]["mappings"].get("_meta") or {}
        # Known here, so a search's page need not read the mapping (reads._keyed_index).
        self._keyed_indices[index] = int(meta.get("mapping_version") or 0) >= KEYED_SINCE
        field = (got[index]["mappings"].get("properties") or {}).get("vector") or {}
        if note := hnsw_drift(Hnsw.of_mapping(field), self.settings.hnsw):
            log.warning("%s", note)

    def _rekey_acls(self) -> None:
        """ACL documents of before per-workspace board keys (`acl:<board>`) move to
        `acl:<workspace>/<board>`; idempotent, and the ACL index is small."""
        body = {"size": 10_000, "query": {"term": {"doc_type": "acl"}}}
        hits = self._search(body, "acl read", index=self.acl_index)["hits"]["hits"]
        old = [
            h
            for h in hits
            if h["_id"] != self._acl_id(h["_source"]["workspace"], h["_source"]["board"])
        ]
        for h in old:
            self._put(self._acl_id(h["_source"]["workspace"], h["_source"]["board"]), h["_source"])
            with contextlib.suppress(opensearchpy.NotFoundError):
                self.write_client.delete(index=self.acl_index, id=h["_id"], refresh=True)
        if old:
            log.warning("moved %d board ACLs to per-workspace keys", len(old))

    def _keys_ok(self) -> None:
        """Refuse writes into an index whose documents still have bare-id `_id`s: a write
        there would add a second copy of an item instead of replacing it."""
        if self._keyed or self.isolated:  # per-workspace indices are keyed from the start
            return
        index = self.current_index()
        if index is None:
            return  # no index yet: writes fail with the usual "run suli index" message
        got = wrap(lambda: self.client.indices.get_mapping(index=index), "mapping read")
        version = int((got[index]["mappings"].get("_meta") or {}).get("mapping_version") or 0)
        if version < KEYED_SINCE:
            raise BackendUnavailable(
                f"{index} has mapping version {version}, which keys items by bare id; run "
                "`suli reindex` once to move it to per-workspace keys (reads keep working)"
            )
        self._keyed = True

    def current_index(self) -> str | None:
        try:
            got = self.client.indices.get_alias(name=self.alias)
        except opensearchpy.NotFoundError:
            return None
        return sorted(got)[0] if got else None

    def refresh(self) -> None:
        wrap(lambda: self.client.indices.refresh(index=f"{self.alias},{self.acl_index}"), "refresh")
