"""`suli search|show|related|facets --url URL --token T`: the same read, sent to a running
query service."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from suli.errors import (
    BackendUnavailable,
    DeadlineExceeded,
    Forbidden,
    IndexingError,
    InvalidInput,
    NotFound,
    RateLimited,
    SuliError,
    Unauthorized,
)

if TYPE_CHECKING:
    import httpx

url_option = click.option(
    "--url",
    envvar="SULI_URL",
    help="Ask a running Suli service at this base URL instead of the store. Env: SULI_URL.",
)
token_option = click.option(
    "--token", envvar="SULI_TOKEN", help="API token for --url. Env: SULI_TOKEN."
)

# CLI flag name -> API parameter name, where they differ.
_RENAMED = {"include_hidden": "hidden"}
TIMEOUT_S = 60.0  # above the service's own deadline (20 s by default): it answers 504 first


def _error(resp: httpx.Response) -> SuliError:
    """The service's JSON error as the core error it stands for (so exit codes match local)."""
    try:
        err = resp.json()["error"]
        code, message = str(err["code"]), str(err["message"])
    except (ValueError, KeyError, TypeError):
        return SuliError(f"HTTP {resp.status_code} from {resp.url}: {resp.text[:200]}")
    if code in ("invalid_input", "invalid_json"):
        return InvalidInput(message, err.get("field"))
    if code == "rate_limited":
        return RateLimited(message, int(err.get("limit", 0)), int(err.get("retry_after", 0)))
    simple: dict[str, type[SuliError]] = {
        "unauthorized": Unauthorized,
        "forbidden": Forbidden,
        "not_found": NotFound,
        "backend_unavailable": BackendUnavailable,
        "deadline_exceeded": DeadlineExceeded,
        "indexing_error": IndexingError,
    }
    return simple.get(code, SuliError)(message)


def search_params(query: str, flags: dict[str, Any]) -> dict[str, Any]:
    """The `suli search` flags as the body of POST /api/v1/search."""
    body: dict[str, Any] = {"q": query}
    for key, value in flags.items():
        if value is None or value == ():
            continue
        body[_RENAMED.get(key, key)] = list(value) if isinstance(value, tuple) else value
    return body


def call(
    url: str,
    token: str | None,
    method: str,
    path: str,
    *,
    json: Any = None,
    params: Any = None,
) -> dict[str, Any]:
    """One /api/v1 call on the service; its body, or the core error it reports."""
    if not token:
        raise click.UsageError("--url needs --token (or SULI_TOKEN)")
    endpoint = url.rstrip("/") + "/api/v1" + path
    import httpx  # here, not at the top: a local read never pays for importing it

    try:
        resp = httpx.request(
            method,
            endpoint,
            json=json,
            params=params,
            headers={"Authorization": f"Bearer {token}"},
            timeout=TIMEOUT_S,
        )
    except httpx.HTTPError as e:
        raise BackendUnavailable(f"cannot reach {endpoint}: {e}") from None
    if resp.status_code >= 400:
        raise _error(resp)
    return resp.json()


def remote_search(
    url: str, token: str | None, query: str, flags: dict[str, Any], page: int | None = None
) -> dict[str, Any]:
    """POST /api/v1/search on the service; its body, or the core error it reports.

    `page` N follows the service's cursors N - 1 times (the API pages by cursor only)."""
    if page is not None and (page < 1 or flags.get("cursor")):
        raise InvalidInput("page: a whole number from 1, and not with --cursor", "page")
    body = call(url, token, "POST", "/search", json=search_params(query, flags))
    for _ in range((page or 1) - 1):
        if not body["next"]:
            return {**body, "results": [], "offset": body["offset"] + len(body["results"])}
        params = search_params(query, {**flags, "cursor": body["next"]})
        body = call(url, token, "POST", "/search", json=params)
    return body


# --as for read commands that can also ask a service: required only without --url.
as_option = click.option(
    "--as",
    "principal_id",
    envvar="SULI_PRINCIPAL",
    help="Who reads the local store (id, e.g. prn_ana); with --url the token names who. "
    "Env: SULI_PRINCIPAL.",
)


def need_principal(principal_id: str | None, url: str | None) -> str:
    """The --as principal for a local read (with --url the token names the caller)."""
    if not url and not principal_id:
        raise click.UsageError("Missing option '--as' (or ask a service with --url/--token).")
    return principal_id or ""
