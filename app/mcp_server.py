"""MCP server: the tools `library_search` and `library_related` over the same core as HTTP.

Two transports, one tool set (build_server):
- stdio (`suli mcp --token T`): the principal is the token's, checked again on every call so a
  revoked token stops working at once (TokenAccess);
- streamable HTTP at /mcp in the query service: each HTTP request carries a bearer token,
  authenticated and rate-limited like /api/v1 before the SDK sees it (McpEndpoint, mount).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Annotated, Any, Protocol

from fastapi import FastAPI
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field, ValidationError
from starlette.routing import Match, Route
from starlette.types import Scope

from app.mcp_http import ADMIN_KEY, PRINCIPAL_KEY, McpEndpoint
from app.mcp_tools import (
    ToolSearchOut,
    check_arguments,
    failure,
    pick_limit,
    success,
    tool_body,
)
from app.respond import record, shown_to
from app.runtime import Runtime, run_blocking
from suli import __version__
from suli.auth import authenticate
from suli.errors import InvalidInput, SuliError, Unauthorized
from suli.models import Principal
from suli.search_params import MAX_LIMIT, NAMES, request_from
from suli.service import Card, Deadline, Searcher

MCP_PATH = "/mcp"

INSTRUCTIONS = (
    "Suli searches the team's library of work items (artifacts and work records by people and "
    "agents). Call library_search before starting work to find prior results, and "
    "library_related to find work connected to an item or to a card you are writing. You only "
    "ever see items your token may see. Prefer approved or completed items; when a result is "
    "superseded, follow superseded_by to its replacement."
)
READ_ONLY = ToolAnnotations(
    title="Search the work library",
    read_only_hint=True,
    destructive_hint=False,
    idempotent_hint=True,
    open_world_hint=False,
)
RELATED_READ_ONLY = READ_ONLY.model_copy(update={"title": "Find related work"})

_LIMIT = {"minimum": 1, "maximum": MAX_LIMIT}
Filter = str | list[str] | None
Limit = Annotated[
    int | None,
    Field(
        description=f"How many results at most, 1 to {MAX_LIMIT} (default 10).",
        json_schema_extra=_LIMIT,
        strict=True,  # a JSON number: `true` is not 1
    ),
]
MaxResults = Annotated[
    int | None,
    Field(
        description="Alias of `limit`; when both are given the smaller one applies.",
        json_schema_extra=_LIMIT,
        strict=True,
    ),
]


class Access(Protocol):
    """Where a transport gets the core and the caller's principal from."""

    async def searcher(self) -> Searcher: ...

    async def principal(self, ctx: Context, searcher: Searcher) -> Principal: ...

    def admin(self, ctx: Context) -> bool:
        """Whether the caller's token is an admin's (phase timings go to admins only)."""
        ...

    def record(self, route: str, body: dict[str, Any]) -> None: ...


class TokenAccess:
    """One token for the whole connection (stdio): re-checked on each call (revocation applies)."""

    def __init__(self, searcher: Searcher, token: str) -> None:
        self._searcher = searcher
        self._token = token
        self._admin = False  # as of the last check (one token for the whole connection)

    async def searcher(self) -> Searcher:
        return self._searcher

    async def principal(self, ctx: Context, searcher: Searcher) -> Principal:
        principal, self._admin = await run_blocking(authenticate, searcher.backend, self._token)
        return principal

    def admin(self, ctx: Context) -> bool:
        return self._admin

    def record(self, route: str, body: dict[str, Any]) -> None:
        """Nothing to record: a stdio server has no metrics endpoint."""


class HttpAccess:
    """The service's core; the principal McpEndpoint put on the HTTP request's scope."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def searcher(self) -> Searcher:
        return await run_blocking(self.runtime.searcher)

    async def principal(self, ctx: Context, searcher: Searcher) -> Principal:
        request = ctx.request_context.request
        principal = getattr(request, "scope", {}).get(PRINCIPAL_KEY)
        if not isinstance(principal, Principal):
            raise Unauthorized("missing bearer token (header `Authorization: Bearer <token>`)")
        return principal

    def admin(self, ctx: Context) -> bool:
        return getattr(ctx.request_context.request, "scope", {}).get(ADMIN_KEY) is True

    def record(self, route: str, body: dict[str, Any]) -> None:
        record(self.runtime, route, body)


def _arguments(ctx: Context) -> dict[str, Any]:
    params = ctx.request_context.params or {}
    args = params.get("arguments")
    return dict(args) if isinstance(args, dict) else {}


async def library_search_impl(access: Access, ctx: Context, args: dict[str, Any]) -> CallToolResult:
    """Validate like the CLI and HTTP, search under the caller's visibility, render."""
    try:
        check_arguments(_arguments(ctx), SEARCH_ARGS)
        cap, notes = pick_limit(args.pop("limit"), args.pop("max_results"))
        searcher = await access.searcher()
        settings = searcher.settings
        req = request_from({**args, "limit": cap}, max_query_chars=settings.max_query_chars)
        principal = await access.principal(ctx, searcher)
        deadline = Deadline(settings.deadline_s)
        resp = await run_blocking(searcher.search, principal, req, deadline, deadline=deadline)
    except SuliError as e:
        return failure(e)
    body = tool_body(
        resp,
        cap,
        notes,
        settings.max_response_bytes,
        lambda offset: searcher.cursor_at(principal.id, req, offset),
    )
    access.record("mcp:library_search", body)
    body = shown_to(body, access.admin(ctx))
    heading = (
        f"library_search {req.query!r}" if req.query else "library_search (browse, newest first)"
    )
    return success(heading, body)


async def library_related_impl(
    access: Access, ctx: Context, args: dict[str, Any]
) -> CallToolResult:
    """Related items for a visible item or an unsaved card; the same rules as POST /related."""
    try:
        check_arguments(_arguments(ctx), RELATED_ARGS)
        cap, notes = pick_limit(args["limit"], args["max_results"])
        item_id, title = args["item_id"], args["title"]
        spec, refs = args["spec"] or "", list(args["references"] or [])
        has_card = title is not None or bool(spec) or bool(refs)
        if item_id is not None and has_card:
            raise InvalidInput(
                "item_id: give item_id or a card (title, spec, references), not both", "item_id"
            )
        if item_id is None and not has_card:
            raise InvalidInput("item_id: give item_id, or a card's title and spec", "item_id")
        card = None if item_id is not None else Card(title or "", spec, tuple(refs))
        searcher = await access.searcher()
        settings = searcher.settings
        principal = await access.principal(ctx, searcher)
        deadline = Deadline(settings.deadline_s)
        resp = await run_blocking(
            lambda: searcher.related(
                principal, item_id=item_id, card=card, limit=cap, deadline=deadline
            ),
            deadline=deadline,
        )
    except SuliError as e:
        return failure(e)
    body = tool_body(resp, cap, notes, settings.max_response_bytes)
    access.record("mcp:library_related", body)
    body = shown_to(body, access.admin(ctx))
    heading = f"library_related {item_id}" if item_id else f"library_related card {title!r}"
    return success(heading, body)


# The tool's arguments: the core's search parameters (suli.search_params.NAMES) less those an
# agent has no use for (modes, explain, hidden items, page numbers: it follows `cursor`), plus
# `max_results`, the tool's cap of its answer.
SEARCH_ARGS = (
    *(n for n in NAMES if n not in ("mode", "explain", "include_hidden", "page")),
    "max_results",
)
RELATED_ARGS = ("item_id", "title", "spec", "references", "limit", "max_results")


@contextmanager
def _root_logging_kept() -> Iterator[None]:
    """Undo what the SDK's constructor does to the root logger.

    MCPServer() calls its `configure_logging`, a `logging.basicConfig` with a Rich handler: a
    library must not configure the process's logging (the service does, in app.server), and that
    handler, which imports on first traceback, failed with EMFILE under a connection flood and
    took the event loop down with it.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)


class SuliMCPServer(MCPServer):
    """The SDK's server, with argument type errors answered like every other bad argument.

    The SDK checks arguments against the tool's schema before our code runs and answers a
    mismatch (`limit: "ten"`) with text only; here it gets the structured error of
    mcp_tools.failure, naming the field.
    """

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            if not isinstance(e.__cause__, ValidationError):
                raise
            return failure(invalid_argument(e.__cause__))


def invalid_argument(e: ValidationError) -> InvalidInput:
    """The first schema error as InvalidInput naming the argument."""
    first = e.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "arguments"
    return InvalidInput(f"{field}: {first['msg']}", field)


def build_server(access: Access) -> MCPServer:
    """The MCP server with both tools, answering for whoever `access` says is calling."""
    with _root_logging_kept():
        server: MCPServer = SuliMCPServer(
            name="suli",
            title="Suli work library",
            version=__version__,  # the SDK's default is "": clients showed an empty version
            instructions=INSTRUCTIONS,
            log_level="WARNING",
        )

    async def library_search(
        ctx: Context,
        query: Annotated[
            str,
            Field(
                description="Words to find, in plain language (never query syntax). "
                "Empty: browse the newest items matching the filters."
            ),
        ] = "",
        kind: Annotated[Filter, Field(description="artifact or work-record.")] = None,
        outcome: Annotated[
            Filter,
            Field(
                description="approved, completed, in-progress, superseded, rejected, failed, "
                "abandoned; several are OR-ed."
            ),
        ] = None,
        board: Annotated[Filter, Field(description="Board id(s), e.g. brd_eng.")] = None,
        agent: Annotated[
            Filter, Field(description="Id(s) of the agent principal that made the item.")
        ] = None,
        station: Annotated[Filter, Field(description="Station id(s) or name(s).")] = None,
        tag: Annotated[Filter, Field(description="Tag(s); any of them matches.")] = None,
        since: Annotated[
            str | None, Field(description="Last activity on or after this UTC date, YYYY-MM-DD.")
        ] = None,
        until: Annotated[
            str | None, Field(description="Last activity on or before this UTC date, YYYY-MM-DD.")
        ] = None,
        recent_days: Annotated[
            int | None,
            Field(
                description="Only items active in the last N days (1 to 3650); not with since.",
                json_schema_extra={"minimum": 1, "maximum": 3650},
                strict=True,
            ),
        ] = None,
        regex: Annotated[
            str | None,
            Field(
                description="Regular expression the title or body must match (case-insensitive)."
            ),
        ] = None,
        limit: Limit = None,
        max_results: MaxResults = None,
        cursor: Annotated[
            str | None,
            Field(
                description="The `next` of the previous answer, to get its next page; send the "
                "same query and filters with it."
            ),
        ] = None,
        facets: Annotated[
            bool,
            Field(
                description="Also return `facets`: per filter, its values with counts over the "
                "matches (to pick a filter for a next call)."
            ),
        ] = False,
        exact_total: Annotated[
            bool,
            Field(
                description="Count `total` exactly (slower on large libraries); by default it "
                'is exact up to a limit and a lower bound past it (`total_relation` "gte").'
            ),
        ] = False,
    ) -> Annotated[CallToolResult, ToolSearchOut]:
        """Search the work library by words and meaning; with no words, browse newest first.

        Use it before starting a task to find prior work, decisions, specs and runbooks.
        Results are ranked by relevance, then by how the work turned out: approved and
        completed items come first; superseded, rejected, failed and abandoned ones rank lower
        but are still shown, so read `outcome` before reusing one. A superseded result names its
        replacement in `superseded_by` when you may see it: prefer the replacement.

        Filters combine with AND; several values of one filter (a list or "a,b") combine with
        OR. You only ever see items your token may see.

        Returns up to `limit` results (default 10, at most 25). Each has id, title, kind,
        outcome, scope (workspace, board or personal), snippet (matched words in <mark>), url,
        superseded_by and provenance. `total` counts every visible match (`total_relation`
        "gte": at least that many); `has_more` says a next page exists: call again with
        `cursor` set to `next`. `notes` explain which cap applied; `degraded` names a search
        leg that failed (results may then miss meaning-only matches). Call library_related with an id to find connected work.
        """
        args = {
            "query": query,
            "kind": kind,
            "outcome": outcome,
            "board": board,
            "agent": agent,
            "station": station,
            "tag": tag,
            "since": since,
            "until": until,
            "recent_days": recent_days,
            "regex": regex,
            "limit": limit,
            "max_results": max_results,
            "cursor": cursor,
            "facets": facets,
            "exact_total": exact_total,
        }
        return await library_search_impl(access, ctx, args)

    async def library_related(
        ctx: Context,
        item_id: Annotated[
            str | None, Field(description="Id of a visible item (e.g. from library_search).")
        ] = None,
        title: Annotated[
            str | None, Field(description="A card's title, for work that has no item yet.")
        ] = None,
        spec: Annotated[str, Field(description="A card's spec or description text.")] = "",
        references: Annotated[
            list[str] | None,
            Field(description="Item ids or URLs the card refers to; they rank first."),
        ] = None,
        limit: Limit = None,
        max_results: MaxResults = None,
    ) -> Annotated[CallToolResult, ToolSearchOut]:
        """Find work related to an item, or to a card you are writing (nothing is stored).

        Give either `item_id`, or a card: `title` and/or `spec`, optionally `references`.
        Items the source refers to directly come first (and, for an item, items that refer to
        it), then items similar in words and meaning; the item itself is left out. The result
        has the same shape as library_search: ids, titles, outcomes, snippets, urls,
        superseded_by, has_more, notes, degraded, truncated and timings.
        """
        args = {
            "item_id": item_id,
            "title": title,
            "spec": spec,
            "references": references,
            "limit": limit,
            "max_results": max_results,
        }
        return await library_related_impl(access, ctx, args)

    for fn, hints in ((library_search, READ_ONLY), (library_related, RELATED_READ_ONLY)):
        server.add_tool(
            fn,
            name=fn.__name__,
            title=hints.title,
            description=inspect.cleandoc(fn.__doc__ or ""),
            annotations=hints,
            structured_output=True,
        )
    return server


class NamedRoute(Route):
    """A Starlette route that puts itself on the scope as FastAPI's routes do, so the request
    line and the metrics name /mcp by its template instead of `unmatched`."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        return (match, {**child, "route": self}) if match is not Match.NONE else (match, child)


def mount(app: FastAPI) -> None:
    """Serve the MCP tools at /mcp over streamable HTTP, started and stopped with the app."""
    runtime: Runtime = app.state.runtime
    endpoint = McpEndpoint(build_server(HttpAccess(runtime)), runtime)
    # A plain ASGI route (not a FastAPI endpoint): the SDK reads the request body itself.
    app.router.routes.append(
        NamedRoute(MCP_PATH, endpoint, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    )
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state, endpoint.running():
            yield state

    app.router.lifespan_context = lifespan


def run_stdio(searcher: Searcher, token: str) -> None:
    """Serve both tools on stdin/stdout for the token's principal until the client hangs up."""
    build_server(TokenAccess(searcher, token)).run("stdio")
