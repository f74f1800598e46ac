"""Domain types of the core: plain frozen dataclasses (pydantic lives at the edges and in validate.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Literal

KINDS = ("artifact", "work-record")
OUTCOMES = ("approved", "completed", "in-progress", "superseded", "rejected", "failed", "abandoned")
Scope = Literal["workspace", "board", "personal"]
Mode = Literal["hybrid", "text", "vector"]


@dataclass(frozen=True)
class Station:
    id: str
    name: str


@dataclass(frozen=True)
class Item:
    """A work item as stored; see DESIGN.md section 1."""

    id: str
    workspace: str
    title: str
    kind: str = "artifact"
    body: str = ""
    outcome: str | None = None
    board: str | None = None
    uploader: str | None = None
    agent: str | None = None
    stations: tuple[Station, ...] = ()
    superseded_by: str | None = None
    references: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    media_type: str = "text/markdown"
    path: str = ""
    caption: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    last_activity_at: datetime | None = None
    url: str = ""
    hidden: bool = False

    @property
    def scope(self) -> Scope:
        if self.board:
            return "board"
        if self.uploader:
            return "personal"
        return "workspace"

    @property
    def is_binary(self) -> bool:
        """Binaries are found by title, path and caption only (their body is not text)."""
        mt = self.media_type or ""
        return not (
            mt.startswith("text/") or mt in ("application/json", "application/markdown", "")
        )

    def embed_text(self) -> str:
        """The text that gets embedded: title + body, or title + path + caption for binaries."""
        if self.is_binary:
            return " ".join(p for p in (self.title, self.path, self.caption) if p)
        return f"{self.title} {self.body}".strip()


@dataclass(frozen=True)
class Principal:
    id: str
    workspace: str
    kind: Literal["person", "agent"] = "person"
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class BoardAcl:
    board: str
    workspace: str
    name: str = ""
    members: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class Filters:
    kinds: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    boards: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    stations: tuple[str, ...] = ()  # station id or name
    tags: tuple[str, ...] = ()
    since: date | None = None  # inclusive, on last_activity_at (UTC)
    until: date | None = None  # inclusive, on last_activity_at (UTC)
    include_hidden: bool = False
    exclude_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class SearchRequest:
    """One search as the core sees it, after validation (see suli.search_params.search_request)."""

    query: str = ""
    filters: Filters = Filters()
    limit: int = 10
    mode: Mode = "hybrid"
    regex: str | None = None
    explain: bool = False
    cursor: str | None = None  # a `next` token of an earlier page of this same search
    offset: int = 0  # where the page starts in the ranked list (local callers; else cursor)
    facets: bool = False  # also count facet values over this search's matches
    # `total` exact even where counting costs the engine (DESIGN 3.7); else what comes free:
    # a true lower bound ("gte") past Settings.total_count_limit or a cut word leg.
    exact_total: bool = False


@dataclass(frozen=True)
class Explain:
    """What the caller may know of a result's rank. No raw text (BM25) score: it is made of
    corpus statistics over every item, including ones the caller cannot see."""

    text_rank: int | None
    vector_rank: int | None
    vector_similarity: float | None
    rrf: float
    text_share: float
    vector_share: float
    outcome_weight: float
    score: float
    kept: str


@dataclass(frozen=True)
class Result:
    id: str
    kind: str
    title: str
    outcome: str | None
    scope: Scope
    board: str | None
    provenance: dict[str, Any]
    snippet: str
    url: str
    superseded: bool
    superseded_by: str | None
    last_activity_at: datetime | None
    score: float
    explain: Explain | None = None


@dataclass(frozen=True)
class Degraded:
    leg: str
    reason: str


@dataclass(frozen=True)
class FacetCounts:
    """Facet values with counts over a set of visible items; see docs/decisions.md."""

    total: int
    values: dict[str, list[tuple[str, int]]]  # facet name -> [(value, count)], most first
    more: dict[str, bool] = field(default_factory=dict)  # name -> values beyond the cap exist


@dataclass(frozen=True)
class SearchResponse:
    results: tuple[Result, ...]
    # Visible items matching the search (never counts invisible items); exact when
    # total_relation is "eq", a lower bound when "gte" (docs/decisions.md, "Search answers").
    total: int
    timings_ms: dict[str, float]
    degraded: tuple[Degraded, ...] = ()
    truncated: bool = False
    rerank: str = "off"
    total_relation: Literal["eq", "gte"] = "eq"
    offset: int = 0  # position of the first result in the ranked list
    has_more: bool = False  # a next page exists (within the candidate depth)
    next: str | None = None  # the cursor of the next page
    facets: FacetCounts | None = None
    dropped: dict[str, int] | None = None  # explain: hits left out, by reason
    # Hybrid (and related): pages stop after this many results, the fused candidates, when
    # `total` counts more; None when paging reaches every result `total` counts.
    paging_limit: int | None = None
