"""Presentation helpers of the web page: Jinja2 environment, filters, and the search form's state.

Nothing here searches: the page hands the form's values to suli.search_params.search_request and
renders the core's bodies (suli.render), exactly as the HTTP API does.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import jinja2
from markupsafe import Markup, escape
from starlette.datastructures import QueryParams

from suli.errors import InvalidInput

HERE = Path(__file__).parent
LIST_FILTERS = ("kind", "outcome", "board", "agent", "station", "tag")
LIMITS = (10, 25)
_MARK = re.compile(r"(</?mark>)")
# Where an id or agent name may wrap: after the separators of `prn_release_bot-2`, `a.b:c/d`.
_SEPARATOR = re.compile(r"(?<=[_\-.:/@])(?=.)", re.DOTALL)


def snippet_html(snippet: str | None) -> Markup:
    """The core's snippet (HTML-safe, words in <mark>), re-escaped so only <mark> survives."""
    out: list[str] = []
    depth = 0
    for part in _MARK.split(snippet or ""):
        if part == "<mark>" and depth == 0:
            out.append(part)
            depth = 1
        elif part == "</mark>" and depth == 1:
            out.append(part)
            depth = 0
        elif part not in ("<mark>", "</mark>"):
            out.append(html.escape(html.unescape(part), quote=False))
    if depth:
        out.append("</mark>")
    return Markup("".join(out))


def safe_url(url: str | None) -> str | None:
    """Only http(s) links are followed; anything else (javascript:, data:) is shown as text."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return url if parts.scheme in ("http", "https") and parts.netloc else None


def breakable(value: object) -> Markup:
    """An id or name, escaped, with a line-break chance (<wbr>) after each separator: it wraps
    between its parts, never inside one (the CSS keeps `overflow-wrap: normal` there)."""
    parts = _SEPARATOR.split("" if value is None else str(value))
    return Markup("<wbr>").join(escape(p) for p in parts)  # Markup parts: escaped once


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """'1 item', '2 items', '0 items'; '1 match', '3 matches' with plural='matches'."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def day(value: str | None) -> str:
    """'2026-01-15T12:00:00Z' -> '2026-01-15' (UTC)."""
    if not value:
        return ""
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).date().isoformat()
    except ValueError:
        return value


def environment() -> jinja2.Environment:
    """Autoescape on for every template: only snippet_html output is trusted markup."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["snippet"] = snippet_html
    env.filters["safe_url"] = safe_url
    env.filters["day"] = day
    env.filters["breakable"] = breakable
    env.filters["counted"] = counted
    return env


@dataclass
class Form:
    """The search form as the user sent it: words, chosen filter values, dates, limit."""

    q: str = ""
    chosen: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in LIST_FILTERS})
    since: str = ""
    until: str = ""
    limit: int = LIMITS[0]
    limit_raw: str = ""
    cursor: str = ""  # the `next` of the page before: this page's position

    @classmethod
    def parse(cls, params: QueryParams) -> Form:
        chosen = {
            k: list(dict.fromkeys(v for raw in params.getlist(k) if (v := raw.strip())))
            for k in LIST_FILTERS
        }
        limit_raw = params.get("limit", "").strip()
        form = cls(
            q=params.get("q", "").strip(),
            chosen=chosen,
            since=params.get("since", "").strip(),
            until=params.get("until", "").strip(),
            limit_raw=limit_raw,
            cursor=params.get("cursor", "").strip(),
        )
        if limit_raw:
            try:
                form.limit = int(limit_raw)
            except ValueError:
                form.limit = 0  # search_request names the field
        return form

    def search_args(self) -> dict[str, Any]:
        """Keyword arguments of suli.search_params.search_request (the CLI's and HTTP's validation)."""
        if self.limit_raw and self.limit == 0:
            raise InvalidInput(f"limit: expected a whole number, got {self.limit_raw!r}", "limit")
        return {
            **{k: v or None for k, v in self.chosen.items()},
            "since": self.since or None,
            "until": self.until or None,
            "limit": self.limit,
            "cursor": self.cursor or None,
            "facets": True,
        }

    @property
    def active(self) -> int:
        """How many filters are set (for the collapsed filter panel's label)."""
        n = sum(len(v) for v in self.chosen.values())
        return n + bool(self.since) + bool(self.until)

    def url(self, **changes: Any) -> str:
        """This form's search URL with some values changed (e.g. limit=25, cursor=next);
        a page position is kept only when given (a new limit starts again at page 1)."""
        pairs: list[tuple[str, str]] = [("q", self.q)] if self.q else []
        for k, vals in self.chosen.items():
            pairs += [(k, v) for v in vals]
        for k in ("since", "until"):
            if getattr(self, k):
                pairs.append((k, getattr(self, k)))
        limit = changes.get("limit", self.limit)
        if limit != LIMITS[0]:
            pairs.append(("limit", str(limit)))
        if changes.get("cursor"):
            pairs.append(("cursor", changes["cursor"]))
        return "/?" + urlencode(pairs) if pairs else "/"


@dataclass(frozen=True)
class Option:
    value: str
    label: str
    count: int | None
    checked: bool


def facet_options(
    facets: Mapping[str, list[Mapping[str, Any]]],
    form: Form,
    labels: Mapping[str, str],
) -> dict[str, list[Option]]:
    """Checkbox options per filter: visible facet values with counts, plus any chosen value."""
    out: dict[str, list[Option]] = {}
    for name in LIST_FILTERS:
        chosen = form.chosen.get(name, [])
        opts = [
            Option(v["value"], labels.get(v["value"], v["value"]), v["count"], v["value"] in chosen)
            for v in facets.get(name, [])
        ]
        seen = {o.value for o in opts}
        # A chosen value with no visible items still shows (checked), so it can be unticked.
        opts += [Option(v, labels.get(v, v), None, True) for v in chosen if v not in seen]
        out[name] = opts
    return out


def previous_url(form: Form, offset: int, cursor_at: Callable[[int], str]) -> str | None:
    """The link to the page before the one at `offset`, or None on the first page.

    Its cursor is made here for the signed-in caller (`cursor_at`), never carried over from
    the URL, so a shared link cannot hand anyone a cursor of someone else. A page one limit
    back is the page before, however the user got here (the first page has no cursor)."""
    if offset <= 0:
        return None
    start = max(0, offset - form.limit)
    return form.url(cursor=cursor_at(start)) if start else form.url()


def next_path(raw: str | None) -> str:
    """A local path to return to after sign-in (never another site: no open redirect)."""
    if not raw or not raw.startswith("/") or raw.startswith("//") or "\\" in raw:
        return "/"
    return raw
