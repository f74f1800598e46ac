"""Bearer tokens at the edges (API, MCP over HTTP, web sign-in): invalid ones are rate-limited.

Without a limit a client could try tokens as fast as the service answers (700 in 1.7 s). Each
client address may present bad_token_per_minute unknown or revoked tokens; past that, every
token it presents gets 429 with Retry-After until its budget refills, valid or not (letting a
valid one through would tell a guesser it guessed right). A missing token is not a guess and is
not counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.runtime import Runtime, run_blocking
from suli.auth import checked, hash_token, open_session
from suli.backends.base import Session
from suli.errors import Unauthorized
from suli.models import Principal, SearchRequest, SearchResponse
from suli.service import Deadline


def client_address(scope: Mapping[str, Any]) -> str:
    """The client's address: the peer, or X-Forwarded-For's when the peer is in
    SULI_TRUSTED_PROXIES (uvicorn's ProxyHeadersMiddleware, installed by create_app)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


async def session_for(
    runtime: Runtime, token: str, address: str, deadline: Deadline, *, admin: bool = False
) -> Session:
    """The token's session; Unauthorized, or RateLimited for an address guessing tokens."""
    runtime.bad_tokens.peek(address)
    searcher = runtime.built
    if searcher is None:
        searcher = await run_blocking(runtime.searcher, deadline=deadline)
    try:
        return await run_blocking(
            lambda: open_session(searcher.backend, token, admin=admin), deadline=deadline
        )
    except Unauthorized:
        runtime.bad_tokens.check(address)  # RateLimited once this address is past its budget
        raise


async def search_for(
    runtime: Runtime, token: str, address: str, deadline: Deadline, req: SearchRequest
) -> tuple[Principal, SearchResponse]:
    """A search by a bearer token not yet looked up: the session is read in the same request
    as the search where the backend allows (Searcher.search_by_token), and held to the same
    rules as session_for's before any hit is read: Unauthorized (counted against a guessing
    address, RateLimited past its budget), then the principal's rate limit."""
    runtime.bad_tokens.peek(address)
    searcher = runtime.built
    if searcher is None:
        searcher = await run_blocking(runtime.searcher, deadline=deadline)

    def admit(session: Session | None) -> Session:
        opened = checked(session)
        assert opened.principal is not None
        runtime.limiter.check(opened.principal.id)
        return opened

    built = searcher
    try:
        return await run_blocking(
            lambda: built.search_by_token(hash_token(token), req, admit, deadline),
            deadline=deadline,
        )
    except Unauthorized:
        runtime.bad_tokens.check(address)
        raise
