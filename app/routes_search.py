"""Read routes: search, related, one item, facets. Each parses, calls the core, renders."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from app import schemas
from app.deps import (
    Bearer,
    BearerDep,
    Caller,
    CallerDep,
    DeadlineDep,
    PrincipalDep,
    RuntimeDep,
    SearcherDep,
    search_as,
)
from app.respond import Timer, finish_search
from app.runtime import run_blocking
from app.schemas import (
    BODY_READ_ERRORS,
    ITEM_ERRORS,
    READ_ERRORS,
    RELATED_ERRORS,
    FacetsQuery,
    RelatedRequest,
    SearchQuery,
)
from suli import models
from suli.errors import InvalidInput
from suli.render import facets_json, item_json, response_json
from suli.search_params import request_from
from suli.service import Card
from suli.settings import Settings

router = APIRouter(prefix="/api/v1", tags=["search"])


def _request(
    p: SearchQuery | schemas.SearchRequest | FacetsQuery, settings: Settings
) -> models.SearchRequest:
    """The CLI's validation, shared: the same parameters mean the same search everywhere."""
    # mode="json": enums as their plain strings, exactly what the CLI hands over.
    return request_from(p.model_dump(mode="json"), max_query_chars=settings.max_query_chars)


async def _search(
    params: SearchQuery | schemas.SearchRequest,
    caller: Caller | Bearer,
    searcher: SearcherDep,
    deadline: DeadlineDep,
    runtime: RuntimeDep,
    response: Response,
) -> dict[str, Any]:
    """`caller`: a token already read (POST: checked before its body), else the token alone,
    read in the search's own request."""
    req = _request(params, runtime.settings)
    if isinstance(caller, Bearer):
        session, resp = await search_as(runtime, caller, req, deadline)
        assert session.principal is not None
        principal, admin = session.principal, session.admin
    else:
        principal, admin = caller.principal, caller.admin
        resp = await run_blocking(
            searcher.search, principal, req, deadline, caller.acls, deadline=deadline
        )
    principal_id = principal.id
    return finish_search(
        response_json(resp),
        response,
        runtime,
        "/api/v1/search",
        lambda offset: searcher.cursor_at(principal_id, req, offset),
        admin=admin,
    )


@router.get(
    "/search",
    operation_id="search",
    response_model=schemas.SearchResponse,
    response_model_exclude_unset=True,
    responses=READ_ERRORS,
    summary="Search items by words and meaning",
)
async def search_get(
    params: Annotated[SearchQuery, Query()],
    caller: BearerDep,
    searcher: SearcherDep,
    deadline: DeadlineDep,
    runtime: RuntimeDep,
    response: Response,
) -> dict[str, Any]:
    """Hybrid search under the caller's visibility; no words browses newest first."""
    return await _search(params, caller, searcher, deadline, runtime, response)


@router.post(
    "/search",
    operation_id="searchPost",
    response_model=schemas.SearchResponse,
    response_model_exclude_unset=True,
    responses=BODY_READ_ERRORS,
    summary="Search items (parameters in a JSON body)",
)
async def search_post(
    params: schemas.SearchRequest,
    caller: CallerDep,
    searcher: SearcherDep,
    deadline: DeadlineDep,
    runtime: RuntimeDep,
    response: Response,
) -> dict[str, Any]:
    """The same search as GET, for long queries and list filters."""
    return await _search(params, caller, searcher, deadline, runtime, response)


@router.post(
    "/related",
    operation_id="related",
    response_model=schemas.SearchResponse,
    response_model_exclude_unset=True,
    responses=RELATED_ERRORS,
    summary="Items related to an item or to an unsaved card",
)
async def related(
    body: RelatedRequest,
    caller: CallerDep,
    searcher: SearcherDep,
    deadline: DeadlineDep,
    runtime: RuntimeDep,
    response: Response,
) -> dict[str, Any]:
    """Direct references first, then hybrid search on the card's text; the item itself excluded.

    A card (`title`, `spec`, `references`) is only read, never stored.
    """
    has_card = body.title is not None or bool(body.spec) or bool(body.references)
    if body.item_id is not None and has_card:
        raise InvalidInput(
            "item_id: give item_id or a card (title, spec, references), not both", "item_id"
        )
    if body.item_id is None and not has_card:
        raise InvalidInput("item_id: give item_id or a card's title and spec", "item_id")
    card = None
    if body.item_id is None:
        card = Card(body.title or "", body.spec, tuple(body.references))
    principal = caller.principal
    resp = await run_blocking(
        lambda: searcher.related(
            principal,
            item_id=body.item_id,
            card=card,
            limit=body.limit,
            explain=body.explain,
            deadline=deadline,
        ),
        deadline=deadline,
    )
    return finish_search(
        response_json(resp), response, runtime, "/api/v1/related", admin=caller.admin
    )


@router.get(
    "/items/{item_id}",
    operation_id="getItem",
    response_model=schemas.Item,
    responses=ITEM_ERRORS,
    summary="One item the caller may see",
)
async def get_item(
    item_id: str,
    principal: PrincipalDep,
    searcher: SearcherDep,
    deadline: DeadlineDep,
    response: Response,
) -> dict[str, Any]:
    """404 for a missing item and for one the caller may not see alike."""
    timer = Timer()
    item, res = await run_blocking(searcher.get, principal, item_id, deadline=deadline)
    return timer.done(item_json(item, res), response)


@router.get(
    "/facets",
    operation_id="facets",
    response_model=schemas.FacetsResponse,
    responses=READ_ERRORS,
    summary="Filter values the caller can see, with counts",
)
async def facets(
    params: Annotated[FacetsQuery, Query()],
    principal: PrincipalDep,
    searcher: SearcherDep,
    deadline: DeadlineDep,
    runtime: RuntimeDep,
    response: Response,
) -> dict[str, Any]:
    """Counts come only from items the caller can see; with `q`, only from what that search
    matches (the set its `total` counts), so they add up to its results."""
    timer = Timer()
    req = _request(params, runtime.settings)
    got = await run_blocking(
        lambda: searcher.facets(principal, req=req, deadline=deadline), deadline=deadline
    )
    return timer.done(facets_json(got), response)
