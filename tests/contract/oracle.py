"""The leak property's expected answers, written from DESIGN.md alone (no product code).

It reads the raw JSON objects the test fed to the indexer (not the product's parsed `Item`),
so a bug in parsing, in the visibility rule or in a backend's rendering of it cannot also
shape the expected answer. Deliberately tiny and naive: one loop per question.

DESIGN.md section 2: a principal sees an item iff the item is in the principal's workspace
and (it is workspace-wide, or it is on a board whose ACL lists the principal or one of its
groups, or it is a personal upload whose uploader is that person). Section 3.7: filters.
Section 3.10: facets, counted disjunctively. Section 3.12: typos.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from typing import Any

Raw = Mapping[str, Any]  # one item exactly as given to the indexer


@dataclass(frozen=True)
class Person:
    id: str
    workspace: str
    groups: frozenset[str]


@dataclass(frozen=True)
class Acl:
    board: str
    workspace: str
    members: frozenset[str]
    groups: frozenset[str]


@dataclass(frozen=True)
class Ask:
    """The filters of one request as the caller gave them (section 3.7)."""

    kinds: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    boards: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    stations: tuple[str, ...] = ()  # an id or a name
    tags: tuple[str, ...] = ()
    since: date | None = None
    until: date | None = None
    hidden: bool = False
    regex: str | None = None
    params: dict[str, Any] = field(default_factory=dict, compare=False)


def sees(who: Person, acls: Iterable[Acl], it: Raw) -> bool:
    """Section 2, spelled out."""
    if it["workspace"] != who.workspace:
        return False
    board, uploader = it.get("board"), it.get("uploader")
    if board:
        return any(
            a.board == board
            and a.workspace == who.workspace
            and (who.id in a.members or bool(who.groups & a.groups))
            for a in acls
        )
    if uploader:
        return bool(uploader == who.id)
    return True


def _day(v: Any) -> date:
    if isinstance(v, datetime):
        return v.date()  # the test gives UTC datetimes
    return datetime.fromisoformat(str(v).replace("Z", "+00:00")).date()


def passes(it: Raw, ask: Ask) -> bool:
    """Filters: any of the values of one filter, all filters together (section 3.7)."""
    if ask.kinds and it.get("kind", "artifact") not in ask.kinds:
        return False
    if ask.outcomes and it.get("outcome") not in ask.outcomes:
        return False
    if ask.boards and it.get("board") not in ask.boards:
        return False
    if ask.agents and it.get("agent") not in ask.agents:
        return False
    if ask.stations:
        names = {s["id"] for s in it.get("stations", [])} | {
            s["name"] for s in it.get("stations", [])
        }
        if not names & set(ask.stations):
            return False
    if ask.tags and not set(it.get("tags", [])) & set(ask.tags):
        return False
    if ask.since and _day(it["last_activity_at"]) < ask.since:
        return False
    if ask.until and _day(it["last_activity_at"]) > ask.until:
        return False
    if it.get("hidden") and not ask.hidden:
        return False
    if ask.regex:  # anywhere in the title or the body, case-insensitive
        rx = re.compile(ask.regex, re.IGNORECASE | re.DOTALL)
        if not (rx.search(it.get("title", "")) or rx.search(it.get("body", ""))):
            return False
    return True


def visible(who: Person, acls: Sequence[Acl], items: Iterable[Raw]) -> dict[str, Raw]:
    return {it["id"]: it for it in items if sees(who, acls, it)}


def matching(who: Person, acls: Sequence[Acl], items: Iterable[Raw], ask: Ask) -> list[str]:
    """Browse's answer: visible items passing the filters, newest last activity first."""
    got = [it for it in items if sees(who, acls, it) and passes(it, ask)]
    got.sort(key=lambda it: it["last_activity_at"], reverse=True)
    return [it["id"] for it in got]


def facets(items: Iterable[Raw]) -> dict[str, dict[str, int]]:
    """Facet values and counts by brute force (an item counts once per value)."""
    out: dict[str, dict[str, int]] = {}

    def bump(name: str, values: Iterable[Any]) -> None:
        for v in set(values):
            if v is not None:
                out.setdefault(name, {}).setdefault(v, 0)
                out[name][v] += 1

    for it in items:
        bump("kind", [it.get("kind", "artifact")])
        bump("outcome", [it.get("outcome")])
        bump("board", [it.get("board")])
        bump("agent", [it.get("agent")])
        bump("station", [s["name"] for s in it.get("stations", [])])
        bump("tag", it.get("tags", []))
    return out


def replacement(who: Person, acls: Sequence[Acl], items: Mapping[str, Raw], it: Raw) -> Any:
    """The superseded_by a result may name: the replacement only when the caller sees it."""
    target = it.get("superseded_by")
    if target and target in items and sees(who, acls, items[target]):
        return target
    return None


_STOPWORDS = frozenset({"the", "a", "an", "of", "and", "or", "to", "in"})  # enough for the tests


def word_hits(items: Iterable[Raw], query: str) -> set[str]:
    """Items sharing a non-stopword with the query in title or body: a word search must find
    each of them (section 3.4: an exact-word match is always kept)."""
    want = {w for w in re.findall(r"\w+", query.lower()) if w not in _STOPWORDS}
    out = set()
    for it in items:
        have = set(re.findall(r"\w+", f"{it.get('title', '')} {it.get('body', '')}".lower()))
        if want & have:
            out.add(it["id"])
    return out


# Section 3.10: which filter narrows which facet (the station facet lists station names).
FACET_FILTER = {
    "kind": "kinds",
    "outcome": "outcomes",
    "board": "boards",
    "agent": "agents",
    "station": "stations",
    "tag": "tags",
}


def disjunctive_facets(
    who: Person,
    acls: Sequence[Acl],
    items: Sequence[Raw],
    ask: Ask,
    matches: Callable[[Raw], bool] = lambda it: True,
) -> dict[str, dict[str, int]]:
    """Section 3.10: each facet's counts over the visible items that match the query and pass
    every filter but that facet's own (facets with no value left out)."""
    out: dict[str, dict[str, int]] = {}
    for name, attr in FACET_FILTER.items():
        lifted = replace(ask, **{attr: ()})
        pool = [it for it in items if sees(who, acls, it) and passes(it, lifted) and matches(it)]
        counts = facets(pool).get(name)
        if counts:
            out[name] = counts
    return out


def edits(a: str, b: str) -> int:
    """Edits from a to b: insert, delete, substitute, or swap two neighbours (each one)."""
    d = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) + 1):
        d[i][0] = i
    for j in range(len(b) + 1):
        d[0][j] = j
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(
                d[i - 1][j] + 1,
                d[i][j - 1] + 1,
                d[i - 1][j - 1] + (a[i - 1] != b[j - 1]),
            )
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


def typo_near(query_word: str, word: str) -> bool:
    """Section 3.12: a word of 5 to 7 letters may be one edit off, of 8 or more two, the first
    letter right; shorter words must be exact."""
    n = len(query_word)
    allowed = 0 if n < 5 else 1 if n < 8 else 2
    return allowed > 0 and word[:1] == query_word[:1] and edits(query_word, word) <= allowed


def typo_hits(items: Iterable[Raw], query: str) -> set[str]:
    """Items a word search finds through its typo clause: a title or body word near a query
    word (not a common word), or starting with the query's last word (3+ letters)."""
    qws = [w for w in re.findall(r"\w+", query.lower()) if w not in _STOPWORDS]
    last = re.findall(r"\w+", query.lower())[-1:] or [""]
    prefix = last[0] if len(last[0]) >= 3 and last[0] not in _STOPWORDS else None
    out = set()
    for it in items:
        have = set(re.findall(r"\w+", f"{it.get('title', '')} {it.get('body', '')}".lower()))
        if any(typo_near(q, w) for q in qws for w in have if w not in _STOPWORDS) or (
            prefix is not None and any(w.startswith(prefix) for w in have)
        ):
            out.add(it["id"])
    return out


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na, nb = sum(x * x for x in a) ** 0.5, sum(y * y for y in b) ** 0.5
    return dot / (na * nb) if na and nb else 0.0


def meaning_kept(
    pool: Iterable[Raw],
    vectors: Mapping[str, Sequence[float]],
    query: Sequence[float],
    depth: int,
    margin: float,
    floor: float,
) -> set[str]:
    """Section 3.4 over the k-NN leg: the `depth` items of the pool nearest the query (ties
    by id), of which those within `margin` of the nearest one and at or above `floor`."""
    scored = [(cosine(vectors[it["id"]], query), it["id"]) for it in pool]
    near = sorted(scored, key=lambda p: (-p[0], p[1]))[:depth]
    if not near:
        return set()
    best = near[0][0]
    return {i for s, i in near if s >= floor and s >= best - margin}


def search_matches(
    who: Person,
    acls: Sequence[Acl],
    items: Iterable[Raw],
    ask: Ask,
    query: str | None,
    meaning: Callable[[list[Raw]], set[str]] | None = None,
) -> set[str]:
    """The items a search matches (its `total` is their number): the visible items passing the
    filters that its words find, exactly or through a typo (`query` None: no word leg), plus,
    with a vector leg (`meaning`: the kept meaning hits of a pool), those kept by meaning."""
    pool = [it for it in items if sees(who, acls, it) and passes(it, ask)]
    found = set() if query is None else word_hits(pool, query) | typo_hits(pool, query)
    if meaning is not None:
        found |= meaning(pool)
    return found
