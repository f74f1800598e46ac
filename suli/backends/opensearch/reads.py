"""Reads of the items: both legs in one `_msearch`, browse, get, vectors, facets, references."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import opensearchpy

from suli import filtering
from suli.backends.base import (
    FACET_CAP,
    BrowseKey,
    Facets,
    Hit,
    LegQuery,
    LegResults,
    MatchSet,
    Page,
    PageQuery,
    Session,
)
from suli.backends.opensearch import bodies, docs, keys, visdocs
from suli.backends.opensearch.client import MIN_TIMEOUT_S, Connection, wrap
from suli.backends.opensearch.corrections import Corrections, Known, Newest, newest, newest_body
from suli.backends.opensearch.indices import Indices
from suli.backends.opensearch.visibility import VisibilityUpkeep
from suli.backends.opensearch.workspaces import Workspaces
from suli.cursor import MAX_FROM
from suli.errors import BackendUnavailable, InvalidInput, SuliError
from suli.lru import Lru
from suli.models import Filters, Item
from suli.text import typo_words
from suli.visibility import Visibility, can_see, visibility_for

log = logging.getLogger(__name__)


# The stored documents (principals' and tokens') whose boards a service keeps between searches,
# and the most boards one may hold to be kept: past it the inline list would outweigh the
# lookup it saves (and 4,096 such lists would hold the service's memory), so it is looked up.
KNOWN_VISIBILITIES = 4096
INLINE_BOARDS = 256


class Reads:
    """Every read of the items, under the caller's visibility (a stored one checked in the
    same round trip, the ACLs read through `visibility` when it cannot be used)."""

    def __init__(
        self,
        conn: Connection,
        visibility: VisibilityUpkeep,
        indices: Indices,
        workspaces: Workspaces,
    ) -> None:
        self.conn = conn
        self.visibility = visibility
        self.indices = indices
        self.workspaces = workspaces
        # The visibility each stored document (a principal's or a token's) stood for when a
        # search last checked it. The next search by it sends these boards inline instead of
        # the engine's terms lookups (each leg, on every shard), and checks the document in
        # the same request as before: legs whose boards turn out to differ are asked again
        # with the document's, so no answer is built from an old one (DESIGN 2).
        self._known: Lru[Visibility] = Lru(KNOWN_VISIBILITIES)
        self._known_lock = threading.Lock()
        # The typo words' corrections, read ahead and checked in each search's own request.
        self.corrections = Corrections(
            self._validate,
            indices.stamped,
            self._newest,
            bodies.TYPO_FIELDS,
            bodies.FUZZY,
        )

    # The background reads of corrections go through the client without transport retries
    # (each is only an optimisation), on connections of their own beside the searches'.
    def _validate(self, alias: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        params = {"rewrite": "true", "all_shards": "true"}
        got = self.conn.write_client.indices.validate_query(index=alias, body=body, params=params)
        return list(got.get("explanations") or [])

    def _newest(self, alias: str, since_ms: int) -> Newest | None:
        return newest(self.conn.write_client.search(index=alias, body=newest_body(since_ms)))

    def search(self, query: LegQuery, *, ahead: bool = True) -> LegResults:
        """Both legs in one `_msearch`. `ahead`: typo words whose corrections are known go
        as those (corrections.py), the index's newest write stamp read in the same request;
        legs whose corrections turn out to be older than a write are asked again without."""
        known = self._known_vis(query.vis)
        header = self.workspaces.items_header(query.vis.workspace)
        alias = header["index"]
        words = typo_words(query.text) if query.text and query.text_fields == "stemmed" else []
        fixed = self.corrections.known(alias, words) if ahead and words else {}
        # With the boards known, the legs' filter holds them inline (no lookup).
        legs = self._leg_bodies(query if known is None else replace(query, vis=known), fixed)
        if not legs:
            return LegResults()
        lines: list[dict[str, Any]] = []
        by_token = isinstance(query.vis.stored, visdocs.TokenBoards)
        if by_token:  # the token's session and its copy's check ride in the same request
            for b in visdocs.token_bodies(query.vis):
                lines += [{"index": self.conn.acl_index}, b]
        elif query.vis.stored is not None:  # the boards' check rides in the same request
            lines += [{"index": self.conn.acl_index}, visdocs.check_body(query.vis)]
        for _, body in legs:
            lines += [header, body]
        if fixed:  # any write the corrections could miss, checked in the same request
            lines += [header, newest_body(self.corrections.since(fixed))]
        started = time.monotonic()
        params = self.conn.read_params(query.timeout_s, started)
        search_timeout = params.pop("timeout", None)
        if search_timeout:
            for _, body in legs:
                body["timeout"] = search_timeout
        t0 = time.perf_counter()
        resp = wrap(lambda: self.conn.client.msearch(body=lines, params=params), "search")
        took = (time.perf_counter() - t0) * 1000
        out: dict[str, list[Hit]] = {"text": [], "vector": []}
        text_total: int | None = None
        text_exact = True
        errors: dict[str, str] = {}
        timings: dict[str, float] = {"msearch": took}
        responses = list(resp["responses"])
        found = newest(responses.pop()) if fixed else None
        vis = None
        session: Session | None = None
        if by_token:
            answer = _token_answer(responses.pop(0), responses.pop(0))
            if answer.token is None:  # unknown or revoked: no hit is read, nothing is shown
                return LegResults()
            session = Session(answer.principal, bool(answer.token.get("admin")))
            if answer.principal is None:  # the token's principal is gone: no session either
                return LegResults(session=session)
            vis = answer.vis
        elif query.vis.stored is not None:
            vis = visdocs.resolved(query.vis, responses.pop(0))
        if query.vis.stored is not None:
            self._remember(query.vis, vis)
            # No current document (these legs may not be used: the ACLs are read, as before),
            # or the legs went with known boards the document no longer names: ask again.
            if vis is None or (known is not None and known != vis):
                vis = vis or self._from_acls(query.vis, session)
                asked = self.search(replace(query, vis=vis), ahead=ahead)
                return replace(asked, vis=vis, session=session)
        if fixed and not self.corrections.still_good(alias, fixed, found, _indices(responses)):
            # Written since the corrections were read: the legs again, with fuzzy clauses.
            return self.search(query, ahead=False)
        if len(fixed) < len(words):
            self.corrections.want(alias, [w for w in words if w not in fixed])
        for n, ((_, body), r) in enumerate(zip(legs, responses, strict=True)):
            # A leg whose shards failed, all (a 5xx) or some (`_shards.failed`), as while a node
            # restarts and its shard copies move, is asked once more before it is reported.
            # Only when time is left: the ask gets what remains of the request's budget, and a
            # leg still failing is reported as partial or failed, never waited on past it.
            all_failed = isinstance(r.get("error"), dict) and r.get("status", 500) >= 500
            if all_failed or (r.get("_shards") or {}).get("failed"):
                if self.conn.time_left(query.timeout_s, started) < MIN_TIMEOUT_S:
                    log.warning("%s leg failed and no time is left to ask again", legs[n][0])
                    continue
                again = self.conn.read_params(query.timeout_s, started)
                if "timeout" in again:
                    body = {**body, "timeout": again.pop("timeout")}
                if self.conn.isolated:
                    again["ignore_unavailable"] = "true"
                index = self.workspaces.items_index(query.vis.workspace)
                with contextlib.suppress(opensearchpy.TransportError):
                    responses[n] = self.conn.client.search(index=index, body=body, params=again)
        refused: list[str] = []
        for (leg, _), r in zip(legs, responses, strict=True):
            if "error" in r:
                # With a regex, a 400 in either leg comes from the user's pattern (Lucene's
                # dialect refuses some patterns Python accepts, e.g. "a{2"): bad input, not a fault.
                if query.regex and (r.get("status") == 400 or "regexp" in str(r["error"])):
                    raise InvalidInput("regex: pattern is too complex or not valid here", "regex")
                errors[leg] = docs.leg_error(r)
                if (kind := docs.refusal(r)) is not None:
                    refused.append(kind)
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
            counted = isinstance(total, dict) and total.get("relation") in ("eq", "gte")
            if leg == "text" and leg not in errors and counted:
                text_total = int(total["value"])
                text_exact = total["relation"] == "eq"
            for h in r["hits"]["hits"]:
                f = h.get("fields") or {}
                item_id = f["id"][0]
                if leg == "vector":
                    score = docs.cosine_from_score(float(h["_score"] or 0.0))
                else:  # sorted by (score, id): the score is the first sort value
                    score = float(h["sort"][0])
                outcome, replaced = (f.get(n, [None])[0] for n in ("outcome", "superseded_by"))
                out[leg].append(Hit(item_id, score, outcome, replaced, h.get("_index")))
        # Equal scores come back in Lucene doc-id order, which segment merges renumber, so
        # any write (another workspace's too) could reorder them: ties go by item id instead
        # (bench/term_stats.py: without this, 57-85 % of orders moved where scores moved 7 %).
        for hits in out.values():
            hits.sort(key=lambda h: (-h.score, h.id))
        if len(refused) == len(legs):
            # Every leg refused: a request the engine will never accept is a fault of Suli's,
            # not the engine being away ("unavailable, retry shortly" would be untrue). Only
            # the error types go out; the reasons name indices.
            log.warning("OpenSearch refused every search leg: %s", "; ".join(errors.values()))
            raise SuliError(f"OpenSearch refused the search ({', '.join(refused)})")
        return LegResults(
            tuple(out["text"]),
            tuple(out["vector"]),
            errors,
            timings,
            text_total,
            text_exact,
            vis,
            session=session,
        )

    def _leg_bodies(
        self, query: LegQuery, fixed: Mapping[str, Known] | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """The legs' search bodies, by leg name (the words in `fixed` with their corrections)."""
        legs: list[tuple[str, dict[str, Any]]] = []
        if query.text is not None:
            known = {w: k.terms for w, k in (fixed or {}).items() if k.terms is not None}
            text_body = bodies.text_leg(query, self._anchor(query), known)
            # Count the matches, not just the `depth` returned: all of them when the answer's
            # `total` must be exact, else up to count_to (a lower bound past it, and the
            # engine may skip what cannot reach the top: no exhaustive scoring).
            text_body["track_total_hits"] = True if query.count_to is None else query.count_to
            legs.append(("text", text_body))
        if query.vector is not None:
            vector_body = bodies.vector_leg(query, self.conn.settings.ef_search)
            legs.append(("vector", vector_body))
        return legs

    def _from_acls(self, vis: Visibility, session: Session | None) -> Visibility:
        """The caller's visibility read from the ACLs, its stored document being unusable
        (by token: the session's principal's, read in the same request)."""
        who = session.principal if session is not None else None
        if who is None:
            return self.visibility.from_acls(vis)
        return visibility_for(who, self.visibility.acls(who.workspace))

    def _known_vis(self, vis: Visibility) -> Visibility | None:
        """The visibility the stored document behind `vis` stood for at its last check."""
        if vis.stored is None:
            return None
        with self._known_lock:
            return self._known.get((vis.stored,))

    def _remember(self, asked: Visibility, found: Visibility | None) -> None:
        """What the stored document behind `asked` stands for now (None: it cannot be used)."""
        assert asked.stored is not None
        with self._known_lock:
            if found is None or len(found.boards) > INLINE_BOARDS:
                self._known.discard((asked.stored,))
            else:
                self._known.put((asked.stored,), found)

    def _anchor(self, query: LegQuery) -> list[Any] | None:
        """The sort values the text leg continues after: those of the hit `text_after` names,
        as the engine scores it now (bodies.text_anchor; one small search, only for a text-mode
        window past the first). None: start at `text_offset` instead, as when that hit is gone
        (deleted, or no longer visible to the caller or matching the search)."""
        if query.text is None or query.text_after is None:
            return None
        index = self.workspaces.items_index(query.vis.workspace)
        body = bodies.text_anchor(query)
        r = self.conn.search(body, "search", index, query.timeout_s, missing_ok=self.conn.isolated)
        hits = r["hits"]["hits"]
        if hits:
            return list(hits[0]["sort"])
        if query.text_offset + query.depth > MAX_FROM:  # past what an offset reaches
            raise InvalidInput(
                "cursor: the result this page continued from is gone; start again from page 1",
                "cursor",
            )
        return None

    def page(self, query: PageQuery) -> Page:
        """The page by id (`_page_by_id`), or where that does not apply one `_msearch`: the
        page (visibility and filters applied again), which of `words_of` the words match, the
        replacements' visibility check, and a stored visibility's check (see `_read`)."""
        if not query.ids and not query.replacements and not query.words_of:
            return Page()
        if query.text is None:
            query = replace(query, words_of=())
        by_id = self._page_by_id(query)
        if by_id is not None:
            return by_id
        wanted = list(dict.fromkeys(query.replacements))

        def make(vis: Visibility) -> list[dict[str, Any]]:
            out = bodies.page_bodies(replace(query, vis=vis))
            if wanted:
                out.append(bodies.ids_body(vis, wanted, source=["id"]))
            return out

        got = self._page_answers(query.vis, make)
        # The page's body, then the words' check, then the replacements' (page_bodies, make).
        seen = _ids(got.pop()) if wanted else frozenset()
        words = _words(got.pop()) if query.words_of else None
        items: dict[str, Item] = {}
        for part in got:
            for h in part["hits"]["hits"]:
                it = docs.doc_to_item(h["_source"])
                items[it.id] = it
        return Page(items, seen, words)

    def _page_by_id(self, query: PageQuery) -> Page | None:
        """The page read by id (`_mget`: each item from the one shard copy that holds it, no
        query phase on every shard, nothing highlighted: the core makes the snippets) with
        the caller's visibility document in the same request; visibility and the search's
        filters are then checked in the core by the one rule (suli.visibility, suli.
        filtering). A realtime get is fresher than a search: an item deleted, moved to a hidden
        board or edited since the legs ran is seen as it is now. None where this path does not
        apply (a regex, the words' check, a visibility known only by its token, items of an
        index keyed by bare ids, or any doubt in the answer): the page is then searched."""
        vis, checked, index = query.vis, query.checked, query.index
        if query.regex or query.words_of or index is None or checked is None:
            return None
        if checked.stored is not None or checked.workspace != vis.workspace:
            return None
        if checked.principal_id != vis.principal_id or not self.indices.keyed(index):
            return None
        if isinstance(vis.stored, visdocs.TokenBoards):
            return None
        source = {"excludes": bodies.SOURCE_EXCLUDES}
        ids = list(dict.fromkeys(query.ids))
        reps = [i for i in dict.fromkeys(query.replacements) if i not in ids]
        docs_ = [
            {"_index": index, "_id": keys.key(vis.workspace, i), "_source": source}
            for i in (*ids, *reps)
        ]
        if vis.stored is not None:
            docs_.append({"_index": vis.stored.index, "_id": vis.stored.doc})
        params = self.conn.read_params()
        params.pop("timeout", None)
        try:
            got = wrap(lambda: self.conn.client.mget(body={"docs": docs_}, params=params), "page")
        except BackendUnavailable as e:
            # A node leaving (a restart, a rolling upgrade) can refuse the read on every
            # copy the client tries; the searched page asks again after a pause and says so.
            log.warning("the page read by id failed (%s); searching the page instead", e)
            return None
        got = got["docs"]
        if any("error" in d for d in got):
            return None  # a shard copy did not answer: the searched page retries and says so
        boards = checked.boards
        if vis.stored is not None:
            doc = got.pop()
            src = doc.get("_source") or {}
            # The document must still say what the legs were answered under: every ACL,
            # group or principal write rewrites it before it is acknowledged, so one made
            # since the legs ran (or a document the legs could not use) sends the page to the
            # searched path, which checks the document's stamp and reads the ACLs if need be.
            if (
                not doc.get("found")
                or src.get("workspace") != vis.workspace
                or frozenset(src.get("groups") or ()) != vis.stored.groups
                or frozenset(src.get("board") or ()) != boards
            ):
                return None
        now = Visibility(vis.workspace, vis.principal_id, boards)
        found = {
            it.id: it
            for d in got
            if d.get("found") and (it := docs.doc_to_item(d["_source"])).workspace == vis.workspace
        }
        items = {
            i: found[i]
            for i in ids
            if i in found and can_see(now, found[i]) and filtering.passes(found[i], query.filters)
        }
        seen = frozenset(i for i in query.replacements if i in found and can_see(now, found[i]))
        return Page(items, seen, None)

    def _page_answers(
        self, vis: Visibility, make: Callable[[Visibility], list[dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        """The page's `_msearch`, whole. Shard copies that did not answer (a node restarting,
        its copies moving) would make their items pass for items made invisible, and the page
        would drop them: such an answer, partial or failed, is asked again after a short pause
        (PAGE_RETRY_PAUSES_S), and still failing it fails the page rather than lose items."""
        for pause in (*PAGE_RETRY_PAUSES_S, None):
            try:
                got = self._read_many(vis, make, "page")
            except BackendUnavailable:
                if pause is None:
                    raise
            else:
                why = _partial(got)
                if why is None:
                    return got
                if pause is None:
                    raise BackendUnavailable(f"the page fetch was partial: {why}")
            log.warning("the page fetch found shard copies not answering; asking again")
            time.sleep(pause)
        raise AssertionError("unreachable")

    def _read(
        self,
        vis: Visibility,
        make: Callable[[Visibility], dict[str, Any]],
        what: str,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """One search of the items under `vis` (see `_read_many`)."""
        return self._read_many(vis, lambda v: [make(v)], what, timeout_s)[0]

    def _read_many(
        self,
        vis: Visibility,
        make: Callable[[Visibility], list[dict[str, Any]]],
        what: str,
        timeout_s: float | None = None,
    ) -> list[dict[str, Any]]:
        """Searches of the items under `vis` in one `_msearch`; a stored visibility's check
        rides along in the same request, and a failed check falls back to the ACLs."""
        if vis.stored is None:
            made = make(vis)
            if len(made) == 1:
                return [self._items_search(vis, made[0], what, timeout_s)]
            header = self.workspaces.items_header(vis.workspace)
            lines = [x for b in made for x in (header, b)]
            return self._answers(lines, what, timeout_s)
        lines = [{"index": self.conn.acl_index}, visdocs.check_body(vis)]
        for body in make(vis):
            lines += [self.workspaces.items_header(vis.workspace), body]
        check, *got = self._answers(lines, what, timeout_s, checked=True)
        if visdocs.resolved(vis, check) is None:
            return self._read_many(self.visibility.from_acls(vis), make, what, timeout_s)
        return got

    def _answers(
        self,
        lines: list[dict[str, Any]],
        what: str,
        timeout_s: float | None,
        checked: bool = False,
    ) -> list[dict[str, Any]]:
        """The responses of one `_msearch`; an items search's error is raised as the plain
        search would have raised it (the first response is the check when `checked`)."""
        params = self.conn.read_params(timeout_s)
        params.pop("timeout", None)
        client = self.conn.client
        responses = wrap(lambda: client.msearch(body=lines, params=params), what)["responses"]
        for n, got in enumerate(responses):
            if "error" not in got or (checked and n == 0):
                continue
            err = got["error"]
            kind = err.get("type", "error") if isinstance(err, dict) else str(err)
            status = int(got.get("status") or 500)
            cls = opensearchpy.exceptions.HTTP_EXCEPTIONS.get(status, opensearchpy.TransportError)

            def fail(cls: Any = cls, status: int = status, kind: str = kind, err: Any = err) -> Any:
                raise cls(status, kind, err)

            wrap(fail, what)
        return [dict(r) for r in responses]

    def _items_search(
        self, vis: Visibility, body: dict[str, Any], what: str, timeout_s: float | None
    ) -> dict[str, Any]:
        index = self.workspaces.items_index(vis.workspace)
        isolated = self.conn.isolated
        return self.conn.search(body, what, index=index, timeout_s=timeout_s, missing_ok=isolated)

    def browse(
        self,
        vis: Visibility,
        filters: Filters,
        limit: int,
        timeout_s: float | None = None,
        regex: str | None = None,
        *,
        offset: int = 0,
        after: BrowseKey | None = None,
    ) -> tuple[list[Item], int]:
        try:
            r = self._read(
                vis,
                lambda v: bodies.browse_body(v, filters, limit, regex, offset=offset, after=after),
                "browse",
                timeout_s=timeout_s,
            )
        except opensearchpy.RequestError as e:
            if regex:  # the only user-made part of a browse body that OpenSearch can refuse
                raise InvalidInput(
                    "regex: pattern is too complex or not valid here", "regex"
                ) from e
            raise
        items = [docs.doc_to_item(h["_source"]) for h in r["hits"]["hits"]]
        return items, int(r["hits"]["total"]["value"])

    def get_many(self, vis: Visibility, ids: Sequence[str]) -> dict[str, Item]:
        if not ids:
            return {}
        wanted = list(dict.fromkeys(ids))
        r = self._read(vis, lambda v: bodies.ids_body(v, wanted), "get")
        return {h["_source"]["id"]: docs.doc_to_item(h["_source"]) for h in r["hits"]["hits"]}

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
        r, *own = self._read_many(
            vis, lambda v: bodies.facets_bodies(v, filters, match, cap), "facets", timeout_s
        )
        values: dict[str, list[tuple[str, int]]] = {}
        more: dict[str, bool] = {}
        # A ticked facet with meaning-only hits of its own is counted by its own body, after.
        for answer in (r, *own):
            for name, agg in (answer.get("aggregations") or {}).items():
                # Each facet sits in a filter of the other facets' selections (disjunctive).
                got = agg["values"]["buckets"]
                buckets = [(str(b["key"]), int(b["doc_count"])) for b in got]
                values[name], more[name] = buckets[:cap], len(buckets) > cap
        return Facets(total=int(r["hits"]["total"]["value"]), values=values, more=more)

    def referencing(self, vis: Visibility, item_id: str, limit: int) -> list[Item]:
        r = self._read(vis, lambda v: bodies.referencing_body(v, item_id, limit), "related")
        return [docs.doc_to_item(h["_source"]) for h in r["hits"]["hits"]]

    def count(self) -> int:
        if self.conn.isolated:
            body = {"size": 0, "track_total_hits": True, "query": {"match_all": {}}}
            got = self.workspaces.search_many(self.workspaces.every_items_index(), body, "count")
            return int(got["hits"]["total"]["value"])
        params = self.conn.read_params()
        params.pop("timeout", None)
        client, alias = self.conn.client, self.conn.alias
        r = wrap(lambda: client.count(index=alias, params=params), "count")
        return int(r["count"])

    def all_items(self) -> Iterator[Item]:
        body = {
            "size": 500,
            "query": {"match_all": {}},
            "sort": [{"workspace": "asc"}, {"id": "asc"}],
            "_source": {"excludes": bodies.SOURCE_EXCLUDES},
        }
        names = self.workspaces.every_items_index()
        while True:  # search_after on (workspace, id), unique: stable pages without a scroll
            if self.conn.isolated:
                r = self.workspaces.search_many(names, body, "export")
            else:
                r = self.conn.search(body, "export")
            hits = r["hits"]["hits"]
            if not hits:
                return
            yield from (docs.doc_to_item(h["_source"]) for h in hits)
            body["search_after"] = hits[-1]["sort"]


def _token_answer(check: dict[str, Any], owner: dict[str, Any]) -> visdocs.TokenAnswer:
    """The session part of a search by token (no ACL index yet: no token exists)."""
    for r in (check, owner):
        if "error" in r:
            if r.get("status") == 404:
                return visdocs.TokenAnswer(None, None, None)
            raise BackendUnavailable(f"session read failed: {r['error']}")
    return visdocs.token_resolved(check, owner)


# Pauses before the page fetch is asked again: a shard copy moving to another node answers
# again within a second or so; the legs of the same search had just answered.
PAGE_RETRY_PAUSES_S = (0.25, 1.0)


def _ids(answer: dict[str, Any]) -> frozenset[str]:
    """The item ids of a search answer's hits."""
    return frozenset(h["_source"]["id"] for h in answer["hits"]["hits"])


def _indices(responses: Sequence[dict[str, Any]]) -> set[str]:
    """The concrete indices the legs' hits came from."""
    return {h["_index"] for r in responses for h in (r.get("hits") or {}).get("hits") or ()}


def _words(answer: dict[str, Any]) -> frozenset[str]:
    """The ids bodies.words_body found the words match."""
    return frozenset(b["key"] for b in answer["aggregations"][bodies.WORDS_AGG]["buckets"])


def _partial(responses: list[dict[str, Any]]) -> str | None:
    """Why an answer holds only some shards' hits (failed or timed out), else None."""
    for r in responses:
        shards = r.get("_shards") or {}
        if shards.get("failed"):
            return f"{shards['failed']} of {shards.get('total', '?')} shards failed"
        if r.get("timed_out"):
            return "a shard timed out"
    return None
