"""The search path's pure steps and the small records passed between them.

`Searcher._search` reads as its steps (suli.service):

    plan    the legs' query: words, vector, filters, the window of text hits it ranks
    legs    both legs in one request (the backend)
    fuse    RRF, outcome weights and the gates; the ids in page order
    page    the page read again under the caller's visibility, refilled; `total`
    render  one result per page item, its snippet made from its own text
    next    where the next page starts, if anywhere

`plan`, `fuse`, `render` and `next_position` are pure (this module); the others read the
backend. Each takes the records of the steps before it and returns its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from suli.backends.base import Facets, Hit, LegQuery, LegResults
from suli.counting import Relation
from suli.cursor import Filled, Position, Window, text_window
from suli.models import Explain, Item, Result, SearchRequest
from suli.ranking import Ranked, rank
from suli.settings import Settings
from suli.shown import shown_provenance, shown_url
from suli.snippets import clip, item_snippet
from suli.text import only_common_words
from suli.visibility import Visibility


@dataclass(frozen=True)
class Plan:
    """What one search asks: the request, its words, the legs' query, the window of text hits
    it ranks and where its page starts; `prefer`: items that lead the list (a related search's
    direct references), `exclude` already taken out."""

    req: SearchRequest
    text: str
    query: LegQuery
    window: Window
    at: Position
    prefer: tuple[Item, ...] = ()


@dataclass(frozen=True)
class Fused:
    """The legs fused: each hit by id, the text leg's ids, the results ranked (gates applied),
    the ids in page order (`prefer` first) and what the optional reranker did."""

    hits: dict[str, Hit]
    text_ids: frozenset[str]
    scored: tuple[Ranked, ...]
    listed: tuple[str, ...]
    rerank: str = "off"
    dropped: dict[str, int] | None = None


@dataclass(frozen=True)
class Shown:
    """The page: its visible items in order, where in `listed` it started and how far it
    reached (`filled`), and `total` over the same matches (with the facets when asked)."""

    items: dict[str, Item]
    filled: Filled
    start: int
    total: int
    relation: Relation
    facets: Facets | None = None


def plan(
    settings: Settings,
    vis: Visibility,
    req: SearchRequest,
    text: str,
    vector: Sequence[float] | None,
    *,
    at: Position,
    exclude: Sequence[str] = (),
    prefer: Sequence[Item] = (),
    timeout_s: float | None = None,
) -> Plan:
    """The legs' query. Text mode pages past the fused candidates in windows of `depth` text
    hits, each ranked like the first (docs/decisions.md, "Paging"); other modes, and related
    searches, have one window."""
    filters = req.filters
    if exclude:
        kept = tuple(dict.fromkeys((*filters.exclude_ids, *exclude)))
        filters = replace(filters, exclude_ids=kept)
    depth = settings.candidate_depth
    window = text_window(req, at, depth) if not prefer else Window(depth)
    query = LegQuery(
        vis=vis,
        filters=filters,
        text=text if req.mode != "vector" else None,
        vector=vector,
        depth=window.size,
        text_fields="plain" if only_common_words(text) else "stemmed",
        regex=req.regex,
        timeout_s=timeout_s,
        text_offset=0 if window.too_deep else window.base,
        text_after=None if window.after is None else str(window.after[0]),
        # A page found by number past MAX_FROM is checked against an exact count.
        count_to=None if req.exact_total or window.too_deep else settings.total_count_limit,
    )
    chosen = tuple(it for it in prefer if it.id not in exclude)
    return Plan(req, text, query, window, at, chosen)


def fuse(settings: Settings, p: Plan, legs: LegResults) -> Fused:
    """RRF over both legs, outcome weights and the keep gates (suli.ranking); the ids in page
    order: a related search's direct references first, then the ranked ones."""
    s = settings
    hits: dict[str, Hit] = {}
    for h in (*legs.vector, *legs.text):
        hits[h.id] = h
    dropped: dict[str, int] | None = {} if p.req.explain else None
    scored = rank(
        [(h.id, h.score) for h in legs.text],
        [(h.id, h.score) for h in legs.vector],
        {i: h.outcome for i, h in hits.items()},
        k=s.rrf_k,
        text_weight=s.text_weight,
        vector_weight=s.vector_weight,
        margin=s.meaning_margin,
        outcome_weights=s.outcome_weights,
        floor=s.meaning_floor,
        dropped=dropped,
    )
    text_ids = frozenset(h.id for h in legs.text)
    return Fused(hits, text_ids, tuple(scored), listed(p, [r.id for r in scored]), "off", dropped)


def listed(p: Plan, ranked: Sequence[str]) -> tuple[str, ...]:
    """The ids in page order: `prefer` first (related only), then `ranked` without them."""
    first = [it.id for it in p.prefer]
    taken = set(first)  # once: the generator below would build it again for every id
    return (*first, *(i for i in ranked if i not in taken))


def render(p: Plan, fused: Fused, shown: Shown) -> list[Result]:
    """One result per page item, in page order; its snippet made from its own text, the same
    on every backend (DESIGN 3.8). A direct reference shows the start of its body."""
    preferred = {it.id for it in p.prefer}
    by_id = {r.id: r for r in fused.scored}
    out: list[Result] = []
    for item_id, item in shown.items.items():
        if item_id in preferred:
            kept = "direct-reference" if p.req.explain else None
            out.append(result_of(item, 0.0, clip(item.body or item.caption), None, kept))
            continue
        r = by_id[item_id]
        word_hit = item_id in fused.text_ids
        snippet = item_snippet(item, p.text, p.query.text_fields, word_hit)
        out.append(result_of(item, r.score, snippet, explain_of(r) if p.req.explain else None))
    return out


def explain_of(r: Ranked) -> Explain:
    """What the caller may know of a result's rank (no raw text score: DESIGN 3.8)."""
    f = r.fused
    tleg, vleg = f.legs.get("text"), f.legs.get("vector")
    return Explain(
        text_rank=tleg.rank if tleg else None,
        vector_rank=vleg.rank if vleg else None,
        vector_similarity=vleg.score if vleg else None,
        rrf=f.rrf,
        text_share=f.shares.get("text", 0.0),
        vector_share=f.shares.get("vector", 0.0),
        outcome_weight=r.weight,
        score=r.score,
        kept=r.kept,
    )


def result_of(
    item: Item, score: float, snippet: str, explain: Explain | None, kept: str | None = None
) -> Result:
    """A result as every edge shows it (provenance and url as the caller may see them)."""
    if kept and explain is None:
        explain = Explain(None, None, None, 0.0, 0.0, 0.0, 1.0, 0.0, kept)
    return Result(
        id=item.id,
        kind=item.kind,
        title=item.title,
        outcome=item.outcome,
        scope=item.scope,
        board=item.board,
        provenance=shown_provenance(item.provenance),
        snippet=snippet,
        url=shown_url(item.url),
        superseded=bool(item.superseded_by) or item.outcome == "superseded",
        superseded_by=item.superseded_by,
        last_activity_at=item.last_activity_at,
        score=score,
        explain=explain,
    )


def next_position(p: Plan, legs: LegResults, fused: Fused, shown: Shown) -> Position | None:
    """Where the next page starts: further into the fused list, or (text mode) the next
    window of text hits after this window's last, named by its id alone (LegQuery.text_after:
    a cursor never carries a score); None at the end."""
    end = p.at.offset + shown.filled.consumed
    if shown.start + shown.filled.consumed < len(fused.listed):
        return Position(end, p.window.after, p.window.base)
    more = shown.total > end or shown.relation == "gte"
    if p.req.mode == "text" and not p.prefer and len(legs.text) >= p.query.depth and more:
        return Position(end, [legs.text[-1].id], end)
    return None


def paging_limit(p: Plan, fused: Fused, shown: Shown) -> int | None:
    """How far pages reach when it is short of `total` (hybrid and vector answers page
    through their fused candidates only); None when paging reaches every result counted."""
    if p.req.mode == "text" and not p.prefer:
        return None
    reach = len(fused.listed)
    return reach if reach < shown.total else None
