"""The web page: sign in with a token, search with filters, item pages with related items.

Server-rendered HTML over the same core calls as /api/v1 (search_request, Searcher.search,
facets, get, related, suli.render). The token lives in an HttpOnly, SameSite=Strict cookie.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from app import logs
from app.deps import RuntimeDep
from app.errors import public_error, status_of
from app.respond import shown_to
from app.runtime import Runtime, run_blocking
from app.tokens import client_address, session_for
from app.web_view import (
    HERE,
    LIMITS,
    Form,
    environment,
    facet_options,
    next_path,
    previous_url,
)
from suli.errors import Forbidden, InvalidInput, RateLimited, SuliError, Unauthorized
from suli.models import Principal
from suli.render import facets_json, item_json, response_json, rounded
from suli.search_params import search_request
from suli.service import Deadline, Searcher

COOKIE = "suli_token"
RELATED_LIMIT = 10
SECURITY_HEADERS = {
    # Everything is served from here; no inline script or style, no framing.
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(env=environment())


def install(app: FastAPI) -> None:
    """Add the pages and their static files (CSS, a little JS) to the app."""
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")


def _page(request: Request, name: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    resp = templates.TemplateResponse(request, name, context, status_code=status)
    resp.headers.update(SECURITY_HEADERS)
    return resp


def _error_page(request: Request, e: SuliError, who: Principal | None) -> HTMLResponse:
    status = status_of(e)
    titles = {
        404: "Not found",
        422: "Check your search",
        429: "Too many requests",
        503: "Search is unavailable",
        504: "Search took too long",
    }
    context = {"who": who, "title": titles.get(status, "Something went wrong"), "error": e}
    if status >= 500:  # the page says what happened, never the backend's internals
        context["error"] = public_error(e)
    page = _page(request, "error.html", context, status)
    if isinstance(e, RateLimited):
        page.headers["Retry-After"] = str(e.retry_after)
    return page


def _to_signin(request: Request) -> RedirectResponse:
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/signin?next={quote(here, safe='')}", status_code=303)


async def _caller(
    request: Request, runtime: Runtime, deadline: Deadline
) -> tuple[Searcher, Principal, bool] | None:
    """The signed-in principal from the cookie and whether its token is an admin's, or None
    (no or a revoked token)."""
    token = request.cookies.get(COOKIE)
    if not token:
        return None
    try:
        session = await session_for(runtime, token, client_address(request.scope), deadline)
    except Unauthorized:
        return None
    assert session.principal is not None
    logs.note(principal=session.principal.id)
    runtime.limiter.check(session.principal.id)
    searcher = await run_blocking(runtime.searcher, deadline=deadline)
    return searcher, session.principal, session.admin


def _same_origin(request: Request) -> None:
    """Refuse a form posted from another site (SameSite covers the cookie, not sign-in)."""
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
        raise Forbidden("this form must be sent from this site")


def _board_names(searcher: Searcher, principal: Principal, boards: set[str]) -> dict[str, str]:
    """Names of the boards the user can already see (facet values), for labels only."""
    if not boards:
        return {}
    return {
        a.board: a.name
        for a in searcher.backend.acls(principal.workspace)
        if a.board in boards and a.name
    }


@router.get("/signin", response_class=HTMLResponse)
async def signin_form(request: Request) -> HTMLResponse:
    nxt = next_path(request.query_params.get("next"))
    return _page(request, "signin.html", {"who": None, "next": nxt, "error": None})


@router.post("/signin", response_class=HTMLResponse)
async def signin(request: Request, runtime: RuntimeDep) -> Response:
    """Check the token, keep it in an HttpOnly cookie, go back to where the user was."""
    deadline = Deadline(runtime.settings.deadline_s)
    raw = (await request.body()).decode("utf-8", "replace")  # bounded by app.bodylimit
    form = {k: v[0] for k, v in parse_qs(raw).items()}
    nxt = next_path(form.get("next"))
    token = form.get("token", "").strip()
    try:
        _same_origin(request)
        if not token:
            raise Unauthorized("enter your API token")
        await session_for(runtime, token, client_address(request.scope), deadline)
    except Unauthorized as e:
        context = {"who": None, "next": nxt, "error": e.message}
        return _page(request, "signin.html", context, 401)
    except SuliError as e:
        return _error_page(request, e, None)
    resp = RedirectResponse(nxt, status_code=303)
    resp.set_cookie(
        COOKIE,
        token,
        httponly=True,
        samesite="strict",
        # The scheme is the proxy's X-Forwarded-Proto when the peer is a trusted proxy.
        secure=runtime.settings.secure_cookies or request.url.scheme == "https",
        path="/",
    )
    return resp


@router.post("/signout")
async def signout(request: Request) -> Response:
    try:
        _same_origin(request)
    except Forbidden as e:
        return _error_page(request, e, None)
    resp = RedirectResponse("/signin", status_code=303)
    resp.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return resp


@router.get("/", response_class=HTMLResponse)
async def search_page(request: Request, runtime: RuntimeDep) -> Response:
    """Search (or browse newest first with no words) with filters from the visible facets."""
    deadline = Deadline(runtime.settings.deadline_s)
    form = Form.parse(request.query_params)
    who: Principal | None = None
    try:
        caller = await _caller(request, runtime, deadline)
        if caller is None:
            return _to_signin(request)
        searcher, who, admin = caller
        principal = who
        body, error, status, previous = None, None, 200, None
        try:
            req = search_request(
                form.q, **form.search_args(), max_query_chars=runtime.settings.max_query_chars
            )
            resp = await run_blocking(searcher.search, principal, req, deadline, deadline=deadline)
            body = shown_to(rounded(response_json(resp)), admin)  # phases: admins only
            facets = body["facets"]  # over this search's matches: the counts add up to it
            previous = previous_url(
                form, body["offset"], lambda at: searcher.cursor_at(principal.id, req, at)
            )
        except InvalidInput as e:
            error, status = e, 422
            facets = facets_json(
                await run_blocking(searcher.facets, principal, None, deadline=deadline)
            )
        boards = {v["value"] for v in facets["facets"].get("board", [])}
        labels = await run_blocking(_board_names, searcher, principal, boards, deadline=deadline)
    except SuliError as e:
        return _error_page(request, e, who)
    context = {
        "who": who,
        "form": form,
        "limits": LIMITS,
        "options": facet_options(facets["facets"], form, labels),
        "more_values": facets.get("more", {}),
        "counted": facets["total"],
        "body": body,
        "previous": previous,
        "error": error,
        "labels": labels,
    }
    return _page(request, "search.html", context, status)


@router.get("/items/{item_id}", response_class=HTMLResponse)
async def item_page(item_id: str, request: Request, runtime: RuntimeDep) -> Response:
    """One visible item, its facts and body, and the items related to it."""
    deadline = Deadline(runtime.settings.deadline_s)
    who: Principal | None = None
    try:
        caller = await _caller(request, runtime, deadline)
        if caller is None:
            return _to_signin(request)
        searcher, who, admin = caller
        principal = who
        item, res = await run_blocking(searcher.get, principal, item_id, deadline=deadline)
        related, related_error = None, None
        try:
            resp = await run_blocking(
                lambda: searcher.related(
                    principal, item_id=item.id, limit=RELATED_LIMIT, deadline=deadline
                ),
                deadline=deadline,
            )
            related = shown_to(rounded(response_json(resp)), admin)
        except SuliError as e:  # the item still shows; only its related list failed
            related_error = e
        boards = {
            b for b in (item.board, *(r["board"] for r in (related or {}).get("results", []))) if b
        }
        labels = await run_blocking(_board_names, searcher, principal, boards, deadline=deadline)
    except SuliError as e:
        return _error_page(request, e, who)
    context = {
        "who": who,
        "item": item_json(item, res),
        "related": related,
        "related_error": related_error,
        "labels": labels,
    }
    return _page(request, "item.html", context)
