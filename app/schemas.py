"""API schemas (pydantic, for validation and OpenAPI); not domain types.

Responses are built from suli.render dicts and filtered through these models, so nothing the
models do not name (vectors, ACLs, uploader, hidden fields) can be serialized by accident.

Class names are the OpenAPI component names, so a generated client gets `SearchResponse`,
`SearchMode`, `Facets`: enums and open maps are named types, not inline schemas a generator
would name after the route. Import this module as `schemas` where a name meets a core type
(`schemas.Item` is the response, `suli.models.Item` the domain item).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

MAX_LIMIT = 25
MAX_BATCH = 1000  # items per ingestion request: bounded so one request's work stays bounded
# An item id or URL: never blank (an empty id is no reference, and OpenSearch refuses it).
Reference = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]


class SearchMode(StrEnum):
    """hybrid: words and meaning fused; text: words only; vector: meaning only."""

    hybrid = "hybrid"
    text = "text"
    vector = "vector"


class Scope(StrEnum):
    """Who may see an item: the workspace, a board's members, or its uploader only."""

    workspace = "workspace"
    board = "board"
    personal = "personal"


class TotalRelation(StrEnum):
    """eq: `total` is exact; gte: at least `total` (the engine could not count all)."""

    eq = "eq"
    gte = "gte"


class PrincipalKind(StrEnum):
    person = "person"
    agent = "agent"


class IngestStatus(StrEnum):
    indexed = "indexed"
    rejected = "rejected"


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
    mode: SearchMode = SearchMode.hybrid
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
    mode: SearchMode = SearchMode.hybrid
    explain: bool = Field(False, description="Add an explain block to each result.")
    cursor: str | None = Field(
        None,
        max_length=512,
        description="The `next` of the previous page: the same search, its next page.",
    )
    facets: bool = Field(
        False, description="Also count filter values over this search's matches (`facets`)."
    )
    exact_total: bool = Field(
        False,
        description="Count `total` exactly even where that costs the engine; by default it is "
        'exact up to a limit and past it a lower bound (`total_relation` "gte").',
    )


class SearchQuery(FacetsQuery, _SearchOptions):
    """Query parameters of GET /api/v1/search (the CLI's flags)."""

    # FacetsQuery's `q` would win by inheritance order: keep the search's own description.
    q: str = Field("", description=_SearchOptions.model_fields["q"].description)


class SearchRequest(_Filters, _SearchOptions):
    """Body of POST /api/v1/search; a filter takes one value, a comma list or a JSON list."""

    model_config = _STRICT_BODY

    # Strict mode takes only an enum instance, which JSON cannot send: the string is the value.
    mode: SearchMode = Field(SearchMode.hybrid, strict=False)

    kind: str | list[str] | None = None
    outcome: str | list[str] | None = None
    board: str | list[str] | None = None
    agent: str | list[str] | None = None
    station: str | list[str] | None = None
    tag: str | list[str] | None = None


class RelatedRequest(_In):
    """Related items for a visible item (item_id) or for an unsaved card (title, spec, references)."""

    model_config = _STRICT_BODY

    item_id: str | None = Field(None, max_length=128)
    title: str | None = Field(None, max_length=1000)
    spec: str = Field("", max_length=100_000)
    references: list[Reference] = Field(default_factory=list, max_length=500)
    limit: int = Field(10, ge=1, le=MAX_LIMIT)
    explain: bool = False


class BoardAclRequest(_In):
    """A board's ACL; the workspace defaults to the admin's own."""

    model_config = _STRICT_BODY

    workspace: str | None = None
    name: str = ""
    members: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)


class PrincipalRequest(_In):
    """A person or agent; the workspace defaults to the admin's own."""

    model_config = _STRICT_BODY

    workspace: str | None = None
    kind: PrincipalKind = Field(PrincipalKind.person, strict=False)  # see SearchRequest.mode
    groups: list[str] = Field(default_factory=list)


# ---- responses ---------------------------------------------------------------------------


class Timings(BaseModel):
    """Milliseconds: `total`, and for an admin token one entry per phase the request ran, to
    0.1 ms; any other token gets only `total`, in whole milliseconds (DESIGN 3.11)."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, float] = Field(init=False)

    total: float


class Provenance(BaseModel):
    """Where an item came from, as its producer sent it (source, created_by, created_at, ...)."""

    model_config = ConfigDict(extra="allow")


class Explain(BaseModel):
    text_rank: int | None
    vector_rank: int | None
    vector_similarity: float | None
    rrf: float
    text_share: float
    vector_share: float
    outcome_weight: float
    score: float
    kept: str


class Result(BaseModel):
    id: str
    kind: str
    title: str
    outcome: str | None
    scope: Scope
    board: str | None
    provenance: Provenance
    snippet: str
    url: str
    superseded: bool
    superseded_by: str | None = Field(description="Named only when the caller may see it.")
    last_activity_at: str | None
    score: float
    explain: Explain | None = None


class Degraded(BaseModel):
    leg: str
    reason: str


class FacetValue(BaseModel):
    value: str
    count: int


class FacetCounts(BaseModel):
    """Per filter (kind, outcome, board, agent, station, tag), its values, most first."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, list[FacetValue]] = Field(init=False)


class FacetMore(BaseModel):
    """Per filter, whether it has values beyond the 50 listed."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, bool] = Field(init=False)


class Facets(BaseModel):
    """The body of GET /api/v1/facets, also inside a search response as `facets`
    (hence `response.facets.facets` for the counts there)."""

    total: int = Field(description="Items counted: the same set as the search's `total`.")
    facets: FacetCounts = Field(
        description="Per filter, its values with counts, most first, up to 50."
    )
    more: FacetMore = Field(description="A filter has values beyond the 50 listed.")


class Dropped(BaseModel):
    """With explain only: hits left out, by reason."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, int] = Field(init=False)


class SearchResponse(BaseModel):
    results: list[Result]
    total: int = Field(
        description="Visible items matching the search (all of them, not only this page): "
        "exact when total_relation is eq, a lower bound when gte."
    )
    total_relation: TotalRelation
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
    facets: Facets | None = Field(None, description="With facets=true only.")
    dropped: Dropped | None = Field(None, description="With explain only.")
    degraded: list[Degraded]
    truncated: bool = Field(description="Lowest-ranked results were cut to fit max_response_bytes.")
    rerank: str = Field(
        description="off, applied, skipped-<reason>, fallback-timeout or fallback-error."
    )
    timings_ms: Timings


class Station(BaseModel):
    id: str
    name: str


class Item(BaseModel):
    id: str
    workspace: str
    kind: str
    title: str
    body: str
    outcome: str | None
    scope: Scope
    board: str | None
    agent: str | None
    stations: list[Station]
    superseded: bool
    superseded_by: str | None
    references: list[str]
    tags: list[str]
    media_type: str
    path: str
    caption: str
    provenance: Provenance
    created_at: str | None
    updated_at: str | None
    last_activity_at: str | None
    url: str
    hidden: bool
    timings_ms: Timings


class FacetsResponse(Facets):
    timings_ms: Timings


class IngestItem(BaseModel):
    """What became of one element of the request array."""

    index: int = Field(description="Position in the request array (0-based).")
    id: str | None
    status: IngestStatus
    reason: str | None = Field(None, description="Why it was rejected (field: problem).")


class IngestResponse(BaseModel):
    """Per item, indexed or rejected with its reason (200: all indexed; 207: some rejected)."""

    indexed: int
    rejected: int
    items: list[IngestItem]
    timings_ms: Timings


class Deleted(BaseModel):
    id: str
    status: Literal["deleted"]
    timings_ms: Timings


class BoardAcl(BaseModel):
    board: str
    workspace: str
    name: str
    members: list[str]
    groups: list[str]
    timings_ms: Timings


class Principal(BaseModel):
    id: str
    workspace: str
    kind: PrincipalKind
    groups: list[str]
    timings_ms: Timings


class Health(BaseModel):
    status: Literal["ok"]


class Ready(BaseModel):
    status: Literal["ready"]


class ErrorDetail(BaseModel):
    code: str = Field(
        description="Stable machine code: invalid_input, invalid_json, bad_request, "
        "unauthorized, forbidden, not_found, too_large, rate_limited, backend_unavailable, "
        "deadline_exceeded, indexing_error, internal_error."
    )
    message: str
    field: str | None = Field(None, description="The input field at fault, when there is one.")
    limit: int | None = Field(None, description="rate_limited only: the limit reached.")
    retry_after: int | None = Field(None, description="rate_limited only: seconds to wait.")


class ErrorResponse(BaseModel):
    """The one error shape of every 4xx and 5xx answer (app.errors)."""

    error: ErrorDetail


# What each error status means, for the OpenAPI `responses` of the routes that can answer it.
ERROR_TEXT = {
    400: "The body is not JSON, or JSON nested past the parser's limit.",
    401: "Missing, unknown or revoked token.",
    403: "The token may not call this route (an admin token is needed, or another workspace).",
    404: "No such item, or the caller may not see it (the same answer for both).",
    413: "The request body is over its byte limit; `field` is `body`.",
    422: "Invalid input; `field` names the parameter at fault.",
    429: "Rate limit reached; see `Retry-After` and `error.retry_after`.",
    500: "A bug on the service's side; the body names no internals.",
    503: "The search backend is unreachable; the service recovers by itself.",
    504: "The request ran past its deadline; its work was stopped.",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for the error statuses a route can answer with, all in the
    one shape. Naming 422 also keeps FastAPI from adding its own validation-error schema,
    which this service never sends (app.errors answers every validation error)."""
    return {s: {"model": ErrorResponse, "description": ERROR_TEXT[s]} for s in (*statuses, 500)}


# Every /api/v1 route checks the token (401, 429 for a guessing address), the rate limit (429),
# its parameters (422, also a repeated scalar parameter) and works under the deadline (504)
# against the backend (503); a body brings 400 (not JSON) and 413 (too large).
_API = (401, 422, 429, 503, 504)
READ_ERRORS = error_responses(*_API)
BODY_READ_ERRORS = error_responses(400, 413, *_API)
ITEM_ERRORS = error_responses(404, *_API)
RELATED_ERRORS = error_responses(400, 404, 413, *_API)
WRITE_ERRORS = error_responses(400, 403, 413, *_API)
DELETE_ERRORS = error_responses(403, 404, *_API)
