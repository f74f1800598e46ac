"""Bulk writes of items: upsert and delete with one retry layer per kind of fault."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterable, Sequence
from typing import Any

import opensearchpy
from opensearchpy import helpers
from tenacity import (
    Retrying,
    before_sleep_log,
    retry_if_exception_type,
    retry_if_not_exception_type,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from suli.backends.base import KEEP_GONE, BulkOutcome
from suli.backends.opensearch import bodies, corrections, docs, keys, tls
from suli.backends.opensearch.client import Connection
from suli.backends.opensearch.indices import Indices
from suli.backends.opensearch.workspaces import Workspaces
from suli.embedding import embed_hash
from suli.errors import BackendUnavailable, DeadlineExceeded, InvalidInput
from suli.models import Item

log = logging.getLogger(__name__)

RETRY_STATUSES = {429, 502, 503, 504}  # transient: re-send; any other item error is a rejection
# `suli reindex` write-blocks the old index for the moment of its alias swap; a write refused
# by that block is re-sent and lands, through the alias, in the new index.
WRITE_BLOCK = "index write (api)"
BULK_ROUNDS = 8  # re-send rounds for transient item errors before giving up on an item
BULK_CHUNK = 500


class Writes:
    """Items into the live index (or a named one, for `suli reindex`); every id ends indexed,
    missing or rejected with its reason. `indices` guards against an index of bare ids,
    `workspaces` says (and makes) where each workspace's items go."""

    def __init__(self, conn: Connection, indices: Indices, workspaces: Workspaces) -> None:
        self.conn = conn
        self.indices = indices
        self.workspaces = workspaces
        # (embed hash, seq_no, primary_term) by _id, as stored_hashes read them; an upsert that
        # keeps a stored vector writes only that version of the document.
        self._seen: dict[str, tuple[str, int, int]] = {}

    def _retrying(self) -> Retrying:
        """Connection faults: retry the whole request with exponential back-off and jitter."""
        return Retrying(
            # Not a TLS failure (unknown CA, wrong host): it fails the same way every time.
            retry=retry_if_exception_type(
                (opensearchpy.ConnectionError, opensearchpy.ConnectionTimeout)
            )
            & retry_if_not_exception_type(opensearchpy.SSLError),
            # 0.5 s doubling to 15 s plus up to 1 s of jitter (wait_exponential_jitter's
            # `initial` is deprecated in newer tenacity; this spelling works in all versions).
            wait=wait_exponential(multiplier=0.5, max=15) + wait_random(0, 1),
            stop=stop_after_attempt(8),
            before_sleep=before_sleep_log(log, logging.WARNING),
            reraise=True,
        )

    def _bulk(
        self, actions: list[dict[str, Any]], index: str | None = None, refresh: str | None = None
    ) -> BulkOutcome:
        """Send actions; re-send items failing with 429/5xx; every id ends indexed or rejected.
        Actions are keyed by storage key; the outcome names item ids (keys.split).
        `refresh`: the bulk request's (e.g. "wait_for": answered once searches see it)."""
        extra: dict[str, Any] = {"refresh": refresh} if refresh else {}
        target = index or self.conn.alias
        pending = {a["_id"]: a for a in actions}
        done: list[str] = []
        missing: list[str] = []
        rejected: dict[str, str] = {}
        retries = 0
        moved = False  # a reindex swapped the alias: read again whether its index is stamped
        for round_no in range(BULK_ROUNDS):
            if not pending:
                break
            again, moved = moved, False
            if round_no:
                retries += len(pending)
                delay = min(15.0, 0.5 * 2 ** (round_no - 1)) * (0.5 + random.random())
                log.warning(
                    "re-sending %d items after transient errors (round %d, %.1fs)",
                    len(pending),
                    round_no,
                    delay,
                )
                time.sleep(delay)
            batch = list(pending.values())
            results: list[tuple[bool, dict[str, Any]]] = []
            for attempt in self._retrying():
                with attempt:
                    self._stamp(batch, target, again=again)
                    results = list(
                        helpers.streaming_bulk(
                            self.conn.write_client,
                            batch,
                            index=target,
                            chunk_size=BULK_CHUNK,
                            max_retries=0,  # the loop above is the only re-send layer
                            request_timeout=self.conn.settings.opensearch_bulk_timeout_s,
                            raise_on_error=False,
                            raise_on_exception=False,
                            **extra,
                        )
                    )
                    # streaming_bulk swallows connection errors per chunk: surface them here.
                    # A read timeout is one too (its status is "TIMEOUT", not "N/A"); the
                    # re-send is safe because index and delete by _id are idempotent.
                    for ok, info in results:
                        op = next(iter(info.values()))
                        exc = op.get("exception")
                        if not ok and isinstance(exc, tls.REFUSED):
                            # The user may not write here at all: a fault of the set-up,
                            # not of these items, and no re-send can fix it.
                            raise BackendUnavailable(tls.refusal(exc, "bulk write")) from exc
                        if not ok and isinstance(exc, opensearchpy.ConnectionError):
                            raise exc
                        if not ok and op.get("status") == "N/A":
                            raise opensearchpy.ConnectionError("N/A", str(op.get("error")), None)
            for ok, info in results:
                op = next(iter(info.values()))
                item_id = op.get("_id")
                if ok:
                    done.append(item_id)
                    pending.pop(item_id, None)
                    continue
                status = op.get("status")
                if isinstance(status, int) and status in RETRY_STATUSES:
                    continue  # stays pending for the next round
                if status == 403 and WRITE_BLOCK in str(op.get("error")):
                    moved = True
                    continue  # a reindex is swapping the alias: re-send
                if op.get("result") == "not_found" or status == 404:
                    missing.append(item_id)  # delete of an absent id: nothing to do
                    pending.pop(item_id, None)
                    continue
                err = op.get("error")
                reason = err.get("reason") if isinstance(err, dict) else str(err)
                etype = err.get("type") if isinstance(err, dict) else "error"
                if status == 403 and etype == "security_exception":  # refused per index
                    raise BackendUnavailable(tls.permission_line(str(reason), "bulk write"))
                rejected[item_id] = f"{etype}: {reason}"
                pending.pop(item_id, None)
        for item_id in pending:
            rejected[item_id] = f"still failing after {BULK_ROUNDS} rounds of back-off"

        def ids(stored: list[str]) -> tuple[str, ...]:
            return tuple(keys.split(k)[1] for k in stored)

        return BulkOutcome(
            indexed=ids(done),
            rejected={keys.split(k)[1]: why for k, why in rejected.items()},
            retries=retries,
            missing=ids(missing),
        )

    def _stamp(self, actions: Iterable[dict[str, Any]], target: str, again: bool) -> None:
        """Stamp each item written with the time it is sent (`written_at`), where the index
        has stamps: a search checks the newest one before it uses corrections read ahead
        (corrections.py). Stamped again on each re-send, and the index read again after a
        reindex moved the alias (the new index may have stamps the old one had not)."""
        stamped = self.indices.stamped(target, again=again)
        when = corrections.now_ms()
        for a in actions:
            doc = a["_source"].get("doc") if a["_op_type"] == "update" else a.get("_source")
            if doc is None:
                continue
            if stamped:
                doc[corrections.STAMP_FIELD] = when
            else:
                doc.pop(corrections.STAMP_FIELD, None)

    def upsert(
        self, items: Sequence[tuple[Item, Sequence[float] | None]], index: str | None = None
    ) -> BulkOutcome:
        if index is None:
            self.indices.check_keys()
        actions = []
        keep: set[str] = set()  # ids whose stored vector is kept: a partial update
        unseen: list[str] = []
        for item, vec in items:
            ehash = embed_hash(self.conn.model, item.embed_text())
            if vec is None:
                key = keys.key(item.workspace, item.id)
                doc = docs.item_to_doc(item, (), ehash)
                del doc["vector"]
                keep.add(item.id)
                seen = self._seen.pop(key, None)
                if seen is None or seen[0] != ehash:  # not read by stored_hashes: cannot keep
                    unseen.append(item.id)
                    continue
                # Applied only if nobody wrote the document since its hash was read (a 409
                # then); an unchanged document is a no-op (detect_noop).
                actions.append(
                    {
                        "_op_type": "update",
                        "_id": key,
                        "if_seq_no": seen[1],
                        "if_primary_term": seen[2],
                        "_source": {"doc": doc},
                    }
                )
                continue
            if len(vec) != self.conn.dimension:
                raise InvalidInput(
                    f"vector: expected {self.conn.dimension} dimensions, got {len(vec)}", "vector"
                )
            actions.append(
                {
                    "_op_type": "index",
                    "_id": keys.key(item.workspace, item.id),
                    "_source": docs.item_to_doc(item, vec, ehash),
                }
            )
        out = self._bulk(actions, index) if index else self._bulk_routed(actions)
        # Deleted (404) or written (409) since its hash was read: nothing was written.
        gone = [i for i in [*out.missing, *out.rejected, *unseen] if i in keep]
        if not gone:
            return out
        return BulkOutcome(
            indexed=out.indexed,
            rejected={**out.rejected, **dict.fromkeys(gone, KEEP_GONE)},
            retries=out.retries,
            missing=tuple(i for i in out.missing if i not in keep),
        )

    def stored_hashes(self, keyed: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        if not keyed:
            return {}
        ids = list(dict.fromkeys(keys.key(w, i) for w, i in keyed))
        try:
            body = bodies.stored_hashes_body(ids)
            if self.conn.isolated:
                names = sorted({self.workspaces.items_index(w) for w, _ in keyed})
                r = self.workspaces.search_many(names, body, "stored hashes")
            else:
                r = self.conn.search(body, "stored hashes")
        except (BackendUnavailable, DeadlineExceeded) as e:
            # Only an optimisation: while shards move (a node lost) the items are embedded
            # again rather than the write path failing on a read.
            log.warning("stored hashes not readable (%s): embedding those items again", e)
            return {}
        out: dict[tuple[str, str], str] = {}
        for h in r["hits"]["hits"]:
            s = h["_source"]
            if s.get("embedded_text_sha"):
                out[(s["workspace"], s["id"])] = s["embedded_text_sha"]
                # kept for the upsert that follows: it writes only this version
                self._seen[h["_id"]] = (s["embedded_text_sha"], h["_seq_no"], h["_primary_term"])
        return out

    def delete(self, workspace: str, ids: Sequence[str]) -> BulkOutcome:
        self.indices.check_keys()
        wanted = list(dict.fromkeys(ids))
        if self.conn.isolated and not self.workspaces.ready(workspace, create=False):
            return BulkOutcome(indexed=(), rejected={}, retries=0, missing=tuple(wanted))
        # A delete is often a takedown: answered only once no search, get or count finds the
        # item any more (without it, up to a refresh interval later), as ACL writes are.
        return self._bulk_routed(
            [{"_op_type": "delete", "_id": keys.key(workspace, i)} for i in wanted],
            refresh="wait_for",
        )

    def _bulk_routed(
        self, actions: list[dict[str, Any]], refresh: str | None = None
    ) -> BulkOutcome:
        """Actions into the live index; isolated, each into its workspace's (made on the
        workspace's first write), the outcomes joined."""
        if not self.conn.isolated:
            return self._bulk(actions, refresh=refresh)
        by_workspace: dict[str, list[dict[str, Any]]] = {}
        for a in actions:
            by_workspace.setdefault(keys.split(a["_id"])[0], []).append(a)
        parts = []
        for workspace, group in by_workspace.items():
            self.workspaces.ready(workspace, create=True)
            parts.append(self._bulk(group, self.workspaces.items_index(workspace), refresh))
        return BulkOutcome(
            indexed=tuple(i for p in parts for i in p.indexed),
            rejected={k: v for p in parts for k, v in p.rejected.items()},
            retries=sum(p.retries for p in parts),
            missing=tuple(i for p in parts for i in p.missing),
        )
