"""The meaning-only hits a ticked facet counts: those the search with each of its values keeps.

A facet whose own filter is ticked is counted with that filter lifted (DESIGN 3.10), so its
count for a value must be what the search with that value would total: the word matches plus
the meaning-only hits *that* search keeps. The search's own kept hits were found under the
ticked filter and miss the other values' hits; and each value's search gates its hits
against its own best similarity (DESIGN 3.4), not the best of the values ticked together.

So each ticked facet runs the vector leg once with its own filter lifted, and its hits are
narrowed per value in Python, each value gated against its own best. A leg cut at depth
holds every hit above its last similarity; a value whose gates that last one still passes
may keep more further down, and only then is that value's own leg asked for (and, when the
last one passes the floor, every value of the facet that the cut leg did not reach).
See docs/decisions.md, "Facet counts of a ticked facet, hybrid".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from suli.backends.base import FACET_CAP, Facets, Hit, LegResults, MatchSet
from suli.models import Filters, Item
from suli.ranking import meaning_kept

# Each facet and the filter that narrows it (the station facet lists names; its filter takes an
# id or a name, and is the facet's own either way).
FACET_FILTERS = {
    "kind": "kinds",
    "outcome": "outcomes",
    "board": "boards",
    "agent": "agents",
    "station": "stations",
    "tag": "tags",
}


def facet_values(it: Item, name: str) -> frozenset[str]:
    """The values item `it` counts under facet `name` (what the facet lists)."""
    if name == "station":
        return frozenset(s.name for s in it.stations)
    if name == "tag":
        return frozenset(it.tags)
    one = {"kind": it.kind, "outcome": it.outcome, "board": it.board, "agent": it.agent}[name]
    return frozenset({one}) if one else frozenset()


@dataclass(frozen=True)
class Reads:
    """What the count reads, under the search's visibility and by its deadline."""

    vector: Callable[[Filters], LegResults]  # the search's vector leg under other filters
    items: Callable[[Sequence[str]], Mapping[str, Item]]  # visible items by id
    facets: Callable[[Filters, MatchSet, int], Facets]  # facet counts under other filters


@dataclass(frozen=True)
class Gates:
    depth: int
    margin: float
    floor: float

    def kept(self, hits: Sequence[Hit]) -> tuple[str, ...]:
        """The hits of one vector leg (best first) that its search keeps when the words do not
        match them (DESIGN 3.4: within the margin of the leg's best, and above the floor)."""
        if not hits:
            return ()
        best = hits[0].score
        return tuple(h.id for h in hits if meaning_kept(h.score, best, self.margin, self.floor))


@dataclass(frozen=True)
class Lifted:
    """One ticked facet's meaning-only hits: per value, the ones the search with that value
    keeps, and each hit's values of the facet."""

    name: str
    kept: dict[str, tuple[str, ...]]
    values: dict[str, frozenset[str]]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(i for ids in self.kept.values() for i in ids))

    def overcounts(self, value: str) -> bool:
        """Counting the facet over all of `ids` counts, for `value`, a hit that the search with
        `value` does not keep (an item of several tags or stations, kept for another one)."""
        own = set(self.kept.get(value, ()))
        return any(value in self.values.get(i, ()) and i not in own for i in self.ids)


def _values_of(name: str, hits: Sequence[Hit], reads: Reads) -> dict[str, frozenset[str]]:
    if name == "outcome":  # the legs carry it: no read
        return {h.id: frozenset({h.outcome}) if h.outcome else frozenset() for h in hits}
    items = reads.items([h.id for h in hits]) if hits else {}
    return {h.id: facet_values(items[h.id], name) if h.id in items else frozenset() for h in hits}


def _with(filters: Filters, name: str, values: tuple[str, ...]) -> Filters:
    changed: dict[str, Any] = {FACET_FILTERS[name]: values}
    return replace(filters, **changed)


def lifted_meaning(filters: Filters, regex: str | None, gates: Gates, reads: Reads) -> list[Lifted]:
    """Each ticked facet's meaning-only hits (a facet whose lifted leg failed is left out: it
    is counted over the search's own hits, as before)."""
    out: list[Lifted] = []
    for name, attr in FACET_FILTERS.items():
        if not getattr(filters, attr):
            continue
        lifted = _with(filters, name, ())
        legs = reads.vector(lifted)
        if "vector" in legs.errors:
            continue
        hits = list(legs.vector)
        # A hit below the floor is kept under no value's gates: its values are not read.
        values = _values_of(name, [h for h in hits if h.score >= gates.floor], reads)
        groups: dict[str, list[Hit]] = {}
        for h in hits:
            for v in sorted(values.get(h.id, ())):
                groups.setdefault(v, []).append(h)
        kept = {v: gates.kept(g) for v, g in groups.items()}
        last = hits[-1].score if hits and len(hits) >= gates.depth else None
        open_values: list[str] = []
        if last is not None:
            # A value's search may keep hits below this leg's cut: ask its own leg.
            open_values = [
                v
                for v, g in groups.items()
                if meaning_kept(last, g[0].score, gates.margin, gates.floor)
            ]
            if last >= gates.floor:  # values the cut leg never reached may keep their best
                every = reads.facets(
                    lifted, MatchSet(regex=regex, every=True), FACET_CAP
                ).values.get(name, [])
                open_values += [v for v, _ in every if v not in groups]
        for v in open_values:
            own = reads.vector(_with(filters, name, (v,)))
            if "vector" in own.errors:
                continue
            kept[v] = gates.kept(own.vector)
            fresh = [h for h in own.vector if h.id not in values]
            values.update(_values_of(name, fresh, reads))
        out.append(Lifted(name, {v: ids for v, ids in kept.items() if ids}, values))
    return out


def corrected(
    facets: Facets, filters: Filters, match: MatchSet, lifted: Sequence[Lifted], reads: Reads
) -> Facets:
    """Counts of a many-valued facet (tags, stations) counted over all of its lifted hits,
    recounted for each value that would count a hit its own search does not keep."""
    values = {k: list(v) for k, v in facets.values.items()}
    for part in lifted:
        got = values.get(part.name, [])
        fixed = False
        for n, (value, _) in enumerate(got):
            if part.overcounts(value):
                own = MatchSet(match.text, match.text_fields, match.regex, part.kept.get(value, ()))
                narrowed = _with(filters, part.name, (value,))
                got[n] = (value, reads.facets(narrowed, own, 0).total)
                fixed = True
        if fixed:
            values[part.name] = sorted(
                ((v, c) for v, c in got if c), key=lambda kv: (-kv[1], kv[0])
            )
    return Facets(facets.total, values, dict(facets.more))
