"""Injected dependencies as Annotated aliases: settings, searcher, deadline, caller, admin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, get_origin

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app import logs
from app.runtime import Runtime, run_blocking
from app.schemas import FacetsQuery
from app.tokens import client_address, search_for, session_for
from suli.backends.base import Session
from suli.errors import Forbidden, InvalidInput, Unauthorized
from suli.models import BoardAcl, Principal, SearchRequest, SearchResponse
from suli.service import Deadline, Searcher
from suli.settings import Settings

# auto_error=False: a missing token goes through our error table (401 with the JSON shape).
bearer = HTTPBearer(auto_error=False, description="An API token from `suli token create`.")


# Dependencies that do not block are `async def`: FastAPI runs a plain `def` one in the
# thread pool, a hop per dependency per request that the search path does not need.


async def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


async def get_settings(runtime: RuntimeDep) -> Settings:
    return runtime.settings


SettingsDep = Annotated[Settings, Depends(get_settings)]


async def open_searcher(runtime: Runtime, deadline: Deadline | None = None) -> Searcher:
    """The Searcher; only building it (the first connection attempt) blocks, in a thread."""
    built = runtime.built
    return built if built is not None else await run_blocking(runtime.searcher, deadline=deadline)


async def get_searcher(runtime: RuntimeDep) -> Searcher:
    return await open_searcher(runtime)


SearcherDep = Annotated[Searcher, Depends(get_searcher)]


# Scope keys set by app.bodylimit when it checked the token before the body: the request's
# deadline and (token, session), so the route's dependencies neither restart the clock nor
# look the token up a second time.
DEADLINE_KEY = "suli.deadline"
SESSION_KEY = "suli.session"
MISSING_TOKEN = "missing bearer token (header `Authorization: Bearer <token>`)"


async def get_deadline(request: Request, settings: SettingsDep) -> Deadline:
    """One deadline per request, started before authentication so it bounds everything."""
    started = request.scope.get(DEADLINE_KEY)
    return started if isinstance(started, Deadline) else Deadline(settings.deadline_s)


DeadlineDep = Annotated[Deadline, Depends(get_deadline)]


# Query parameters that may repeat (the list filters: `?tag=a&tag=b`); any other is taken once.
REPEATABLE = frozenset(
    name for name, f in FacetsQuery.model_fields.items() if get_origin(f.annotation) is list
)


async def single_valued(request: Request) -> None:
    """422 for a repeated scalar query parameter (`?limit=5&limit=6`), which would otherwise
    silently mean its last value."""
    seen: set[str] = set()
    for key, _ in request.query_params.multi_items():
        if key in seen and key not in REPEATABLE:
            raise InvalidInput(f"{key}: given more than once; give it once", key)
        seen.add(key)


@dataclass(frozen=True)
class Caller:
    principal: Principal
    admin: bool
    acls: tuple[BoardAcl, ...] | None  # of the principal's workspace, if read with the token


async def authenticate(
    runtime: Runtime,
    credentials: HTTPAuthorizationCredentials | None,
    address: str,
    deadline: Deadline,
) -> Session:
    """The API's token rule, for the routes and for the check before a body is read: a bearer
    token is required (401), and it must open a session (401, or 429 for a guessing address)."""
    if credentials is None or not credentials.credentials:
        raise Unauthorized(MISSING_TOKEN)
    return await session_for(runtime, credentials.credentials, address, deadline)


async def get_caller(
    request: Request,
    runtime: RuntimeDep,
    deadline: DeadlineDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Caller:
    """The principal behind the bearer token (401 otherwise), counted by the rate limiter."""
    checked = request.scope.get(SESSION_KEY)
    if checked is not None and credentials is not None and checked[0] == credentials.credentials:
        session = checked[1]  # app.bodylimit charged its rate limit already
        assert session.principal is not None
    else:
        session = await authenticate(runtime, credentials, client_address(request.scope), deadline)
        assert session.principal is not None
        runtime.limiter.check(session.principal.id)
    principal = session.principal
    logs.note(principal=principal.id)
    return Caller(principal, session.admin, session.acls)


CallerDep = Annotated[Caller, Depends(get_caller)]


@dataclass(frozen=True)
class Bearer:
    """A bearer token not yet looked up (a search reads it in its own request), and the
    address presenting it."""

    token: str
    address: str


async def get_bearer(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Bearer:
    """The bearer token, 401 when there is none; no round trip (see search_as)."""
    if credentials is None or not credentials.credentials:
        raise Unauthorized(MISSING_TOKEN)
    return Bearer(credentials.credentials, client_address(request.scope))


BearerDep = Annotated[Bearer, Depends(get_bearer)]


async def search_as(
    runtime: Runtime, who: Bearer, req: SearchRequest, deadline: Deadline
) -> tuple[Session, SearchResponse]:
    """The search of the token's principal, the token read in the search's own request where
    the backend allows; the same 401 / 429 rules as get_caller, applied before any hit is read."""
    session, resp = await search_for(runtime, who.token, who.address, deadline, req)
    assert session.principal is not None
    logs.note(principal=session.principal.id)
    return session, resp


async def get_principal(caller: CallerDep) -> Principal:
    return caller.principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]


async def get_admin(caller: CallerDep) -> Principal:
    """Ingestion and ACL routes: an admin token, else 403."""
    if not caller.admin:
        raise Forbidden("this route needs an admin token")
    return caller.principal


AdminDep = Annotated[Principal, Depends(get_admin)]
