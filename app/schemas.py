"""API schemas (pydantic, for validation and OpenAPI); not domain types.

Responses are built from suli.render dicts and filtered through these models, so nothing the
models do not name (vectors, ACLs, uploader, hidden fields) can be serialized by accident.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

MAX_LIMIT = 25
MAX_BATCH = 1000  # items per ingestion request: bounded so one request's work stays bounded
Timings = dict[str, float]
# An item id or URL: never blank (an empty id is no reference, and OpenSearch refuses it).
Reference = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


# JSON bodies are typed by the client: a number must be a JSON number (`limit: true` or "5" is
# a 422 naming the field, not 1 or 5). Query strings are text, so their models stay lax.
_STRICT_BODY = ConfigDict(extra="forbid", strict=True)


# ---- requests ----------------------------------------------------------------------------


class _Filters(_In):
    since: str | None = Field(
        None, description="Last activity on or after this UTC date (YYYY-MM-DD)."
    )
    until: str | None = Field(
        None, description="Last activity on or before this UTC date (YYYY-MM-DD)."
    )
    hidden: bool = Field(False, description="Include hidden items.")


class FacetsQuery(_Filters):
    """Query parameters of GET /api/v1/facets; list filters repeat or use commas.

    With words (`q`), the counts are over what that search matches (the set `total` counts);
    without, over every visible item passing the filters."""

    q: str = Field("", description="Words; counts follow this search's matches.")
    mode: Literal["hybrid", "text", "vector"] = "hybrid"
    regex: str | None = Field(
        None, max_length=200, description="Regular expression over title and body."
    )
    recent_days: int | None = Field(
        None, ge=1, le=3650, description="Only items active in the last N days."
    )
    kind: list[str] = Field(default_factory=list, description="artifact, work-record")
    outcome: list[str] = Field(default_factory=list)
    board: list[str] = Field(default_factory=list)
    agent: list[str] = Field(default_factory=list)
    station: list[str] = Field(default_factory=list, description="Station id or name.")
    tag: list[str] = Field(default_factory=list)


class _SearchOptions(BaseModel):
    q: str = Field("", description="Words; none browses newest first. Never query syntax.")
    recent_days: int | None = Field(
        None, ge=1, le=3650, description="Only items active in the last N days."
    )
    regex: str | None = Field(
        None, max_length=200, description="Regular expression over title and body."
    )
    limit: int = Field(10, ge=1, le=MAX_LIMIT)
    mode: Literal["hybrid", "text", "vector"] = "hybrid"
    explain: bool = Field(False, description="Add an explain block to each result.")
    cursor: str | None = Field(
        None,
        max_length=512,
        description="The `next` of the previous page: the same search, its next page.",
    )
    facets: bool = Field(
        False, description="Also count filter values over this search's matches (`facets`)."
    )


class SearchQuery(FacetsQuery, _SearchOptions):
    """Query parameters of GET /api/v1/search (the CLI's flags)."""

    # FacetsQuery's `q` would win by inheritance order: keep the search's own description.
    q: str = _SearchOptions.model_fields["q"]


class SearchBody(_Filters, _SearchOptions):
    """Body of POST /api/v1/search; a filter takes one value, a comma list or a JSON list."""

    model_config = _STRICT_BODY

    kind: str | list[str] | None = None
    outcome: str | list[str] | None = None
    board: str | list[str] | None = None
    agent: str | list[str] | None = None
    station: str | list[str] | None = None
    tag: str | list[str] | None = None


class RelatedBody(_In):
    """Related items for a visible item (item_id) or for an unsaved card (title, spec, references)."""

    model_config = _STRICT_BODY

    item_id: str | None = Field(None, max_length=128)
    title: str | None = Field(None, max_length=1000)
    spec: str = Field("", max_length=100_000)
    references: list[Reference] = Field(default_factory=list, max_length=500)
    limit: int = Field(10, ge=1, le=MAX_LIMIT)
    explain: bool = False


class BoardAclBody(_In):
    """A board's ACL; the workspace defaults to the admin's own."""

    model_config = _STRICT_BODY

    workspace: str | None = None
    name: str = ""
    members: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)


class PrincipalBody(_In):
    """A person or agent; the workspace defaults to the admin's own."""

    model_config = _STRICT_BODY

    workspace: str | None = None
    kind: Literal["person", "agent"] = "person"
    groups: list[str] = Field(default_factory=list)


# ---- responses ---------------------------------------------------------------------------


class ExplainOut(BaseModel):
    text_rank: int | None
    vector_rank: int | None
    vector_similarity: float | None
    rrf: float
    text_share: float
    vector_share: float
    outcome_weight: float
    score: float
    kept: str


class ResultOut(BaseModel):
    id: str
    kind: str
    title: str
    outcome: str | None
    scope: Literal["workspace", "board", "personal"]
    board: str | None
    provenance: dict[str, Any]
    snippet: str
    url: str
    superseded: bool
    superseded_by: str | None = Field(description="Named only when the caller may see it.")
    last_activity_at: str | None
    score: float
    explain: ExplainOut | None = None


class DegradedOut(BaseModel):
    leg: str
    reason: str


class FacetValue(BaseModel):
    value: str
    count: int


class FacetsBody(BaseModel):
    total: int = Field(description="Items counted: the same set as the search's `total`.")
    facets: dict[str, list[FacetValue]] = Field(
        description="Per filter, its values with counts, most first, up to 50."
    )
    more: dict[str, bool] = Field(description="A filter has values beyond the 50 listed.")


class SearchOut(BaseModel):
    results: list[ResultOut]
    total: int = Field(
        description="Visible items matching the search (all of them, not only this page): "
        "exact when total_relation is eq, a lower bound when gte."
    )
    total_relation: Literal["eq", "gte"] = Field(
        description="eq: total is exact; gte: at least total (the engine could not count all)."
    )
    offset: int = Field(description="Position of the first result in the ranked list.")
    has_more: bool = Field(description="A next page exists: send `next` as `cursor`.")
    next: str | None = Field(
        description="Opaque cursor of the next page (this caller, this search only)."
    )
    paging_limit: int | None = Field(
        None,
        description="Pages stop after this many results (a hybrid answer's fused candidates) "
        "although total counts more; null when paging reaches every match.",
    )
    facets: FacetsBody | None = Field(None, description="With facets=true only.")
    dropped: dict[str, int] | None = Field(
        None, description="With explain only: hits left out, by reason."
    )
    degraded: list[DegradedOut]
    truncated: bool = Field(description="Lowest-ranked results were cut to fit max_response_bytes.")
    rerank: str = Field(
        description="off, applied, skipped-<reason>, fallback-timeout or fallback-error."
    )
    timings_ms: Timings


class StationOut(BaseModel):
    id: str
    name: str


class ItemOut(BaseModel):
    id: str
    workspace: str
    kind: str
    title: str
    body: str
    outcome: str | None
    scope: Literal["workspace", "board", "personal"]
    board: str | None
    agent: str | None
    stations: list[StationOut]
    superseded: bool
    superseded_by: str | None
    references: list[str]
    tags: list[str]
    media_type: str
    path: str
    caption: str
    provenance: dict[str, Any]
    created_at: str | None
    updated_at: str | None
    last_activity_at: str | None
    url: str
    hidden: bool
    timings_ms: Timings


class FacetsOut(FacetsBody):
    timings_ms: Timings


class ItemOutcome(BaseModel):
    index: int = Field(description="Position in the request array (0-based).")
    id: str | None
    status: Literal["indexed", "rejected"]
    reason: str | None = None


class IngestOut(BaseModel):
    indexed: int
    rejected: int
    items: list[ItemOutcome]
    timings_ms: Timings


class DeleteOut(BaseModel):
    id: str
    status: Literal["deleted"]
    timings_ms: Timings


class BoardAclOut(BaseModel):
    board: str
    workspace: str
    name: str
    members: list[str]
    groups: list[str]
    timings_ms: Timings


class PrincipalOut(BaseModel):
    id: str
    workspace: str
    kind: str
    groups: list[str]
    timings_ms: Timings


class HealthOut(BaseModel):
    status: str


class ReadyOut(BaseModel):
    status: str


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable machine code, e.g. invalid_input, rate_limited.")
    message: str
    field: str | None = Field(None, description="The input field at fault, when there is one.")
    limit: int | None = Field(None, description="rate_limited only: the limit reached.")
    retry_after: int | None = Field(None, description="rate_limited only: seconds to wait.")


class ErrorOut(BaseModel):
    error: ErrorDetail


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for the error statuses a route can answer with."""
    text = {
        400: "Request body is not JSON.",
        401: "Missing, unknown or revoked token.",
        403: "The token may not call this route.",
        404: "No such item, or the caller may not see it.",
        422: "Invalid input; `field` names the parameter at fault.",
        429: "Rate limit reached; see `Retry-After`.",
        503: "OpenSearch is unreachable.",
        504: "The request ran past its deadline.",
    }
    return {s: {"model": ErrorOut, "description": text[s]} for s in statuses}


READ_ERRORS = error_responses(400, 401, 422, 429, 503, 504)
WRITE_ERRORS = error_responses(400, 401, 403, 422, 429, 503, 504)
DELETE_ERRORS = error_responses(400, 401, 403, 404, 422, 429, 503, 504)
