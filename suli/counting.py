"""`total` of a search: how many visible items it matched, exactly or as a lower bound.

See docs/decisions.md, "Search answers": the visible items the words match under the filters,
all of them (not just the depth the word leg returned), plus the kept meaning-only hits that
are not word matches; "gte" where the engine could not count. When facets are asked for they
are counted over the same set, so their total is the search's.

Facets count disjunctively (DESIGN 3.10, as Algolia, Meilisearch and Typesense do): a facet's
values are counted over the matches under every filter but that facet's own, so ticking
`outcome=approved` leaves the other outcomes' counts in place (what ticking one more would
add) while it narrows the kinds, tags and the rest. `total` keeps every filter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any, Literal

from suli.backends.base import FACET_CAP, Facets, LegQuery, LegResults, MatchSet
from suli.lifted import FACET_FILTERS, Gates, Reads, corrected, lifted_meaning
from suli.models import Filters, SearchRequest
from suli.ranking import Ranked
from suli.settings import Settings

Relation = Literal["eq", "gte"]
# Facets of a MatchSet with up to `cap` values each (0: only the total), under the request's
# visibility and filters.
CountFacets = Callable[[MatchSet, int], Facets]


def own_filter_lifted(filters: Filters) -> Iterator[tuple[str, Filters]]:
    """(facet, the filters without that facet's own) for each facet whose filter is set; the
    other facets are counted under `filters` as they are."""
    for name, attr in FACET_FILTERS.items():
        if getattr(filters, attr):
            lifted: dict[str, Any] = {attr: ()}
            yield name, replace(filters, **lifted)


def without_facet_filters(filters: Filters) -> Filters:
    """`filters` with every facet's filter lifted (what stays: dates, hidden, exclusions)."""
    lifted: dict[str, Any] = {attr: () for attr in FACET_FILTERS.values()}
    return replace(filters, **lifted)


def disjunctive(
    filters: Filters,
    cap: int,
    match: MatchSet | None,
    count: Callable[[Filters, MatchSet | None], Facets],
) -> Facets:
    """Facets counted disjunctively from `count` (one facet count under the given filters and
    match): `total` and the unticked facets under every filter, each ticked facet without its
    own (and over its own meaning-only hits, MatchSet.lifted)."""
    full = count(filters, match)
    values = {k: list(v) for k, v in full.values.items()}
    more = dict(full.more)
    if cap:
        for name, lifted in own_filter_lifted(filters):
            got = count(lifted, match.for_facet(name) if match is not None else None)
            values[name] = list(got.values.get(name, []))
            more[name] = got.more.get(name, False)
    return Facets(full.total, values, more)


def vector_may_hold_more(settings: Settings, query: LegQuery, legs: LegResults) -> bool:
    """A vector leg cut at depth whose last hit still passes the gates may hold more."""
    if query.vector is None or len(legs.vector) < query.depth or not legs.vector:
        return False
    best, last = legs.vector[0].score, legs.vector[-1].score
    return last >= settings.meaning_floor and last >= best - settings.meaning_margin


def meaning_only(scored: Sequence[Ranked]) -> tuple[str, ...]:
    """The kept hits that only the vector leg found."""
    return tuple(r.id for r in scored if "text" not in r.fused.legs)


def text_counted(query: LegQuery, legs: LegResults) -> bool:
    """The text leg ran and the engine counted all its matches."""
    return query.text is not None and "text" not in legs.errors and legs.text_total is not None


def words_unknown(
    req: SearchRequest, query: LegQuery, legs: LegResults, scored: Sequence[Ranked]
) -> tuple[str, ...]:
    """The meaning-only hits whose word match `total` needs and the legs did not tell: a text
    leg cut at depth may match any of them further down. The page fetch asks (PageQuery.
    words_of); facets count the union themselves, so they need none."""
    if not req.exact_total or req.facets:
        return ()  # a lower bound needs no check; facets count the union themselves
    if legs.word_matches is not None or not text_counted(query, legs):
        return ()
    assert legs.text_total is not None
    return meaning_only(scored) if legs.text_total > len(legs.text) else ()


def search_total(
    settings: Settings,
    req: SearchRequest,
    query: LegQuery,
    legs: LegResults,
    scored: Sequence[Ranked],
    count_facets: CountFacets,
    word_matches: frozenset[str] | None = None,
    reads: Reads | None = None,
) -> tuple[int, Relation, Facets | None]:
    """(total, its relation, the facets when `req` asks for them). `word_matches`: which of
    words_unknown's hits the page fetch found the words match, where the legs did not say.
    `reads`: what counting a ticked facet's own meaning-only hits reads (suli.lifted); without
    it a ticked facet counts the search's own meaning-only hits. Without `req.exact_total`,
    what costs a count of its own is given as a lower bound."""
    alone = meaning_only(scored)
    counted = text_counted(query, legs)
    vector_lost = query.vector is None and req.mode != "text"  # embedder failed: degraded
    vector_open = vector_may_hold_more(settings, query, legs) or "vector" in legs.errors
    relation: Relation = "gte" if vector_open or vector_lost else "eq"
    if query.text is not None and counted:
        match = MatchSet(query.text, query.text_fields, query.regex, alone)
    else:
        # No word leg (vector mode) or one that failed: count what was found.
        match = MatchSet(regex=query.regex, ids=tuple(r.id for r in scored))
        if query.text is not None:
            relation = "gte"
    if req.facets:
        lifted = []
        if reads is not None and query.vector is not None and match.text == query.text:
            gates = Gates(query.depth, settings.meaning_margin, settings.meaning_floor)
            lifted = lifted_meaning(query.filters, query.regex, gates, reads)
            match = replace(match, lifted=tuple((part.name, part.ids) for part in lifted))
        facets = count_facets(match, FACET_CAP)
        if lifted and reads is not None:
            facets = corrected(facets, query.filters, match, lifted, reads)
        return facets.total, relation, facets
    if not counted:
        return len(scored), relation, None
    assert legs.text_total is not None
    if not legs.text_total_exact:  # past the count limit: the words match at least this many
        relation = "gte"
    if legs.text_total > len(legs.text) and alone:
        # The word leg was cut at depth: a meaning-only hit may be a word match further
        # down. The legs or the page fetch say which of them the words match (then no
        # request of its own); else the engine counts the union exactly when asked to, and
        # otherwise the answer says at least the larger part.
        found = legs.word_matches if legs.word_matches is not None else word_matches
        if found is not None:
            extra = [i for i in alone if i not in found]
            return legs.text_total + len(extra), relation, None
        if not req.exact_total:
            return max(legs.text_total, len(scored)), "gte", None
        return count_facets(match, 0).total, relation, None
    return legs.text_total + len(alone), relation, None
