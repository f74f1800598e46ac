"""OpenSearch backend: both legs in one _msearch through the items alias; writes with back-off."""

from __future__ import annotations

import contextlib
import functools
import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

import opensearchpy
from opensearchpy import OpenSearch, helpers
from tenacity import (
    Retrying,
    before_sleep_log,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

import mappings
from suli.backends import keys
from suli.backends import opensearch_bodies as bodies
from suli.backends import opensearch_vis as visdocs
from suli.backends.base import (
    FACET_CAP,
    KEEP_GONE,
    BulkOutcome,
    Facets,
    Hit,
    LegQuery,
    LegResults,
    MatchSet,
    Session,
    TokenInfo,
)
from suli.deadline import in_force
from suli.embedding import embed_hash
from suli.errors import BackendUnavailable, DeadlineExceeded, InvalidInput, NotFound
from suli.hnsw import Hnsw, hnsw_drift
from suli.models import BoardAcl, Filters, Item, Principal
from suli.settings import Settings
from suli.visibility import Visibility, visibility_for

log = logging.getLogger(__name__)
T = TypeVar("T")


class _OneLine(logging.Filter):
    """Keeps opensearch-py's line about a failed attempt, drops its traceback.

    Every failure reaches the caller as a core error the edge logs once; a traceback per
    attempt only costs: with a node frozen, dozens of them rendered at once held the log
    handler's lock long enough to push 504s far past their deadline (issue 14.8).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = None
        record.exc_text = None
        return True


_transport_log = logging.getLogger("opensearch")
if not any(isinstance(f, _OneLine) for f in _transport_log.filters):
    _transport_log.addFilter(_OneLine())

RETRY_STATUSES = {429, 502, 503, 504}  # transient: re-send; any other item error is a rejection
# `suli reindex` write-blocks the old index for the moment of its alias swap; a write refused
# by that block is re-sent and lands, through the alias, in the new index.
WRITE_BLOCK = "index write (api)"
BULK_ROUNDS = 8  # re-send rounds for transient item errors before giving up on an item
BULK_CHUNK = 500
POOL_MAXSIZE = 32  # kept-alive connections per node (the service's thread pool is 40 wide)
# Items mappings from this version on store each item under `keys.key(workspace, id)`;
# an older index keeps bare ids as `_id` and takes no writes until `suli reindex` moves it.
KEYED_SINCE = 4
# The shortest client timeout a read is sent with; a failed leg is asked again only when at
# least this much of the request's time is left (a shorter ask could not be answered anyway).
MIN_TIMEOUT_S = 0.05
# Rounds of recomputing a visibility document that a concurrent writer changed meanwhile.
VIS_ROUNDS = 20


def make_client(settings: Settings, *, max_retries: int = 1) -> OpenSearch:
    """A client for settings.opensearch_url (comma-separated hosts allowed)."""
    assert settings.opensearch_url
    hosts = [h.strip() for h in settings.opensearch_url.split(",") if h.strip()]
    auth = None
    if settings.opensearch_user:
        pw = settings.opensearch_password.get_secret_value() if settings.opensearch_password else ""
        auth = (settings.opensearch_user, pw)
    return OpenSearch(
        hosts=hosts,
        http_auth=auth,
        verify_certs=settings.opensearch_verify_certs,
        ca_certs=settings.opensearch_ca_certs,
        timeout=settings.opensearch_timeout_s,
        max_retries=max_retries,
        retry_on_timeout=False,
        http_compress=False,
        # One pooled connection per concurrent caller: the query service runs searches in a
        # thread pool, and urllib3's default pool of 1 would open (and drop) a new TCP
        # connection for nearly every concurrent request.
        pool_maxsize=POOL_MAXSIZE,
    )


def _wrap(call: Callable[[], T], what: str) -> T:
    """Run one client call, turning transport faults into the core's errors."""
    try:
        return call()
    except opensearchpy.ConnectionTimeout as e:
        raise DeadlineExceeded(f"OpenSearch did not answer {what} in time") from e
    except opensearchpy.ConnectionError as e:
        raise BackendUnavailable(f"OpenSearch is unreachable ({what}): {e.info or e}") from e
    except opensearchpy.NotFoundError as e:
        raise BackendUnavailable(
            f"OpenSearch index missing ({what}); run `suli index` first"
        ) from e
    except opensearchpy.TransportError as e:
        status = e.status_code if isinstance(e.status_code, int) else 0
        if status == 400 and "regexp" in str(e.info):
            raise InvalidInput("regex: pattern is too complex or not valid here", "regex") from e
        if status in (429,) or status >= 500:
            raise BackendUnavailable(f"OpenSearch failed {what} (status {status})") from e
        raise


def _acl(s: dict[str, Any]) -> BoardAcl:
    return BoardAcl(
        s["board"],
        s["workspace"],
        s.get("name", ""),
        tuple(s.get("members", ())),
        tuple(s.get("groups", ())),
    )


def _principal(s: dict[str, Any]) -> Principal:
    return Principal(
        s["principal_id"], s["workspace"], s.get("kind", "person"), tuple(s.get("groups", ()))
    )


class OpenSearchBackend:
    """Items behind the alias `settings.index_alias`; ACLs, principals and tokens in `acl_index`."""

    def __init__(self, settings: Settings, dimension: int, model: str = "") -> None:
        self.settings = settings
        self.dimension = dimension
        self.model = model
        self.alias = settings.index_alias
        self.acl_index = settings.acl_index
        self.client = make_client(settings, max_retries=1)
        # Writes: the transport never retries; the bulk layer below owns all retries.
        self.write_client = make_client(settings, max_retries=0)
        self._keyed = False  # the live index keys items per workspace (checked on first write)
        # (embed hash, seq_no, primary_term) by _id, as stored_hashes read them; an upsert that
        # keeps a stored vector writes only that version of the document.
        self._seen: dict[str, tuple[str, int, int]] = {}
        # How the text leg scores fields; bench.quality --tune swaps it to measure the others.
        self.text_form = bodies.TEXT_FORM

    # ---- index management --------------------------------------------------------------

    def physical_name(self) -> str:
        stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")
        return f"{self.alias}-v{mappings.mapping_version()}-{stamp}"

    def create_physical(self, shards: int | None = None, replicas: int | None = None) -> str:
        name = self.physical_name()
        body = mappings.items_index(
            self.dimension,
            shards=shards or self.settings.shards,
            replicas=self.settings.replicas if replicas is None else replicas,
            model=self.model,
            vector_parameters=self.settings.hnsw.parameters(),
        )
        _wrap(lambda: self.client.indices.create(index=name, body=body), "create index")
        return name

    def ensure_ready(self) -> None:
        """Create the items index + alias and the ACL index when they do not exist yet."""
        if not _wrap(lambda: self.client.indices.exists_alias(name=self.alias), "alias check"):
            if _wrap(lambda: self.client.indices.exists(index=self.alias), "index check"):
                raise BackendUnavailable(f"{self.alias} is an index, not an alias")
            name = self.create_physical()
            _wrap(
                lambda: self.client.indices.put_alias(index=name, name=self.alias), "create alias"
            )
        else:
            self._hnsw_check()
        if not _wrap(lambda: self.client.indices.exists(index=self.acl_index), "acl check"):
            body = mappings.acl_index(replicas=self.settings.replicas)
            try:
                self.client.indices.create(index=self.acl_index, body=body)
            except opensearchpy.RequestError as e:  # created concurrently: fine
                if "resource_already_exists" not in str(e):
                    raise
        self._acl_fields_current()
        self._rekey_acls()
        self.build_visibility()

    def build_visibility(self) -> None:
        """Principals written before visibility documents existed (or by an older Suli) get
        theirs, documents of principals gone are deleted; current ones are left alone."""
        ids = [s["principal_id"] for s in self._all("principal")]
        ids += [s["principal_id"] for s in self._all(visdocs.DOC_TYPE)]
        self._refresh_visibility(ids, only_changed=True)

    def _acl_fields_current(self) -> None:
        """An ACL index made by an older Suli gains the fields added since (in place)."""
        got = _wrap(lambda: self.client.indices.get_mapping(index=self.acl_index), "acl mapping")
        have = next(iter(got.values()))["mappings"].get("properties") or {}
        missing = {k: v for k, v in mappings.acl_fields().items() if k not in have}
        if missing:
            _wrap(
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
            got = _wrap(lambda: self.client.indices.get_mapping(index=index), "mapping read")
        except BackendUnavailable as e:  # only a notice: never stops a start
            log.warning("could not read the vector mapping of %s: %s", index, e)
            return
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
        if self._keyed:
            return
        index = self.current_index()
        if index is None:
            return  # no index yet: writes fail with the usual "run suli index" message
        got = _wrap(lambda: self.client.indices.get_mapping(index=index), "mapping read")
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
        _wrap(
            lambda: self.client.indices.refresh(index=f"{self.alias},{self.acl_index}"), "refresh"
        )

    # ---- search ------------------------------------------------------------------------

    def _left(self, timeout_s: float | None = None, since: float | None = None) -> float:
        """Seconds one read may take (<= 0 when none): the client's default timeout, cut to
        `timeout_s` (counted from `since`, a monotonic time) and to the deadline in force."""
        left = self.settings.opensearch_timeout_s
        if timeout_s:
            spent = time.monotonic() - since if since is not None else 0.0
            left = min(left, timeout_s - spent)
        deadline = in_force()
        if deadline is not None:
            left = min(left, deadline.left())
        return left

    def _params(self, timeout_s: float | None = None, since: float | None = None) -> dict[str, Any]:
        """Per-request parameters of one read: the client gives up when the request's time is
        up, and (`timeout`, for search bodies) OpenSearch stops the search by then too, so no
        work is left running past the request's deadline. DeadlineExceeded when none is left."""
        left = self._left(timeout_s, since)
        if left <= 0:
            raise DeadlineExceeded("request exceeded its deadline before OpenSearch was asked")
        left = max(left, MIN_TIMEOUT_S)
        params: dict[str, Any] = {"request_timeout": left}
        if timeout_s or in_force() is not None:
            params["timeout"] = f"{max(int(left * 1000), 50)}ms"
        return params

    def search(self, query: LegQuery) -> LegResults:
        legs: list[tuple[str, dict[str, Any]]] = []
        if query.text is not None:
            text_body = bodies.text_leg(query, self.text_form)
            # Count every match, not just the `depth` returned: the answer's `total` is exact.
            text_body["track_total_hits"] = True
            legs.append(("text", text_body))
        if query.vector is not None:
            legs.append(("vector", bodies.vector_leg(query, self.settings.ef_search)))
        if not legs:
            return LegResults()
        lines: list[dict[str, Any]] = []
        if query.vis.stored is not None:  # the boards' check rides in the same request
            lines += [{"index": self.acl_index}, visdocs.check_body(query.vis)]
        for _, body in legs:
            lines += [{"index": self.alias}, body]
        started = time.monotonic()
        params = self._params(query.timeout_s, started)
        search_timeout = params.pop("timeout", None)
        if search_timeout:
            for _, body in legs:
                body["timeout"] = search_timeout
        t0 = time.perf_counter()
        resp = _wrap(lambda: self.client.msearch(body=lines, params=params), "search")
        took = (time.perf_counter() - t0) * 1000
        out: dict[str, list[Hit]] = {"text": [], "vector": []}
        text_total: int | None = None
        errors: dict[str, str] = {}
        timings: dict[str, float] = {"msearch": took}
        responses = list(resp["responses"])
        vis = None
        if query.vis.stored is not None:
            vis = visdocs.resolved(query.vis, responses.pop(0))
            if vis is None:  # no current document: these legs may not be used; as before
                vis = self._from_acls(query.vis)
                return replace(self.search(replace(query, vis=vis)), vis=vis)
        for n, ((_, body), r) in enumerate(zip(legs, responses, strict=True)):
            # A leg whose shards failed, all (a 5xx) or some (`_shards.failed`), as while a node
            # restarts and its shard copies move, is asked once more before it is reported.
            # Only when time is left: the ask gets what remains of the request's budget, and a
            # leg still failing is reported as partial or failed, never waited on past it.
            all_failed = isinstance(r.get("error"), dict) and r.get("status", 500) >= 500
            if all_failed or (r.get("_shards") or {}).get("failed"):
                if self._left(query.timeout_s, started) < MIN_TIMEOUT_S:
                    log.warning("%s leg failed and no time is left to ask again", legs[n][0])
                    continue
                again = self._params(query.timeout_s, started)
                if "timeout" in again:
                    body = {**body, "timeout": again.pop("timeout")}
                with contextlib.suppress(opensearchpy.TransportError):
                    responses[n] = self.client.search(index=self.alias, body=body, params=again)
        for (leg, _), r in zip(legs, responses, strict=True):
            if "error" in r:
                err = r["error"]
                reason = err.get("reason") if isinstance(err, dict) else str(err)
                # With a regex, a 400 in either leg comes from the user's pattern (Lucene's
                # dialect refuses some patterns Python accepts, e.g. "a{2"): bad input, not a fault.
                if query.regex and (r.get("status") == 400 or "regexp" in str(err)):
                    raise InvalidInput("regex: pattern is too complex or not valid here", "regex")
                errors[leg] = (
                    f"{err.get('type', 'error') if isinstance(err, dict) else 'error'}: {reason}"
                )
                continue
            if r.get("timed_out"):
                errors[leg] = "timed out"
            elif failed := (r.get("_shards") or {}).get("failed"):
                # Some shards answered, some did not: keep their hits, say the leg is partial.
                shards = r["_shards"]
                first = (shards.get("failures") or [{}])[0].get("reason") or {}
                why = first.get("type", "error") if isinstance(first, dict) else str(first)
                errors[leg] = f"{failed} of {shards.get('total', '?')} shards failed: {why}"
            timings[f"{leg}_took"] = float(r.get("took", 0))
            total = r["hits"].get("total")
            counted = isinstance(total, dict) and total.get("relation") == "eq"
            if leg == "text" and leg not in errors and counted:
                text_total = int(total["value"])
            for h in r["hits"]["hits"]:
                score = float(h["_score"] or 0.0)
                if leg == "vector":
                    score = bodies.cosine_from_score(score)
                hl = bodies.ordered_highlights(h.get("highlight") or {})
                src = h["_source"]
                build = functools.partial(bodies.doc_to_item, src)
                out[leg].append(Hit.deferred(src["id"], src.get("outcome"), score, hl, build))
        # Equal scores come back in Lucene doc-id order, which segment merges renumber, so
        # any write (another workspace's too) could reorder them: ties go by item id instead
        # (bench/term_stats.py: without this, 57-85 % of orders moved where scores moved 7 %).
        for hits in out.values():
            hits.sort(key=lambda h: (-h.score, h.id))
        return LegResults(
            tuple(out["text"]), tuple(out["vector"]), errors, timings, text_total, vis
        )

    def stored_visibility(self, principal: Principal) -> Visibility:
        return visdocs.stored(self.acl_index, principal)

    def _from_acls(self, vis: Visibility) -> Visibility:
        """Today's path when a visibility document cannot be used: read the ACLs."""
        assert vis.stored is not None
        who = Principal(vis.principal_id, vis.workspace, groups=tuple(sorted(vis.stored.groups)))
        log.info("visibility document of %s not current: reading the ACLs", vis.principal_id)
        return visibility_for(who, self.acls(vis.workspace))

    def _read(
        self,
        vis: Visibility,
        make: Callable[[Visibility], dict[str, Any]],
        what: str,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """One search of the items under `vis`; a stored visibility's check rides along in
        the same `_msearch` (one round trip), and a failed check falls back to the ACLs."""
        if vis.stored is None:
            return self._search(make(vis), what, timeout_s=timeout_s)
        params = self._params(timeout_s)
        params.pop("timeout", None)
        lines = [
            {"index": self.acl_index},
            visdocs.check_body(vis),
            {"index": self.alias},
            make(vis),
        ]
        check, got = _wrap(lambda: self.client.msearch(body=lines, params=params), what)[
            "responses"
        ]
        if visdocs.resolved(vis, check) is None:
            return self._search(make(self._from_acls(vis)), what, timeout_s=timeout_s)
        if "error" in got:  # raised as the plain search would have raised it
            err = got["error"]
            kind = err.get("type", "error") if isinstance(err, dict) else str(err)
            status = int(got.get("status") or 500)
            cls = opensearchpy.exceptions.HTTP_EXCEPTIONS.get(status, opensearchpy.TransportError)

            def fail() -> dict[str, Any]:
                raise cls(status, kind, err)

            return _wrap(fail, what)
        return dict(got)

    def _search(
        self,
        body: dict[str, Any],
        what: str,
        index: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        params = self._params(timeout_s)
        params.pop("timeout", None)
        return _wrap(
            lambda: self.client.search(index=index or self.alias, body=body, params=params), what
        )

    def browse(
        self,
        vis: Visibility,
        filters: Filters,
        limit: int,
        timeout_s: float | None = None,
        regex: str | None = None,
    ) -> tuple[list[Item], int]:
        try:
            r = self._read(
                vis,
                lambda v: bodies.browse_body(v, filters, limit, regex),
                "browse",
                timeout_s=timeout_s,
            )
        except opensearchpy.RequestError as e:
            if regex:  # the only user-made part of a browse body that OpenSearch can refuse
                raise InvalidInput(
                    "regex: pattern is too complex or not valid here", "regex"
                ) from e
            raise
        items = [bodies.doc_to_item(h["_source"]) for h in r["hits"]["hits"]]
        return items, int(r["hits"]["total"]["value"])

    def get_many(self, vis: Visibility, ids: Sequence[str]) -> dict[str, Item]:
        if not ids:
            return {}
        wanted = list(dict.fromkeys(ids))
        r = self._read(vis, lambda v: bodies.ids_body(v, wanted), "get")
        return {h["_source"]["id"]: bodies.doc_to_item(h["_source"]) for h in r["hits"]["hits"]}

    def vectors(self, vis: Visibility, ids: Sequence[str]) -> dict[str, list[float]]:
        if not ids:
            return {}
        wanted = list(dict.fromkeys(ids))
        r = self._read(
            vis, lambda v: bodies.ids_body(v, wanted, source=["id", "vector"]), "vectors"
        )
        return {h["_source"]["id"]: h["_source"]["vector"] for h in r["hits"]["hits"]}

    def facets(
        self,
        vis: Visibility,
        filters: Filters,
        match: MatchSet | None = None,
        cap: int = FACET_CAP,
        timeout_s: float | None = None,
    ) -> Facets:
        r = self._read(
            vis, lambda v: bodies.facets_body(v, filters, match, cap), "facets", timeout_s
        )
        values: dict[str, list[tuple[str, int]]] = {}
        more: dict[str, bool] = {}
        for name, agg in (r.get("aggregations") or {}).items():
            buckets = [(str(b["key"]), int(b["doc_count"])) for b in agg["buckets"]]
            values[name], more[name] = buckets[:cap], len(buckets) > cap
        return Facets(total=int(r["hits"]["total"]["value"]), values=values, more=more)

    def referencing(self, vis: Visibility, item_id: str, limit: int) -> list[Item]:
        r = self._read(vis, lambda v: bodies.referencing_body(v, item_id, limit), "related")
        return [bodies.doc_to_item(h["_source"]) for h in r["hits"]["hits"]]

    def count(self) -> int:
        params = self._params()
        params.pop("timeout", None)
        r = _wrap(lambda: self.client.count(index=self.alias, params=params), "count")
        return int(r["count"])

    # ---- writes ------------------------------------------------------------------------

    def _retrying(self) -> Retrying:
        """Connection faults: retry the whole request with exponential back-off and jitter."""
        return Retrying(
            retry=retry_if_exception_type(
                (opensearchpy.ConnectionError, opensearchpy.ConnectionTimeout)
            ),
            # 0.5 s doubling to 15 s plus up to 1 s of jitter (wait_exponential_jitter's
            # `initial` is deprecated in newer tenacity; this spelling works in all versions).
            wait=wait_exponential(multiplier=0.5, max=15) + wait_random(0, 1),
            stop=stop_after_attempt(8),
            before_sleep=before_sleep_log(log, logging.WARNING),
            reraise=True,
        )

    def _bulk(self, actions: list[dict[str, Any]], index: str | None = None) -> BulkOutcome:
        """Send actions; re-send items failing with 429/5xx; every id ends indexed or rejected.
        Actions are keyed by storage key; the outcome names item ids (keys.split)."""
        target = index or self.alias
        pending = {a["_id"]: a for a in actions}
        done: list[str] = []
        missing: list[str] = []
        rejected: dict[str, str] = {}
        retries = 0
        for round_no in range(BULK_ROUNDS):
            if not pending:
                break
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
                    results = list(
                        helpers.streaming_bulk(
                            self.write_client,
                            batch,
                            index=target,
                            chunk_size=BULK_CHUNK,
                            max_retries=0,  # the loop above is the only re-send layer
                            raise_on_error=False,
                            raise_on_exception=False,
                        )
                    )
                    # streaming_bulk swallows connection errors per chunk: surface them here.
                    # A read timeout is one too (its status is "TIMEOUT", not "N/A"); the
                    # re-send is safe because index and delete by _id are idempotent.
                    for ok, info in results:
                        op = next(iter(info.values()))
                        exc = op.get("exception")
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
                    continue  # a reindex is swapping the alias: re-send
                if op.get("result") == "not_found" or status == 404:
                    missing.append(item_id)  # delete of an absent id: nothing to do
                    pending.pop(item_id, None)
                    continue
                err = op.get("error")
                reason = err.get("reason") if isinstance(err, dict) else str(err)
                etype = err.get("type") if isinstance(err, dict) else "error"
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

    def upsert(
        self, items: Sequence[tuple[Item, Sequence[float] | None]], index: str | None = None
    ) -> BulkOutcome:
        if index is None:
            self._keys_ok()
        actions = []
        keep: set[str] = set()  # ids whose stored vector is kept: a partial update
        unseen: list[str] = []
        for item, vec in items:
            ehash = embed_hash(self.model, item.embed_text())
            if vec is None:
                key = keys.key(item.workspace, item.id)
                doc = bodies.item_to_doc(item, (), ehash)
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
            if len(vec) != self.dimension:
                raise InvalidInput(
                    f"vector: expected {self.dimension} dimensions, got {len(vec)}", "vector"
                )
            actions.append(
                {
                    "_op_type": "index",
                    "_id": keys.key(item.workspace, item.id),
                    "_source": bodies.item_to_doc(item, vec, ehash),
                }
            )
        out = self._bulk(actions, index)
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
            r = self._search(bodies.stored_hashes_body(ids), "stored hashes")
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
        self._keys_ok()
        return self._bulk(
            [{"_op_type": "delete", "_id": keys.key(workspace, i)} for i in dict.fromkeys(ids)]
        )

    # ---- ACLs, principals, tokens -------------------------------------------------------

    def _put(self, doc_id: str, doc: dict[str, Any]) -> None:
        _wrap(
            lambda: self.write_client.index(
                index=self.acl_index, id=doc_id, body=doc, refresh=True
            ),
            "acl write",
        )

    @staticmethod
    def _acl_id(workspace: str, board: str) -> str:
        return f"acl:{keys.key(workspace, board)}"

    def put_acls(self, acls: Sequence[BoardAcl]) -> None:
        """Write the ACLs, then bring their workspaces' visibility documents up to date: the
        call returns (is acknowledged) only once both are searchable."""
        for a in acls:
            self._put(
                self._acl_id(a.workspace, a.board),
                {
                    "doc_type": "acl",
                    "board": a.board,
                    "workspace": a.workspace,
                    "name": a.name,
                    "members": list(a.members),
                    "groups": list(a.groups),
                },
            )
        if acls:
            self._refresh_visibility(self._principal_ids({a.workspace for a in acls}))

    def _of_workspaces(
        self, doc_type: str, workspaces: Iterable[str], *, seq: bool = False
    ) -> list[dict[str, Any]]:
        """The ACL-index hits of one document type in these workspaces (with `_seq_no` when
        `seq`); the index is small."""
        body: dict[str, Any] = {
            "size": 10_000,
            "query": {
                "bool": {
                    "filter": [
                        {"term": {"doc_type": doc_type}},
                        {"terms": {"workspace": sorted(workspaces)}},
                    ]
                }
            },
        }
        if seq:
            body["seq_no_primary_term"] = True
        hits = self._search(body, f"{doc_type} read", index=self.acl_index)["hits"]["hits"]
        return list(hits)

    def _principal_ids(self, workspaces: Iterable[str]) -> list[str]:
        return [h["_source"]["principal_id"] for h in self._of_workspaces("principal", workspaces)]

    def _mget(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The ACL-index documents among ids that exist (realtime: every acknowledged write)."""
        got = _wrap(
            lambda: self.client.mget(index=self.acl_index, body={"ids": list(ids)}), "acl read"
        )
        return {d["_id"]: d for d in got["docs"] if d.get("found")}

    def _acls_with_seq(self, workspaces: set[str]) -> dict[str, list[tuple[BoardAcl, int]]]:
        out: dict[str, list[tuple[BoardAcl, int]]] = {w: [] for w in workspaces}
        if not workspaces:
            return out
        for h in self._of_workspaces("acl", workspaces, seq=True):
            acl = _acl(h["_source"])
            out[acl.workspace].append((acl, int(h["_seq_no"])))
        return out

    def _refresh_visibility(
        self, principal_ids: Iterable[str], *, only_changed: bool = False
    ) -> None:
        """Rewrite these principals' visibility documents from the principal and ACLs now.

        Each document is written only over the version read *before* that state
        (`if_seq_no`; `create` when there was none): a writer working from an older state
        than another's can never overwrite the newer document, its write conflicts and it
        works again from the state now. So once every writer has returned, each document is
        the one the last state gives. `only_changed` (start-up's build) leaves current ones.
        """
        pending = list(dict.fromkeys(principal_ids))
        for rounds in range(VIS_ROUNDS):
            if not pending:
                return
            if rounds:  # a conflict: let the racing writers finish before reading again
                time.sleep(random.uniform(0, 0.02) * rounds)
            versions = self._mget([visdocs.doc_id(p) for p in pending])  # first: see above
            found = self._mget([visdocs.principal_doc_id(p) for p in pending])
            acls = self._acls_with_seq({d["_source"]["workspace"] for d in found.values()})
            lines: list[dict[str, Any]] = []
            for pid in pending:
                vid = visdocs.doc_id(pid)
                old = versions.get(vid)
                cond = (
                    {"if_seq_no": old["_seq_no"], "if_primary_term": old["_primary_term"]}
                    if old
                    else {}
                )
                got = found.get(visdocs.principal_doc_id(pid))
                if got is None:  # no such principal (any more): no document either
                    if old:
                        lines.append({"delete": {"_id": vid, **cond}})
                    continue
                who = _principal(got["_source"])
                doc = visdocs.build(who, int(got["_seq_no"]), acls.get(who.workspace, []))
                if only_changed and old and old["_source"] == doc:
                    continue
                lines += [{"index": {"_id": vid, **cond}} if old else {"create": {"_id": vid}}, doc]
            if not lines:
                return
            send = functools.partial(
                self.write_client.bulk, body=lines, index=self.acl_index, refresh=True
            )
            resp = _wrap(send, "visibility write")
            pending = []
            for entry in resp["items"]:
                op = next(iter(entry.values()))
                status = int(op.get("status") or 500)
                if status == 409:  # written meanwhile: work it out again from the state now
                    pending.append(op["_id"].removeprefix("vis:"))
                elif status >= 300 and not (status == 404 and "delete" in entry):
                    raise BackendUnavailable(f"visibility write failed: {op.get('error')}")
        if pending:
            raise BackendUnavailable(
                "visibility documents kept changing under concurrent writes; write again"
            )

    def acls(self, workspace: str) -> list[BoardAcl]:
        return [_acl(h["_source"]) for h in self._of_workspaces("acl", [workspace])]

    def acl(self, workspace: str, board: str) -> BoardAcl | None:
        s = self._get(self._acl_id(workspace, board))
        return None if s is None else _acl(s)

    @staticmethod
    def _principal_doc(p: Principal) -> dict[str, Any]:
        return {
            "doc_type": "principal",
            "principal_id": p.id,
            "workspace": p.workspace,
            "kind": p.kind,
            "groups": list(p.groups),
        }

    def put_principals(self, principals: Sequence[Principal]) -> None:
        for p in principals:
            self._put(f"principal:{p.id}", self._principal_doc(p))
        self._refresh_visibility(p.id for p in principals)

    def claim_principal(self, principal: Principal) -> bool:
        """Create (`op_type=create`) or replace only the version just read (`if_seq_no`):
        two workspaces racing for one id get one winner, never a silent replacement."""
        doc_id, doc = f"principal:{principal.id}", self._principal_doc(principal)
        while True:
            try:
                got = self.client.get(index=self.acl_index, id=doc_id)
            except opensearchpy.NotFoundError:
                got = None
            except opensearchpy.ConnectionError as e:
                raise BackendUnavailable(f"OpenSearch is unreachable: {e}") from e
            if got is not None and got["_source"].get("workspace") != principal.workspace:
                return False
            cond: dict[str, Any] = (
                {"op_type": "create"}
                if got is None
                else {"if_seq_no": got["_seq_no"], "if_primary_term": got["_primary_term"]}
            )
            try:
                _wrap(
                    lambda cond=cond: self.write_client.index(
                        index=self.acl_index, id=doc_id, body=doc, refresh=True, params=cond
                    ),
                    "principal write",
                )
            except opensearchpy.ConflictError:
                continue  # written meanwhile: read the new owner and decide again
            self._refresh_visibility([principal.id])
            return True

    def _get(self, doc_id: str) -> dict[str, Any] | None:
        params = self._params()
        params.pop("timeout", None)  # not a parameter of get
        try:
            return self.client.get(index=self.acl_index, id=doc_id, params=params)["_source"]
        except opensearchpy.NotFoundError:
            return None
        except opensearchpy.ConnectionTimeout as e:  # a ConnectionError too: this one first
            raise DeadlineExceeded("OpenSearch did not answer an ACL read in time") from e
        except opensearchpy.ConnectionError as e:
            raise BackendUnavailable(f"OpenSearch is unreachable: {e}") from e

    def principal(self, principal_id: str) -> Principal | None:
        s = self._get(f"principal:{principal_id}")
        return None if s is None else _principal(s)

    def put_token(self, token_hash: str, principal_id: str, admin: bool) -> None:
        # The principal's workspace is kept on the token so `session` can read the workspace's
        # ACLs in the same round trip as the token and the principal.
        owner = self.principal(principal_id)
        self._put(
            f"token:{token_hash}",
            {
                "doc_type": "token",
                "principal_id": principal_id,
                "workspace": owner.workspace if owner else None,
                "admin": admin,
                "created_at": datetime.now(UTC).isoformat(),
            },
        )

    def session(self, token_hash: str) -> Session | None:
        """One `_msearch` on the ACL index: the token document, its principal (a terms lookup
        on the token's `principal_id`) and the ACLs of the workspace recorded on the token."""
        doc = f"token:{token_hash}"

        def on_token(path: str) -> dict[str, str]:
            return {"index": self.acl_index, "id": doc, "path": path}

        def of_type(doc_type: str, field: str) -> dict[str, Any]:
            terms = {"terms": {field: on_token(field)}}
            return {"bool": {"filter": [{"term": {"doc_type": doc_type}}, terms]}}

        searches = [
            {"size": 1, "query": {"ids": {"values": [doc]}}},
            {"size": 1, "query": of_type("principal", "principal_id")},
            {"size": 10_000, "query": of_type("acl", "workspace")},
        ]
        lines: list[dict[str, Any]] = []
        for body in searches:
            lines += [{"index": self.acl_index}, body]
        params = self._params()
        params.pop("timeout", None)  # the token lookup is not a search to cut short
        got = _wrap(lambda: self.client.msearch(body=lines, params=params), "session read")[
            "responses"
        ]
        for r in got:
            if "error" in r:
                if r.get("status") == 404:  # no ACL index yet: no token exists
                    return None
                raise BackendUnavailable(f"session read failed: {r['error']}")
        tokens, principals, acls = (r["hits"]["hits"] for r in got)
        if not tokens:
            return None
        token = tokens[0]["_source"]
        admin = bool(token.get("admin"))
        if not principals:
            return Session(None, admin)
        principal = _principal(principals[0]["_source"])
        if token.get("workspace") != principal.workspace:
            # A token made before workspaces were kept on tokens, or a principal moved since.
            return Session(principal, admin, tuple(self.acls(principal.workspace)))
        return Session(principal, admin, tuple(_acl(h["_source"]) for h in acls))

    def token(self, token_hash: str) -> tuple[str, bool] | None:
        s = self._get(f"token:{token_hash}")
        return None if s is None else (s["principal_id"], bool(s.get("admin")))

    def revoke_token(self, token_hash_or_prefix: str) -> int:
        doc_id = f"token:{token_hash_or_prefix}"
        try:
            self.write_client.delete(index=self.acl_index, id=doc_id, refresh=True)
        except opensearchpy.NotFoundError:
            raise NotFound("no such token") from None
        return 1

    def all_items(self) -> Iterator[Item]:
        body = {
            "size": 500,
            "query": {"match_all": {}},
            "sort": [{"workspace": "asc"}, {"id": "asc"}],
            "_source": {"excludes": bodies.SOURCE_EXCLUDES},
        }
        while True:  # search_after on (workspace, id), unique: stable pages without a scroll
            hits = self._search(body, "export")["hits"]["hits"]
            if not hits:
                return
            yield from (bodies.doc_to_item(h["_source"]) for h in hits)
            body["search_after"] = hits[-1]["sort"]

    def _all(self, doc_type: str) -> list[dict[str, Any]]:
        """Every ACL-index document of one type (_id and _source); the index is small."""
        body = {"size": 10_000, "query": {"term": {"doc_type": doc_type}}}
        hits = self._search(body, f"{doc_type} listing", index=self.acl_index)["hits"]["hits"]
        return [{**h["_source"], "_id": h["_id"]} for h in hits]

    def list_principals(self) -> list[Principal]:
        return sorted((_principal(s) for s in self._all("principal")), key=lambda p: p.id)

    def list_acls(self) -> list[BoardAcl]:
        return sorted((_acl(s) for s in self._all("acl")), key=lambda a: a.board)

    def list_tokens(self) -> list[TokenInfo]:
        got = [
            TokenInfo(
                s["_id"].removeprefix("token:"),
                s["principal_id"],
                bool(s.get("admin")),
                str(s.get("created_at") or ""),
            )
            for s in self._all("token")
        ]
        return sorted(got, key=lambda t: (t.principal_id, t.created_at))

    def ping(self) -> dict[str, object]:
        params = self._params()
        params.pop("timeout", None)  # health's `timeout` means wait-for-status: not that
        health = _wrap(lambda: self.client.cluster.health(params=params), "health")
        index = self.current_index()
        info: dict[str, object] = {
            "backend": "opensearch",
            "status": health.get("status"),
            "nodes": health.get("number_of_nodes"),
            "alias": self.alias,
            "index": index,
        }
        if index:
            got = _wrap(lambda: self.client.indices.get_mapping(index=index), "mapping read")
            info["model"] = (got[index]["mappings"].get("_meta") or {}).get("model") or None
        return info

    def close(self) -> None:
        self.client.close()
        self.write_client.close()
