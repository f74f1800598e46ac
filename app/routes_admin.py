"""Write routes (admin token): bulk item upsert, delete, board ACLs and principals."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Query, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from app import schemas
from app.api_docs import ITEM_INPUT_REF
from app.deps import AdminDep, RuntimeDep, SearcherDep
from app.respond import Timer
from app.runtime import run_blocking
from app.schemas import (
    DELETE_ERRORS,
    MAX_BATCH,
    WRITE_ERRORS,
    BoardAclRequest,
    PrincipalRequest,
)
from indexer.pipeline import Rejection, index_items
from suli.errors import BackendUnavailable, Forbidden, InvalidInput, NotFound
from suli.models import Item, Principal
from suli.service import Searcher
from suli.validate import lookup_id, parse_acl, parse_item, parse_principal

router = APIRouter(prefix="/api/v1", tags=["ingestion"])
# POST /items with any item rejected: one status a client can branch on without reading the
# body (200 means everything went in), and the same per-item body as the 200 (docs/decisions.md).
MULTI_STATUS = 207
# POST /items: a single object is taken as a batch of one (what a user posting one item expects).
_BATCH = TypeAdapter(Annotated[list[dict[str, Any]], Field(max_length=MAX_BATCH)])


def _entries(
    searcher: Searcher, admin: Principal, raw: list[dict[str, Any]]
) -> list[tuple[int, Item | Rejection]]:
    """Validate each item; an invalid one becomes a Rejection and the others still go in.
    An admin token writes into its own workspace only. Ids are keys within a workspace, so
    whatever another workspace holds under the same id is neither touched nor revealed."""
    out: list[tuple[int, Item | Rejection]] = []
    for n, data in enumerate(raw):
        item_id = data.get("id") if isinstance(data.get("id"), str) else None
        try:
            item = parse_item(data)
            if item.workspace != admin.workspace:
                raise InvalidInput(
                    f"workspace: not this token's workspace ({admin.workspace})", "workspace"
                )
            out.append((n, item))
        except InvalidInput as e:
            out.append((n, Rejection(n, item_id, e.message)))
    return out


def _ingest(
    searcher: Searcher, admin: Principal, raw: list[dict[str, Any]], refresh: bool
) -> dict[str, Any]:
    entries = _entries(searcher, admin, raw)
    summary = index_items(entries, searcher.backend, searcher.embedder)
    if summary.stopped:  # the store stopped taking writes: a 503, not "indexed"
        raise BackendUnavailable(summary.stopped)
    if refresh and summary.indexed:
        searcher.backend.refresh()
    rejected = {r.line: r.reason for r in summary.rejected}
    items = []
    for n, entry in entries:
        item_id = entry.id
        if n in rejected:
            items.append({"index": n, "id": item_id, "status": "rejected", "reason": rejected[n]})
        else:
            items.append({"index": n, "id": item_id, "status": "indexed", "reason": None})
    return {"indexed": len(entries) - len(rejected), "rejected": len(rejected), "items": items}


@router.post(
    "/items",
    operation_id="upsertItems",
    response_model=schemas.IngestResponse,
    responses={
        200: {"description": "Every item was indexed."},
        207: {
            "model": schemas.IngestResponse,
            "description": "Some or all items were rejected (the others were indexed): "
            "`items` says which, with each reason.",
        },
        **WRITE_ERRORS,
    },
    summary="Upsert items in bulk (admin)",
)
async def upsert_items(
    items: Annotated[
        Any,
        Body(
            description=f"An array of up to {MAX_BATCH} item objects, or one item object.",
            # Documented as items (app.api_docs adds ItemInput); read as plain objects, so
            # an invalid item is rejected on its own instead of failing the whole batch.
            json_schema_extra={
                "anyOf": [
                    {"type": "array", "items": {"$ref": ITEM_INPUT_REF}, "maxItems": MAX_BATCH},
                    {"$ref": ITEM_INPUT_REF},
                ]
            },
        ),
    ],
    admin: AdminDep,
    searcher: SearcherDep,
    runtime: RuntimeDep,
    response: Response,
    refresh: Annotated[
        bool, Query(description="Make the items searchable before answering.")
    ] = False,
) -> dict[str, Any]:
    """A JSON array of items (docs/items.md), or one item object (taken as a batch of one).
    Valid items go in, invalid ones are reported: every element gets
    `{index, id, status: indexed|rejected, reason}`. The status says whether all went in:
    200 when every item was indexed, 207 Multi-Status when any was rejected (the body is the
    same); a request that is not a batch at all (not an array or object, over the batch size)
    is a 422 and changes nothing.

    Not bound by the search deadline (a batch must not end half-written and unreported);
    its work is bounded by the batch size instead.
    """
    timer = Timer()
    try:
        batch = _BATCH.validate_python([items] if isinstance(items, dict) else items)
    except ValidationError as e:  # the same 422 shape as any other body error
        raise RequestValidationError(
            [{**err, "loc": ("body", *err["loc"])} for err in e.errors()]
        ) from None
    body = await run_blocking(_ingest, searcher, admin, batch, refresh)
    runtime.metrics.items.labels(status="indexed").inc(body["indexed"])
    runtime.metrics.items.labels(status="rejected").inc(body["rejected"])
    response.status_code = MULTI_STATUS if body["rejected"] else 200
    return timer.done(body, response)


@router.delete(
    "/items/{item_id}",
    operation_id="deleteItem",
    response_model=schemas.Deleted,
    responses=DELETE_ERRORS,
    summary="Delete an item (admin)",
)
async def delete_item(
    item_id: str, admin: AdminDep, searcher: SearcherDep, response: Response
) -> dict[str, Any]:
    """Deletes the item of this token's workspace with this id; 404 `not_found` when the
    workspace holds none (an item of another workspace with the same id is another item:
    it is never touched, and the answer is the same as for an id nobody uses)."""
    timer = Timer()
    lookup_id(item_id)
    out = await run_blocking(searcher.backend.delete, admin.workspace, [item_id])
    if item_id in out.rejected:
        raise InvalidInput(f"item_id: could not delete ({out.rejected[item_id]})", "item_id")
    if item_id in out.missing:
        raise NotFound(f"no item {item_id!r}")
    return timer.done({"id": item_id, "status": "deleted"}, response)


def _workspace(admin: Principal, given: str | None) -> str:
    ws = given or admin.workspace
    if ws != admin.workspace:
        raise Forbidden(f"an admin token writes into its own workspace ({admin.workspace}) only")
    return ws


@router.put(
    "/boards/{board}",
    operation_id="putBoard",
    response_model=schemas.BoardAcl,
    responses=WRITE_ERRORS,
    summary="Set a board's ACL (admin)",
)
async def put_board(
    board: str, body: BoardAclRequest, admin: AdminDep, searcher: SearcherDep, response: Response
) -> dict[str, Any]:
    """Members and groups who may see the board's items; applies from the next query on."""
    timer = Timer()
    data = {"board": board, **body.model_dump(), "workspace": _workspace(admin, body.workspace)}
    acl = parse_acl(data)  # a board id is a key within the workspace: nothing to claim
    await run_blocking(searcher.backend.put_acls, [acl])
    out = {
        "board": acl.board,
        "workspace": acl.workspace,
        "name": acl.name,
        "members": list(acl.members),
        "groups": list(acl.groups),
    }
    return timer.done(out, response)


@router.put(
    "/principals/{principal_id}",
    operation_id="putPrincipal",
    response_model=schemas.Principal,
    responses=WRITE_ERRORS,
    summary="Create or replace a principal (admin)",
)
async def put_principal(
    principal_id: str,
    body: PrincipalRequest,
    admin: AdminDep,
    searcher: SearcherDep,
    response: Response,
) -> dict[str, Any]:
    """A person or agent with its groups (group membership grants board access)."""
    timer = Timer()
    data = {"id": principal_id, **body.model_dump(), "workspace": _workspace(admin, body.workspace)}
    p = parse_principal(data)
    # Principal ids are global (a token names its principal by id alone): the check and the
    # write are one atomic step, so a racing workspace can neither replace nor move one.
    if not await run_blocking(searcher.backend.claim_principal, p):
        raise Forbidden(f"principal: {p.id!r} is not available; choose another id")
    out = {"id": p.id, "workspace": p.workspace, "kind": p.kind, "groups": list(p.groups)}
    return timer.done(out, response)


# The answers of GET /admin/access (suli.access.access_json / audience_json): defined here, next
# to their one route.
AccessRule = Literal[
    "workspace-wide", "board-member", "board-group", "uploader",
    "board-not-listed", "board-without-acl", "personal-upload", "another-workspace",
]  # fmt: skip


class AccessItem(BaseModel):
    id: str
    workspace: str
    title: str
    scope: Literal["workspace", "board", "personal"]
    board: str | None
    uploader: str | None
    hidden: bool
    superseded_by: str | None


class AccessVerdict(BaseModel):
    principal: str
    visible: bool
    rule: AccessRule = Field(description="The clause of the visibility rule that decides.")
    reason: str = Field(description="One line, e.g. `board brd_ops lists group grp_ops, ...`.")
    groups: list[str] = Field(description="board-group: the principal's groups the board lists.")
    search: Literal["shown", "hidden", "never"] = Field(
        description="What this principal's searches show: `hidden` only when hidden items "
        "are asked for."
    )


class AccessAnswer(AccessVerdict):
    """One principal's verdict on the item (`principal` given)."""

    item: AccessItem
    replacement_visible: bool | None = Field(
        description="Superseded and visible: whether results name the replacement."
    )
    notes: list[str]
    timings_ms: schemas.Timings


class AccessAudience(BaseModel):
    """Every principal of the workspace who may see the item (no `principal`), by rule."""

    item: AccessItem
    audience: list[AccessVerdict]
    notes: list[str]
    timings_ms: schemas.Timings


@router.get(
    "/admin/access",
    operation_id="explainAccess",
    response_model=AccessAnswer | AccessAudience,
    responses=DELETE_ERRORS,
    summary="Who may see an item, and why (admin)",
    tags=["admin"],
)
async def explain_access(
    admin: AdminDep,
    searcher: SearcherDep,
    response: Response,
    item: Annotated[str, Query(description="The item's id (in this token's workspace).")],
    principal: Annotated[
        str | None,
        Query(description="A principal of this workspace; without it, everyone who may see it."),
    ] = None,
) -> dict[str, Any]:
    """Whether `principal` may see `item` and the rule that decides it (or, without
    `principal`, every principal of the workspace who may, by rule), and what a search shows.
    Only this token's workspace: an item or principal of another workspace gets the same
    answer as an id nobody uses (404 `not_found`, 422 naming `principal`)."""
    from suli.access import access_json, audience, audience_json, explain

    timer = Timer()
    lookup_id(item, "item")
    if principal is None:
        body = audience_json(await run_blocking(audience, searcher, admin.workspace, item))
    else:
        who = await run_blocking(searcher.backend.principal, principal)
        if who is None or who.workspace != admin.workspace:
            raise InvalidInput(f"principal: unknown principal {principal!r}", "principal")
        body = access_json(await run_blocking(explain, searcher, admin.workspace, item, who))
    return timer.done(body, response)
