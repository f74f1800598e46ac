"""The leak property's expected answers, written from DESIGN.md alone (no product code).

It reads the raw JSON objects the test fed to the indexer (not the product's parsed `Item`),
so a bug in parsing, in the visibility rule or in a backend's rendering of it cannot also
shape the expected answer. Deliberately tiny and naive: one loop per question.

DESIGN.md section 2: a principal sees an item iff the item is in the principal's workspace
and (it is workspace-wide, or it is on a board whose ACL lists the principal or one of its
groups, or it is a personal upload whose uploader is that person). Section 3.7: filters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
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
