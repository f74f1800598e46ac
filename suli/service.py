"""The search core: search, browse, related, facets and get, the same for every edge."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

from suli import cursor as cursors
from suli import lifted, steps
from suli.backends.base import (
    FACET_CAP,
    Backend,
    Facets,
    Hit,
    LegQuery,
    LegResults,
    MatchSet,
    PageQuery,
    Session,
)
from suli.counting import Relation, search_total, words_unknown
from suli.cursor import TOO_DEEP, Position, browse_after
from suli.deadline import Deadline
from suli.embedding import Embedder, FloatArray
from suli.errors import BackendUnavailable, DeadlineExceeded, InvalidInput, NotFound
from suli.models import (
    BoardAcl,
    Degraded,
    Filters,
    Item,
    Principal,
    Result,
    SearchRequest,
    SearchResponse,
)
from suli.pages import fill, named_replacements
from suli.ranking import Ranked
from suli.related import Card, card_of, card_query, check_card, direct_references
from suli.settings import Settings
from suli.shown import shown_provenance, shown_url
from suli.snippets import clip
from suli.text import words
from suli.validate import lookup_id
from suli.visibility import Visibility, visibility_for

T = TypeVar("T")
# Query embeddings run here so a slow model can be given up on (DESIGN 8: degrade, not fail).
_EMBED_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="suli-embed")


class Phases:
    """Per-phase wall-clock timings in milliseconds."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.ms: dict[str, float] = {}

    def run(self, name: str, fn: Callable[[], T]) -> T:
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            self.ms[name] = round(self.ms.get(name, 0.0) + (time.perf_counter() - t0) * 1000, 3)

    def done(self) -> dict[str, float]:
        return {**self.ms, "total": round((time.perf_counter() - self.start) * 1000, 3)}


def _one_index(hits: Iterable[Hit]) -> str | None:
    """The physical index every hit was found in, when they name one (a workspace's items
    live in one index: the page, its direct references and replacements are read from it)."""
    found = {h.index for h in hits}
    return found.pop() if len(found) == 1 else None


class Reranker(Protocol):
    """An optional stage between fusion and the response (see suli.rerank)."""

    name: str

    def rerank(
        self,
        query_vector: Sequence[float] | None,
        ranked: list[str],
        vectors: dict[str, list[float]],
    ) -> list[str]: ...


class Searcher:
    """Runs every read path under the caller's visibility."""

    def __init__(
        self,
        backend: Backend,
        embedder: Embedder,
        settings: Settings,
        reranker: Reranker | None = None,
    ) -> None:
        self.backend = backend
        self.embedder = embedder
        self.settings = settings
        self.reranker = reranker
        self._cursor_secret: bytes | None = None

    # ---- who may see what ----------------------------------------------------------------

    def principal(self, principal_id: str) -> Principal:
        p = self.backend.principal(principal_id)
        if p is None:
            raise InvalidInput(f"principal: unknown principal {principal_id!r}", "principal")
        return p

    def visibility(
        self, principal: Principal, acls: Sequence[BoardAcl] | None = None
    ) -> Visibility:
        """Built from the current ACLs on every request: membership changes apply at once.
        `acls`: the workspace's ACLs when this request already read them (with its token).
        Without them, a backend that can read the boards inside each request (from a document
        every ACL and principal write keeps current) is left to: no round trip here."""
        if acls is None:
            stored = self.backend.stored_visibility(principal)
            if stored is not None:
                return stored
            acls = self.backend.acls(principal.workspace)
        return visibility_for(principal, acls)

    # ---- search --------------------------------------------------------------------------

    def search(
        self,
        principal: Principal,
        req: SearchRequest,
        deadline: Deadline | None = None,
        acls: Sequence[BoardAcl] | None = None,
    ) -> SearchResponse:
        """`acls`: the workspace's board ACLs when the caller read them already this request."""
        deadline = deadline or Deadline(self.settings.deadline_s)
        with deadline.in_force():  # every backend call below ends by the deadline
            return self._answer(principal, req, deadline, acls)

    def search_by_token(
        self,
        token_hash: str,
        req: SearchRequest,
        admit: Callable[[Session | None], Session],
        deadline: Deadline | None = None,
    ) -> tuple[Principal, SearchResponse]:
        """A search by a caller known only by its token's hash (the API's), and its principal.

        Where the backend can (Directory.token_visibility), the token, its principal and the
        boards are read by the engine inside the request of both legs: one round trip less.
        `admit` decides on the session that request found (Unauthorized, RateLimited) before
        any hit is read; an unknown or revoked token's lookups find no document, so its legs
        match nothing. A browse, a cursor (checked against the caller before any search work)
        or a backend that cannot read the session first, then search as `search` does."""
        deadline = deadline or Deadline(self.settings.deadline_s)
        with deadline.in_force():
            vis = None
            if words(req.query) and not req.cursor:
                vis = self.backend.token_visibility(token_hash)
            if vis is None:
                session = admit(self.backend.session(token_hash))
                assert session.principal is not None
                resp = self._answer(session.principal, req, deadline, session.acls)
                return session.principal, resp
            ph = Phases()
            ph.ms["acl"] = 0.0  # no read of its own: the engine reads the token with the legs
            embedding = None
            if req.mode != "text":
                embedding = _EMBED_POOL.submit(self.embedder.embed_query, req.query)
            holder: list[Principal] = []

            def admitted(legs: LegResults) -> tuple[Principal, Visibility]:
                session = admit(legs.session)
                assert session.principal is not None and legs.vis is not None
                holder.append(session.principal)
                return session.principal, legs.vis

            resp = self._search(
                None, vis, req, deadline, ph, req.query, embedding=embedding, admit=admitted
            )
            return holder[0], resp

    def _answer(
        self,
        principal: Principal,
        req: SearchRequest,
        deadline: Deadline,
        acls: Sequence[BoardAcl] | None,
    ) -> SearchResponse:
        ph = Phases()
        embedding = None
        if words(req.query) and req.mode != "text":
            # The model works while the ACLs are read: the ACL round trip costs no time.
            embedding = _EMBED_POOL.submit(self.embedder.embed_query, req.query)
        vis = ph.run("acl", lambda: self.visibility(principal, acls))
        assert isinstance(vis, Visibility)
        at = Position(req.offset)
        if req.cursor:  # checked before any search work: a bad cursor costs nothing
            at = cursors.read_position(self._secret(), req.cursor, vis.principal_id, req)
            req = replace(req, cursor=None, offset=at.offset)
        if not words(req.query):
            return self._browse(vis, req, deadline, ph, at)
        return self._search(
            principal, vis, req, deadline, ph, req.query, embedding=embedding, at=at
        )

    def _browse(
        self, vis: Visibility, req: SearchRequest, deadline: Deadline, ph: Phases, at: Position
    ) -> SearchResponse:
        """No words: the same filters, newest last activity first; pages reach `total`."""
        after = browse_after(at.after)
        offset = at.offset if after is None else 0
        too_deep = after is None and offset + req.limit > cursors.MAX_FROM
        items, total = ph.run(
            "browse",
            lambda: self.backend.browse(
                vis,
                req.filters,
                0 if too_deep else req.limit,
                deadline.remaining(),
                req.regex,
                offset=0 if too_deep else offset,
                after=after,
            ),
        )
        if too_deep and at.offset < total:
            raise InvalidInput(TOO_DEEP, "page")
        results = [steps.result_of(it, 0.0, clip(it.body or it.caption), None) for it in items]
        results = ph.run("fetch", lambda: self._resolve_superseded(vis, results))
        facets = None
        if req.facets:
            match = MatchSet(regex=req.regex, every=True)
            facets = ph.run("facets", lambda: self._facets(vis, req.filters, match, deadline))
        rerank = "skipped-browse" if self.reranker is not None else "off"
        resp = SearchResponse(tuple(results), total, ph.done(), rerank=rerank, facets=facets)
        end = at.offset + len(results)
        nxt = None
        if end < total and items:  # the next page continues after the last item shown
            last = items[-1]
            key = [last.last_activity_at.isoformat() if last.last_activity_at else None, last.id]
            nxt = self.cursor_at(vis.principal_id, req, Position(end, key, end))
        return replace(resp, offset=at.offset, has_more=nxt is not None, next=nxt)

    # ---- paging ----------------------------------------------------------------------------

    def _secret(self) -> bytes:
        if self._cursor_secret is None:
            self._cursor_secret = cursors.secret_for(self.settings)
        return self._cursor_secret

    def cursor_at(self, principal_id: str, req: SearchRequest, at: int | Position) -> str:
        """The cursor of the page that starts at `at` of this search, for this caller."""
        return cursors.make(self._secret(), principal_id, req, at)

    def _facets(
        self,
        vis: Visibility,
        filters: Filters,
        match: MatchSet,
        deadline: Deadline,
        cap: int = FACET_CAP,
    ) -> Facets:
        return self.backend.facets(vis, filters, match, cap, deadline.remaining())

    def _embed_query(
        self,
        text: str,
        ph: Phases,
        degraded: list[Degraded],
        deadline: Deadline,
        future: concurrent.futures.Future[FloatArray] | None = None,
    ) -> list[float] | None:
        """The query vector, or None (vector leg degraded) when the embedder fails or is slow.
        `future`: the embedding already under way (its budget counts from here)."""
        budget = min(self.settings.embed_budget_s, deadline.remaining())
        t0 = time.perf_counter()
        if future is None:
            future = _EMBED_POOL.submit(self.embedder.embed_query, text)
        try:
            vec = future.result(timeout=budget)
            return [float(x) for x in vec]
        except concurrent.futures.TimeoutError:
            # The model call cannot be interrupted; its result is simply dropped.
            degraded.append(Degraded("vector", f"embedder timed out after {budget:.2f}s"))
            return None
        except Exception as e:  # the vector leg is optional: fall back to words only
            degraded.append(Degraded("vector", f"embedder failed: {e.__class__.__name__}: {e}"))
            return None
        finally:
            ph.ms["embed"] = round((time.perf_counter() - t0) * 1000, 3)

    def _search(
        self,
        principal: Principal | None,
        vis: Visibility,
        req: SearchRequest,
        deadline: Deadline,
        ph: Phases,
        text: str,
        exclude: Sequence[str] = (),
        prefer: Sequence[Item] = (),
        embedding: concurrent.futures.Future[FloatArray] | None = None,
        at: Position | None = None,
        admit: Callable[[LegResults], tuple[Principal, Visibility]] | None = None,
    ) -> SearchResponse:
        """The search path as its steps (suli.steps). `admit`: the legs also read the caller's
        session (search_by_token); it is called on their answer first, and raises for a caller
        without one (principal None then)."""
        degraded: list[Degraded] = []
        vector = None
        if req.mode != "text":
            vector = self._embed_query(text, ph, degraded, deadline, embedding)
        at = at or Position(req.offset)
        p = steps.plan(self.settings, vis, req, text, vector, at=at, exclude=exclude,
                       prefer=prefer, timeout_s=deadline.remaining())  # fmt: skip
        legs, principal, vis = self._legs(p, principal, admit, degraded, deadline, ph)
        fused = self._fuse(p, legs, vis, deadline, ph)
        shown = self._page(p, legs, fused, principal, vis, deadline, ph)
        results = named_replacements(self.backend, vis, steps.render(p, fused, shown), shown.filled)
        nxt = steps.next_position(p, legs, fused, shown)
        cursor = self.cursor_at(vis.principal_id, req, nxt) if nxt is not None else None
        return SearchResponse(
            tuple(results),
            shown.total,
            ph.done(),
            tuple(degraded),
            rerank=fused.rerank,
            total_relation=shown.relation,
            facets=shown.facets,
            dropped=fused.dropped,
            offset=at.offset,
            has_more=cursor is not None,
            next=cursor,
            paging_limit=steps.paging_limit(p, fused, shown),
        )

    def _legs(
        self,
        p: steps.Plan,
        principal: Principal | None,
        admit: Callable[[LegResults], tuple[Principal, Visibility]] | None,
        degraded: list[Degraded],
        deadline: Deadline,
        ph: Phases,
    ) -> tuple[LegResults, Principal, Visibility]:
        """Both legs in one request; the caller admitted on their answer (by token) before
        anything of it is looked at; the visibility the later reads use as it is."""
        query = p.query
        legs = ph.run("search", lambda: self.backend.search(query))
        assert isinstance(legs, LegResults)
        vis = query.vis
        if admit is not None:  # before anything of the answer is looked at
            principal, vis = admit(legs)
        assert principal is not None
        if legs.vis is not None:
            vis = legs.vis  # the boards the engine read: the later reads use them as they are
        for leg, reason in legs.errors.items():
            degraded.append(Degraded(leg, reason))
        wanted = {"text"} if query.text is not None else set()
        if query.vector is not None:
            wanted.add("vector")
        if wanted and wanted <= set(legs.errors) and not (legs.text or legs.vector):
            raise BackendUnavailable("every search leg failed: " + "; ".join(legs.errors.values()))
        ph.ms.update(legs.timings_ms)
        deadline.remaining()
        return legs, principal, vis

    def _fuse(
        self, p: steps.Plan, legs: LegResults, vis: Visibility, deadline: Deadline, ph: Phases
    ) -> steps.Fused:
        """RRF, weights and gates (suli.steps.fuse), then the optional reranker's order."""
        fused = ph.run("fuse", lambda: steps.fuse(self.settings, p, legs))
        if self.reranker is None or not fused.scored:
            return fused
        ranked = [r.id for r in fused.scored]
        ranked, status = self._rerank(vis, p.query.vector, ranked, deadline, ph)
        return replace(fused, listed=steps.listed(p, ranked), rerank=status)

    def _page(
        self,
        p: steps.Plan,
        legs: LegResults,
        fused: steps.Fused,
        principal: Principal,
        vis: Visibility,
        deadline: Deadline,
        ph: Phases,
    ) -> steps.Shown:
        """The page read again under the caller's visibility (suli.pages.fill) and `total`
        over the same matches; a page past the text windows is counted first."""
        req, query, window = p.req, p.query, p.window
        ranked = {r.id for r in fused.scored}
        unlisted = sum(1 for it in p.prefer if it.id not in ranked)

        def count(words: frozenset[str] | None = None) -> tuple[int, Relation, Facets | None]:
            n, relation, facets = ph.run(
                "count",
                lambda: self._count(vis, req, query, legs, fused.scored, deadline, words),
            )
            return n + unlisted, relation, facets

        # Where `total` needs to know which meaning-only hits the words match, the page fetch
        # asks (one request fewer than a count); a page past the text windows (text mode: no
        # meaning-only hits) is counted first.
        unsure = () if window.too_deep else words_unknown(req, query, legs, fused.scored)
        counted = None if unsure else count()
        start = p.at.offset - window.base
        if window.too_deep:
            assert counted is not None
            if p.at.offset < counted[0]:
                raise InvalidInput(TOO_DEEP, "page")
            start = len(fused.listed)
        # The page reads the caller's visibility anew (in the engine where the backend stores
        # it, no round trip; else the current ACLs): an ACL or item changed since the legs ran
        # keeps the item off the page.
        fetch = PageQuery(
            self.visibility(principal),
            (),
            query.filters,
            req.regex,
            query.text,
            query.text_fields,
            replacements=tuple(it.superseded_by for it in p.prefer if it.superseded_by),
            words_of=unsure,
            index=_one_index(fused.hits.values()),
            checked=vis if vis.stored is None else None,
        )
        items, filled = ph.run(
            "fetch",
            lambda: fill(self.backend, fetch, fused.listed[start:], req.limit, fused.hits),
        )
        total, relation, facets = counted if counted is not None else count(filled.word_matches)
        return steps.Shown(items, filled, start, total, relation, facets)

    def _count(
        self,
        vis: Visibility,
        req: SearchRequest,
        query: LegQuery,
        legs: LegResults,
        scored: Sequence[Ranked],
        deadline: Deadline,
        words: frozenset[str] | None = None,
    ) -> tuple[int, Relation, Facets | None]:
        """`total` and the facets over the same matches (suli.counting), under `vis` and the
        legs' filters; `words`: the meaning-only hits the page fetch found the words match."""
        filters = query.filters

        def count_facets(match: MatchSet, cap: int) -> Facets:
            return self._facets(vis, filters, match, deadline, cap)

        def vector_leg(f: Filters) -> LegResults:  # a ticked facet's own (suli.lifted)
            at = LegQuery(vis, f, None, query.vector, query.depth, regex=query.regex)
            return self.backend.search(replace(at, timeout_s=deadline.remaining()))

        reads = lifted.Reads(
            vector_leg,
            lambda ids: self.backend.get_many(vis, ids),
            lambda f, m, cap: self._facets(vis, f, m, deadline, cap),
        )
        return search_total(self.settings, req, query, legs, scored, count_facets, words, reads)

    def _rerank(
        self,
        vis: Visibility,
        vector: Sequence[float] | None,
        ranked: list[str],
        deadline: Deadline,
        ph: Phases,
    ) -> tuple[list[str], str]:
        assert self.reranker is not None
        budget = min(self.settings.rerank_budget_s, deadline.remaining())
        if len(ranked) < 2:
            return ranked, "skipped-too-few-results"
        t0 = time.perf_counter()
        try:
            head = ranked[:50]
            vectors = self.backend.vectors(vis, head)
            if time.perf_counter() - t0 > budget:
                return ranked, "fallback-timeout"
            if not vectors:
                return ranked, "skipped-no-vectors"
            out = self.reranker.rerank(vector, head, vectors)
            if time.perf_counter() - t0 > budget:
                return ranked, "fallback-timeout"
            return out + ranked[len(head) :], "applied"
        except DeadlineExceeded:
            raise
        except Exception:
            return ranked, "fallback-error"
        finally:
            ph.ms["rerank"] = round((time.perf_counter() - t0) * 1000, 3)

    def _resolve_superseded(self, vis: Visibility, results: list[Result]) -> list[Result]:
        """Name a replacement only when the caller may see it; else say only `superseded`."""
        wanted = [r.superseded_by for r in results if r.superseded_by]
        if not wanted:
            return results
        visible = self.backend.get_many(vis, wanted)
        return [
            r
            if not r.superseded_by or r.superseded_by in visible
            else replace(r, superseded_by=None)
            for r in results
        ]

    # ---- get, facets, related ------------------------------------------------------------

    def get(self, principal: Principal, item_id: str) -> tuple[Item, Result]:
        """One visible item (NotFound for a missing id and an invisible one alike)."""
        lookup_id(item_id)
        vis = self.visibility(principal)
        got = self.backend.get_many(vis, [item_id]).get(item_id)
        if got is None:
            raise NotFound(f"no item {item_id!r}")
        [res] = self._resolve_superseded(
            vis, [steps.result_of(got, 0.0, clip(got.body or got.caption), None)]
        )
        # References may name items the caller cannot see: keep URLs and visible ids only.
        ids = [r for r in got.references if "://" not in r]
        seen = self.backend.get_many(vis, ids) if ids else {}
        refs = tuple(r for r in got.references if "://" in r or r in seen)
        got = replace(
            got,
            superseded_by=res.superseded_by,
            references=refs,
            provenance=shown_provenance(got.provenance),
            url=shown_url(got.url),
        )
        return got, res

    def facets(
        self,
        principal: Principal,
        filters: Filters | None = None,
        req: SearchRequest | None = None,
        deadline: Deadline | None = None,
    ) -> Facets:
        """Facet values over what a search matches (`req`), or over every visible item passing
        `filters`; the same set `total` counts, so counts add up to the results list."""
        if req is not None and words(req.query):
            resp = self.search(
                principal, replace(req, facets=True, cursor=None, offset=0), deadline
            )
            assert resp.facets is not None
            return resp.facets
        deadline = deadline or Deadline(self.settings.deadline_s)
        if req is not None:
            filters = req.filters
        match = MatchSet(regex=req.regex if req else None, every=True)
        return self._facets(self.visibility(principal), filters or Filters(), match, deadline)

    def related(
        self,
        principal: Principal,
        *,
        item_id: str | None = None,
        card: Card | None = None,
        limit: int = 10,
        explain: bool = False,
        deadline: Deadline | None = None,
    ) -> SearchResponse:
        """Items related to a visible item or to an unsaved card; direct references first."""
        if (item_id is None) == (card is None):
            raise InvalidInput("give either an item id or a card", "item_id")
        if not 1 <= limit <= 25:
            raise InvalidInput("limit: must be an integer from 1 to 25", "limit")
        if item_id is not None:
            lookup_id(item_id)
        deadline = deadline or Deadline(self.settings.deadline_s)
        with deadline.in_force():  # every backend call below ends by the deadline
            return self._related(principal, item_id, card, limit, explain, deadline)

    def _related(
        self,
        principal: Principal,
        item_id: str | None,
        card: Card | None,
        limit: int,
        explain: bool,
        deadline: Deadline,
    ) -> SearchResponse:
        ph = Phases()
        vis = ph.run("acl", lambda: self.visibility(principal))
        assert isinstance(vis, Visibility)
        if item_id is not None:
            src = self.backend.get_many(vis, [item_id]).get(item_id)
            if src is None:
                raise NotFound(f"no item {item_id!r}")
            card = card_of(src)
        assert card is not None
        check_card(card)
        prefer = direct_references(self.backend, vis, card, item_id, limit)
        exclude = (item_id,) if item_id else ()
        text = card_query(card)
        req = SearchRequest(query=text, limit=limit, explain=explain)
        if not words(text):
            results = [
                steps.result_of(i, 0.0, clip(i.body or i.caption), None) for i in prefer[:limit]
            ]
            # The same check as every other path: name a replacement only if it is visible.
            results = self._resolve_superseded(vis, results)
            return SearchResponse(tuple(results), len(prefer), ph.done())
        resp = self._search(principal, vis, req, deadline, ph, text, exclude=exclude, prefer=prefer)
        return replace(resp, next=None)  # related has one page: no cursor to follow
