"""Write routes (admin token): bulk item upsert, delete, board ACLs and principals."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Response

from app.deps import AdminDep, RuntimeDep, SearcherDep
from app.respond import Timer
from app.runtime import run_blocking
from app.schemas import (
    MAX_BATCH,
    WRITE_ERRORS,
    BoardAclBody,
    BoardAclOut,
    DeleteOut,
    IngestOut,
    PrincipalBody,
    PrincipalOut,
)
from indexer.pipeline import Rejection, index_items
from suli.errors import Forbidden, InvalidInput
from suli.models import Item, Principal
from suli.service import Searcher
from suli.validate import lookup_id, parse_acl, parse_item, parse_principal

router = APIRouter(prefix="/api/v1", tags=["ingestion"])


def _entries(
    searcher: Searcher, admin: Principal, raw: list[dict[str, Any]]
) -> list[tuple[int, Item | Rejection]]:
    """Validate each item; an invalid one becomes a Rejection and the others still go in.
    An admin token writes into its own workspace only: neither an item naming another
    workspace nor one whose id is already taken by another workspace's item goes in."""
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
    owners = searcher.backend.workspaces([e.id for _, e in out if isinstance(e, Item)])
    return [
        (n, Rejection(n, e.id, "id: already used by an item outside this token's workspace"))
        if isinstance(e, Item) and owners.get(e.id, admin.workspace) != admin.workspace
        else (n, e)
        for n, e in out
    ]


def _ingest(
    searcher: Searcher, admin: Principal, raw: list[dict[str, Any]], refresh: bool
) -> dict[str, Any]:
    entries = _entries(searcher, admin, raw)
    summary = index_items(entries, searcher.backend, searcher.embedder)
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
    response_model=IngestOut,
    responses=WRITE_ERRORS,
    summary="Upsert items in bulk (admin)",
)
async def upsert_items(
    items: Annotated[list[dict[str, Any]], Body(max_length=MAX_BATCH)],
    admin: AdminDep,
    searcher: SearcherDep,
    runtime: RuntimeDep,
    response: Response,
    refresh: Annotated[
        bool, Query(description="Make the items searchable before answering.")
    ] = False,
) -> dict[str, Any]:
    """A JSON array of items (DESIGN section 1). Valid items go in, invalid ones are reported:
    every element gets `{index, id, status: indexed|rejected, reason}`.

    Not bound by the search deadline (a batch must not end half-written and unreported);
    its work is bounded by the batch size instead.
    """
    timer = Timer()
    body = await run_blocking(_ingest, searcher, admin, items, refresh)
    runtime.metrics.items.labels(status="indexed").inc(body["indexed"])
    runtime.metrics.items.labels(status="rejected").inc(body["rejected"])
    return timer.done(body, response)


@router.delete(
    "/items/{item_id}",
    response_model=DeleteOut,
    responses=WRITE_ERRORS,
    summary="Delete an item (admin)",
)
async def delete_item(
    item_id: str, admin: AdminDep, searcher: SearcherDep, response: Response
) -> dict[str, Any]:
    """Idempotent: deleting an absent id also answers `deleted`. An item of another workspace
    counts as absent here: it is left alone, and the answer does not tell it exists."""
    timer = Timer()
    lookup_id(item_id)
    owner = (await run_blocking(searcher.backend.workspaces, [item_id])).get(item_id)
    if owner in (None, admin.workspace):
        out = await run_blocking(searcher.backend.delete, [item_id])
        if item_id in out.rejected:
            raise InvalidInput(f"item_id: could not delete ({out.rejected[item_id]})", "item_id")
    return timer.done({"id": item_id, "status": "deleted"}, response)


def _workspace(admin: Principal, given: str | None) -> str:
    ws = given or admin.workspace
    if ws != admin.workspace:
        raise Forbidden(f"an admin token writes into its own workspace ({admin.workspace}) only")
    return ws


def _not_taken(kind: str, key: str, owner: str | None, admin: Principal) -> None:
    """Ids of boards and principals are global: another workspace's one is never replaced."""
    if owner is not None and owner != admin.workspace:
        raise Forbidden(f"{kind}: {key!r} is already used outside this token's workspace")


@router.put(
    "/boards/{board}",
    response_model=BoardAclOut,
    responses=WRITE_ERRORS,
    summary="Set a board's ACL (admin)",
)
async def put_board(
    board: str, body: BoardAclBody, admin: AdminDep, searcher: SearcherDep, response: Response
) -> dict[str, Any]:
    """Members and groups who may see the board's items; applies from the next query on."""
    timer = Timer()
    data = {"board": board, **body.model_dump(), "workspace": _workspace(admin, body.workspace)}
    acl = parse_acl(data)
    existing = await run_blocking(searcher.backend.acl, acl.board)
    _not_taken("board", acl.board, existing and existing.workspace, admin)
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
    response_model=PrincipalOut,
    responses=WRITE_ERRORS,
    summary="Create or replace a principal (admin)",
)
async def put_principal(
    principal_id: str,
    body: PrincipalBody,
    admin: AdminDep,
    searcher: SearcherDep,
    response: Response,
) -> dict[str, Any]:
    """A person or agent with its groups (group membership grants board access)."""
    timer = Timer()
    data = {"id": principal_id, **body.model_dump(), "workspace": _workspace(admin, body.workspace)}
    p = parse_principal(data)
    existing = await run_blocking(searcher.backend.principal, p.id)
    _not_taken("principal", p.id, existing and existing.workspace, admin)
    await run_blocking(searcher.backend.put_principals, [p])
    out = {"id": p.id, "workspace": p.workspace, "kind": p.kind, "groups": list(p.groups)}
    return timer.done(out, response)
