"""Search parameters, validated into one SearchRequest (search_request), from any edge's
parameters (request_from): HTTP's query or body, the CLI's flags, MCP's arguments.

Each edge parses its own input (pydantic, Click, the MCP SDK) into a plain mapping and hands it
here, so the same parameters mean the same search everywhere and a parameter added to the core
needs no list of keywords repeated per edge. The core imports no edge: this takes only names
and values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

from suli.errors import InvalidInput
from suli.models import KINDS, OUTCOMES, Filters, SearchRequest

MAX_LIMIT = 25
MAX_QUERY_CHARS = 1000
MAX_REGEX_CHARS = 200
MAX_FILTER_VALUES = 50

# Every parameter of search_request an edge may pass. `max_query_chars` comes from the
# settings, not from the caller, and `today` only from tests.
NAMES = (
    "query",
    "kind",
    "outcome",
    "board",
    "agent",
    "station",
    "tag",
    "since",
    "until",
    "recent_days",
    "limit",
    "regex",
    "mode",
    "explain",
    "include_hidden",
    "cursor",
    "page",
    "facets",
    "exact_total",
)
# Edge names that differ from the core's: HTTP says `q` and `hidden`, short as in a URL.
ALIASES = {"q": "query", "hidden": "include_hidden"}


def request_from(
    params: Mapping[str, Any], *, max_query_chars: int = MAX_QUERY_CHARS
) -> SearchRequest:
    """The SearchRequest for an edge's parameters (core names or their ALIASES).

    None means not given, so search_request's default applies (an MCP argument left out, an
    unset Click option). A name that is no search parameter is a bug of the edge (TypeError,
    never silently dropped); a parameter given under both its names is the caller's error."""
    args: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    for name, value in params.items():
        key = ALIASES.get(name, name)
        if key not in NAMES:
            raise TypeError(f"{name!r} is not a search parameter (known: {', '.join(NAMES)})")
        if key in given_as:
            raise InvalidInput(f"{name}: give {name} or {given_as[key]}, not both", name)
        given_as[key] = name
        if value is not None:
            args[key] = value
    return search_request(args.pop("query", None), **args, max_query_chars=max_query_chars)


def _values(v: str | Iterable[str] | None, field: str) -> tuple[str, ...]:
    """Accept 'a,b', ['a', 'b'] or ['a,b']: the CLI and HTTP send lists differently."""
    if v is None:
        return ()
    parts = [v] if isinstance(v, str) else list(v)
    out: list[str] = []
    for p in parts:
        if not isinstance(p, str):
            raise InvalidInput(f"{field}: expected text values", field)
        out.extend(x.strip() for x in p.split(",") if x.strip())
    if len(out) > MAX_FILTER_VALUES:
        raise InvalidInput(f"{field}: at most {MAX_FILTER_VALUES} values", field)
    if any(len(x) > 200 for x in out):
        raise InvalidInput(f"{field}: values are at most 200 characters", field)
    return tuple(dict.fromkeys(out))


def _date(v: str | date | None, field: str) -> date | None:
    if v is None or v == "":
        return None
    if isinstance(v, datetime):
        return v.astimezone(UTC).date() if v.tzinfo else v.date()
    if isinstance(v, date):
        return v
    try:
        return date.fromisoformat(str(v).strip())
    except ValueError:
        raise InvalidInput(f"{field}: expected a date YYYY-MM-DD (UTC), got {v!r}", field) from None


def _regex(pattern: str) -> str:
    if len(pattern) > MAX_REGEX_CHARS:
        raise InvalidInput(f"regex: at most {MAX_REGEX_CHARS} characters", "regex")
    try:
        re.compile(pattern)
    except re.error as e:
        raise InvalidInput(f"regex: invalid pattern ({e})", "regex") from None
    # Lookarounds and backreferences have no linear-time engine: refuse them up front.
    if re.search(r"\(\?[=!<]|\\[1-9]", pattern):
        raise InvalidInput("regex: lookarounds and backreferences are not supported", "regex")
    return pattern


def search_request(
    query: str | None = None,
    *,
    kind: str | Iterable[str] | None = None,
    outcome: str | Iterable[str] | None = None,
    board: str | Iterable[str] | None = None,
    agent: str | Iterable[str] | None = None,
    station: str | Iterable[str] | None = None,
    tag: str | Iterable[str] | None = None,
    since: str | date | None = None,
    until: str | date | None = None,
    recent_days: int | None = None,
    limit: int | None = None,
    regex: str | None = None,
    mode: str = "hybrid",
    explain: bool = False,
    include_hidden: bool = False,
    max_query_chars: int = MAX_QUERY_CHARS,
    today: date | None = None,
    cursor: str | None = None,
    page: int | None = None,
    facets: bool = False,
    exact_total: bool = False,
) -> SearchRequest:
    """Validate loose search parameters from any edge into one SearchRequest.

    `cursor`: the `next` of an earlier page (checked by the Searcher against the caller and
    the search); `page`: 1-based, for local callers (the CLI), not with a cursor."""
    q = (query or "").strip()
    if len(q) > max_query_chars:
        raise InvalidInput(f"query: at most {max_query_chars} characters", "query")
    kinds = _values(kind, "kind")
    for k in kinds:
        if k not in KINDS:
            raise InvalidInput(f"kind: unknown kind {k!r} (one of {', '.join(KINDS)})", "kind")
    outcomes = _values(outcome, "outcome")
    for o in outcomes:
        if o not in OUTCOMES:
            raise InvalidInput(
                f"outcome: unknown outcome {o!r} (one of {', '.join(OUTCOMES)})", "outcome"
            )
    if limit is None:
        limit = 10
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit: must be an integer from 1 to {MAX_LIMIT}", "limit")
    if mode not in ("hybrid", "text", "vector"):
        raise InvalidInput("mode: one of hybrid, text, vector", "mode")
    since_d, until_d = _date(since, "since"), _date(until, "until")
    if recent_days is not None:
        if (
            isinstance(recent_days, bool)
            or not isinstance(recent_days, int)
            or not 1 <= recent_days <= 3650
        ):
            raise InvalidInput("recent_days: must be an integer from 1 to 3650", "recent_days")
        if since_d is not None:
            raise InvalidInput(
                "recent_days: give either recent_days or since, not both", "recent_days"
            )
        since_d = (today or datetime.now(UTC).date()) - timedelta(days=recent_days - 1)
    if since_d and until_d and since_d > until_d:
        raise InvalidInput("since: must not be after until", "since")
    rx = _regex(regex) if regex else None
    if cursor is not None and (not isinstance(cursor, str) or not cursor.strip()):
        raise InvalidInput("cursor: must be the `next` value of an earlier page", "cursor")
    offset = 0
    if page is not None:
        if isinstance(page, bool) or not isinstance(page, int) or page < 1:
            raise InvalidInput("page: must be a whole number from 1", "page")
        if cursor:
            raise InvalidInput("page: give either page or cursor, not both", "page")
        offset = (page - 1) * limit
    return SearchRequest(
        query=q,
        filters=Filters(
            kinds=kinds,
            outcomes=outcomes,
            boards=_values(board, "board"),
            agents=_values(agent, "agent"),
            stations=_values(station, "station"),
            tags=_values(tag, "tag"),
            since=since_d,
            until=until_d,
            include_hidden=bool(include_hidden),
        ),
        limit=limit,
        mode=mode,  # type: ignore[arg-type]
        regex=rx,
        explain=bool(explain),
        cursor=cursor.strip() if cursor else None,
        offset=offset,
        facets=bool(facets),
        exact_total=bool(exact_total),
    )
