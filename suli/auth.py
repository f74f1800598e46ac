"""API tokens: random secrets shown once; only their SHA-256 hash is stored."""

from __future__ import annotations

import hashlib
import secrets

from suli.backends.base import Directory, Session, as_store
from suli.errors import Forbidden, NotFound, Unauthorized
from suli.models import Principal

PREFIX = "suli_"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(backend: Directory, principal_id: str, admin: bool = False) -> str:
    """Make a token for a known principal; the caller shows it once, we keep only its hash."""
    if backend.principal(principal_id) is None:
        raise NotFound(f"no principal {principal_id!r}; load principals first")
    token = PREFIX + secrets.token_urlsafe(32)
    backend.put_token(hash_token(token), principal_id, admin)
    return token


def revoke_token(backend: Directory, token: str) -> None:
    """Revoke by the token itself or by its hash."""
    key = token if len(token) == 64 and not token.startswith(PREFIX) else hash_token(token)
    as_store(backend).revoke_token(key)


def authenticate(
    backend: Directory, token: str | None, *, admin: bool = False
) -> tuple[Principal, bool]:
    """The principal behind a bearer token; Unauthorized / Forbidden otherwise."""
    session = open_session(backend, token, admin=admin)
    assert session.principal is not None
    return session.principal, session.admin


def open_session(backend: Directory, token: str | None, *, admin: bool = False) -> Session:
    """The token's principal and admin flag, with the ACLs of its workspace where the store
    reads them with the token (None on OpenSearch); Unauthorized / Forbidden otherwise."""
    if not token:
        raise Unauthorized("missing bearer token")
    return checked(backend.session(hash_token(token)), admin=admin)


def checked(session: Session | None, *, admin: bool = False) -> Session:
    """The session a token opened, or Unauthorized (unknown, revoked, principal gone) /
    Forbidden (not an admin token where one is needed): the rule wherever a session is read,
    first or inside a search (Searcher.search_by_token)."""
    if session is None:
        raise Unauthorized("unknown or revoked token")
    if session.principal is None:
        raise Unauthorized("the token's principal no longer exists")
    if admin and not session.admin:
        raise Forbidden("this route needs an admin token")
    return session
