"""The filters of a request (DESIGN 3.7) applied to one item in Python.

The backends render the same filters into their own query language (OpenSearch's `bool.filter`,
SQL); this is the rule for an item already in hand: the in-memory backend's every read, and the
page OpenSearch reads by id after fusion (suli.backends.opensearch.reads), whose items must pass
the search's filters again as they are now.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

from suli.models import Filters, Item


def _day(d: datetime | None) -> date | None:
    return d.astimezone(UTC).date() if d is not None else None


def passes(item: Item, filters: Filters) -> bool:
    """Every filter but the regex (which each store applies with its own engine)."""
    checks = (
        (filters.kinds, (item.kind,)),
        (filters.outcomes, (item.outcome,)),
        (filters.boards, (item.board,)),
        (filters.agents, (item.agent,)),
        (filters.stations, (*(s.id for s in item.stations), *(s.name for s in item.stations))),
        (filters.tags, item.tags),
    )
    for wanted, have in checks:
        if wanted and not set(wanted).intersection(v for v in have if v is not None):
            return False
    # since/until are inclusive UTC days, as OpenSearch's `||/d` rounding reads them.
    day = _day(item.last_activity_at)
    if filters.since and (day is None or day < filters.since):
        return False
    if filters.until and (day is None or day > filters.until):
        return False
    if item.hidden and not filters.include_hidden:
        return False
    return item.id not in filters.exclude_ids
