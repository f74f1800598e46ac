"""One search from any edge's parameters: HTTP's query or body, the CLI's flags, MCP's arguments.

Each edge parses its own input (pydantic, Click, the MCP SDK) into a plain mapping and hands it
here, so the same parameters mean the same search everywhere and a parameter added to the core
needs no list of keywords repeated per edge. The core imports no edge: this takes only names
and values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from suli.errors import InvalidInput
from suli.models import SearchRequest
from suli.validate import MAX_QUERY_CHARS, search_request

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
