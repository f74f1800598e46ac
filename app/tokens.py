"""Bearer tokens at the edges (API, MCP over HTTP, web sign-in): invalid ones are rate-limited.

Without a limit a client could try tokens as fast as the service answers (700 in 1.7 s). Each
client address may present bad_token_per_minute unknown or revoked tokens; past that, a token
gets 429 with Retry-After until the budget refills, unless this process has seen it valid in the
last day (app.ratelimit.KnownTokens): 30 bogus tokens a minute from one address (every user, behind
a balancer without SULI_TRUSTED_PROXIES) used to lock out that address's valid tokens. Telling a
guesser nothing stays true: a token is 256 random bits, and a token never seen valid waits like
a guess. A missing token is not a guess and is not counted.

A token never seen valid is looked up before any search work (search_for): a bogus token's
search used to embed the query and run both legs (26-29 ms) before its 401.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.runtime import Runtime, run_blocking
from suli.auth import checked, hash_token
from suli.backends.base import Session
from suli.errors import Unauthorized
from suli.models import SearchRequest, SearchResponse
from suli.service import Deadline


def client_address(scope: Mapping[str, Any]) -> str:
    """The client's address: the peer, or X-Forwarded-For's when the peer is in
    SULI_TRUSTED_PROXIES (uvicorn's ProxyHeadersMiddleware, installed by create_app)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


async def session_for(
    runtime: Runtime, token: str, address: str, deadline: Deadline, *, admin: bool = False
) -> Session:
    """The token's session; Unauthorized, or RateLimited for an address guessing tokens
    (a token seen valid lately is exempt: KnownTokens)."""
    token_hash = hash_token(token)
    if not runtime.known_tokens.recent(token_hash):
        runtime.bad_tokens.peek(address)
    searcher = runtime.built
    if searcher is None:
        searcher = await run_blocking(runtime.searcher, deadline=deadline)
    try:
        session = await run_blocking(lambda: checked(searcher.backend.session(token_hash)),
                                     deadline=deadline)  # fmt: skip
    except Unauthorized:
        runtime.known_tokens.forget(token_hash)
        runtime.bad_tokens.check(address)  # RateLimited once this address is past its budget
        raise
    runtime.known_tokens.add(token_hash)
    return checked(session, admin=admin)  # Forbidden for a valid token that is not an admin's


async def search_for(
    runtime: Runtime, token: str, address: str, deadline: Deadline, req: SearchRequest
) -> tuple[Session, SearchResponse]:
    """A search by a bearer token not yet looked up, and the session it opened.

    A token this process has seen valid lately: the session is read in the same request as the
    search where the backend allows (Searcher.search_by_token), held to session_for's rules
    before any hit is read. Any other token is looked up first (session_for), so an unknown
    one costs one read, never an embedding or the legs. Either way the principal's rate limit
    is charged before the search."""
    token_hash = hash_token(token)
    searcher = runtime.built
    if not runtime.known_tokens.recent(token_hash):
        session = await session_for(runtime, token, address, deadline)
        assert session.principal is not None
        runtime.limiter.check(session.principal.id)
        if searcher is None:
            searcher = await run_blocking(runtime.searcher, deadline=deadline)
        resp = await run_blocking(
            searcher.search, session.principal, req, deadline, session.acls, deadline=deadline
        )
        return session, resp
    if searcher is None:
        searcher = await run_blocking(runtime.searcher, deadline=deadline)
    opened: list[Session] = []

    def admit(session: Session | None) -> Session:
        one = checked(session)
        assert one.principal is not None
        runtime.limiter.check(one.principal.id)
        opened.append(one)
        return one

    built = searcher
    try:
        _, resp = await run_blocking(
            lambda: built.search_by_token(token_hash, req, admit, deadline), deadline=deadline
        )
    except Unauthorized:
        runtime.known_tokens.forget(token_hash)
        runtime.bad_tokens.check(address)
        raise
    return opened[0], resp
