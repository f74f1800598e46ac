"""Read routes: search, related, one item, facets. Each parses, calls the core, renders."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from app.deps import CallerDep, DeadlineDep, PrincipalDep, RuntimeDep, SearcherDep
from app.respond import Timer, finish_search
from app.runtime import run_blocking
from app.schemas import (
    READ_ERRORS,
    FacetsOut,
    FacetsQuery,
    ItemOut,
    RelatedBody,
    SearchBody,
    SearchOut,
    SearchQuery,
    error_responses,
)
from suli.errors import InvalidInput
from suli.models import SearchRequest
from suli.render import facets_json, item_json, response_json
from suli.search_params import request_from
from suli.service import Card
from suli.settings import Settings

router = APIRouter(prefix="/api/v1", tags=["search"])


def _request(p: SearchQuery | SearchBody | FacetsQuery, settings: Settings) -> SearchRequest:
    """The CLI's validation, shared: the same parameters mean the same search everywhere."""
    return request_from(p.model_dump(), max_query_chars=settings.max_query_chars)


async def _search(
    params: SearchQuery | SearchBody,
    caller: CallerDep,
    searcher: SearcherDep,
    deadline: DeadlineDep,
    runtime: RuntimeDep,
    response: Response,
) -> dict[str, Any]:
    req = _request(params, runtime.settings)
    resp = await run_blocking(
        searcher.search, caller.principal, req, deadline, caller.acls, deadline=deadline
    )
    principal_id = caller.principal.id
    return finish_search(
        response_json(resp),
        response,
        runtime,
        "/api/v1/search",
        lambda offset: searcher.cursor_at(principal_id, req, offset),
    )


@router.get(
    "/search",
    response_model=SearchOut,
    response_model_exclude_unset=True,
    responses=READ_ERRORS,
    summary="Search items by words and meaning",
)
async def search_get(
    params: Annotated[SearchQuery, Query()],
    caller: CallerDep,
    searcher: SearcherDep,
    deadline: DeadlineDep,
    runtime: RuntimeDep,
    response: Response,
) -> dict[str, Any]:
    """Hybrid search under the caller's visibility; no words browses newest first."""
    return await _search(params, caller, searcher, deadline, runtime, response)


@router.post(
    "/search",
    response_model=SearchOut,
    response_model_exclude_unset=True,
    responses=READ_ERRORS,
    summary="Search items (parameters in a JSON body)",
)
async def search_post(
    params: SearchBody,
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
    response_model=SearchOut,
    response_model_exclude_unset=True,
    responses=error_responses(400, 401, 404, 422, 429, 503, 504),
    summary="Items related to an item or to an unsaved card",
)
async def related(
    body: RelatedBody,
    principal: PrincipalDep,
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
    return finish_search(response_json(resp), response, runtime, "/api/v1/related")


@router.get(
    "/items/{item_id}",
    response_model=ItemOut,
    responses=error_responses(401, 404, 429, 503, 504),
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
    response_model=FacetsOut,
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
