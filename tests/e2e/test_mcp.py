"""MCP tools through the SDK's real client: in memory, and over streamable HTTP at /mcp."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.types import CallToolResult

from suli.auth import create_token, revoke_token
from suli.render import response_json
from suli.search_params import search_request
from suli.service import Searcher

from .conftest import Service
from .mcp_client import call, ids, in_memory, over_http, session, text
from .world import VISIBLE, World

INVISIBLE_TO_BOT = {"itm_checklist", "itm_secret", "itm_bobnotes", "itm_other", "itm_hidden"}
# Newest last activity first: what browsing (no words) must return for ana.
ANA_BY_ACTIVITY = [
    "itm_alerts",
    "itm_rollback",
    "itm_checklist",
    "itm_canary",
    "itm_onboarding",
    "itm_old",
    "itm_legacy",
]


def core_ids(core: Searcher, who: str, query: str, **params: Any) -> list[str]:
    resp = core.search(core.principal(f"prn_{who}"), search_request(query, **params))
    return [r["id"] for r in response_json(resp)["results"]]


def test_both_tools_are_listed_read_only_idempotent_and_documented(
    core: Searcher, e2e_world: World
) -> None:
    tools, _ = session(in_memory(core, e2e_world.tokens["ana"]), [])
    by_name = {t.name: t for t in tools.tools}
    assert set(by_name) == {"library_search", "library_related"}
    for tool in by_name.values():
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is True
        assert tool.annotations.idempotent_hint is True
        assert tool.annotations.destructive_hint is False
        assert tool.description and "superseded_by" in tool.description
        assert tool.output_schema is not None
        assert {"results", "total", "has_more", "limit", "notes", "truncated", "degraded"} <= set(
            tool.output_schema["properties"]
        )
        props = tool.input_schema["properties"]
        for cap in ("limit", "max_results"):
            assert props[cap]["maximum"] == 25 and props[cap]["minimum"] == 1
            assert props[cap]["description"]
    search_props = by_name["library_search"].input_schema["properties"]
    assert set(search_props) == {
        "query",
        "kind",
        "outcome",
        "board",
        "agent",
        "station",
        "tag",
        "since",
        "until",
        "recent_days",
        "regex",
        "limit",
        "max_results",
        "cursor",
        "facets",
        "exact_total",
    }
    assert all(p.get("description") for p in search_props.values())
    assert set(by_name["library_related"].input_schema["properties"]) == {
        "item_id",
        "title",
        "spec",
        "references",
        "limit",
        "max_results",
    }


def test_search_matches_the_core_and_the_text_carries_the_same_facts(
    core: Searcher, e2e_world: World
) -> None:
    result = call(in_memory(core, e2e_world.tokens["ana"]), "library_search", query="deploy")
    assert ids(result) == core_ids(core, "ana", "deploy")
    body = result.structured_content
    assert body is not None and len(body["results"]) >= 4
    words = text(result)
    for r in body["results"]:
        for fact in (r["id"], r["title"], r["outcome"], r["url"], r["snippet"], r["scope"]):
            assert fact in words, fact
        if r["superseded_by"]:
            assert f"superseded_by: {r['superseded_by']}" in words
    assert any("<mark>" in r["snippet"] for r in body["results"])
    old = next(r for r in body["results"] if r["id"] == "itm_old")
    legacy = next(r for r in body["results"] if r["id"] == "itm_legacy")
    assert old["superseded_by"] == "itm_rollback"
    # itm_legacy's replacement (itm_secret) is invisible to ana: only "superseded" remains.
    assert legacy["superseded"] is True and legacy["superseded_by"] is None
    assert "itm_secret" not in words
    assert "degraded: no" in words and body["degraded"] == []
    assert "truncated: no" in words and body["truncated"] is False
    assert f"timing_ms: total {body['timings_ms']['total']:g}" in words
    assert body["has_more"] is False and body["limit"] == 10


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"query": "deploy", "outcome": "superseded"}, {"itm_old", "itm_legacy"}),
        ({"query": "deploy", "kind": "work-record"}, {"itm_canary"}),
        ({"query": "deploy", "board": ["brd_ops"]}, {"itm_alerts"}),
        ({"station": "Release desk"}, {"itm_rollback"}),
        ({"tag": ["runbook"]}, {"itm_rollback", "itm_old"}),
        ({"outcome": "approved,completed"}, {"itm_rollback", "itm_checklist", "itm_onboarding"}),
        ({"since": "2026-01-15", "until": "2026-01-21"}, {"itm_rollback", "itm_checklist"}),
        ({"agent": "prn_bot"}, {"itm_checklist", "itm_alerts"}),
        ({"regex": "canary"}, {"itm_canary"}),
    ],
)
def test_filters(
    core: Searcher, e2e_world: World, args: dict[str, Any], expected: set[str]
) -> None:
    result = call(in_memory(core, e2e_world.tokens["ana"]), "library_search", **args)
    assert set(ids(result)) == expected


def test_no_words_browses_newest_first(core: Searcher, e2e_world: World) -> None:
    result = call(in_memory(core, e2e_world.tokens["ana"]), "library_search", limit=25)
    assert ids(result) == ANA_BY_ACTIVITY
    assert "browse, newest first" in text(result)


def test_an_agent_sees_only_its_boards(core: Searcher, e2e_world: World) -> None:
    server = in_memory(core, e2e_world.tokens["bot"])
    _, (browse, search, eng, payroll, related) = session(
        server,
        [
            ("library_search", {"limit": 25}),
            ("library_search", {"query": "deploy", "max_results": 25}),
            ("library_search", {"query": "deploy", "board": "brd_eng"}),
            ("library_search", {"query": "payroll deploy plan"}),
            ("library_related", {"item_id": "itm_checklist"}),
        ],
    )
    assert set(ids(browse)) == VISIBLE["bot"]
    assert "itm_alerts" in ids(search) and set(ids(search)) <= VISIBLE["bot"]
    assert ids(eng) == []
    assert set(ids(payroll)) <= VISIBLE["bot"]
    for result in (browse, search, eng, payroll):
        assert not INVISIBLE_TO_BOT & set(text(result).replace(",", " ").split())
        assert "Secret" not in text(result)
    # An item on a board the agent may not read does not exist for it.
    assert related.is_error
    assert related.structured_content == {
        "error": {"code": "not_found", "message": "no item 'itm_checklist'"}
    }


def test_related_by_item_and_by_card(core: Searcher, e2e_world: World) -> None:
    _, (by_item, by_card) = session(
        in_memory(core, e2e_world.tokens["ana"]),
        [
            ("library_related", {"item_id": "itm_checklist", "limit": 5}),
            (
                "library_related",
                {
                    "title": "Faster rollback for deploys",
                    "spec": "Make the pipeline roll back by itself.",
                    "references": ["itm_canary", "https://wiki.example/rollback"],
                },
            ),
        ],
    )
    got = ids(by_item)
    assert got[0] == "itm_rollback"  # the checklist's direct reference comes first
    assert "itm_checklist" not in got and "itm_secret" not in got
    assert ids(by_card)[0] == "itm_canary"
    assert "library_related card 'Faster rollback for deploys'" in text(by_card)


def test_limit_and_its_alias_max_results(core: Searcher, e2e_world: World) -> None:
    _, (both, alias, equal, default) = session(
        in_memory(core, e2e_world.tokens["ana"]),
        [
            ("library_search", {"query": "deploy", "limit": 5, "max_results": 2}),
            ("library_search", {"query": "deploy", "max_results": 3}),
            ("library_search", {"query": "deploy", "limit": 4, "max_results": 4}),
            ("library_search", {"query": "deploy"}),
        ],
    )
    full = ids(default)
    assert ids(both) == full[:2]
    body = both.structured_content
    assert body is not None
    assert body["limit"] == 2 and body["has_more"] is True and body["total"] == len(full)
    assert any("tighter cap, 2" in n for n in body["notes"])
    assert any(f"Showing results 1-2 of {len(full)}" in n for n in body["notes"])
    assert body["next"] and f"next page: cursor={body['next']}" in text(both)
    assert ids(alias) == full[:3]
    assert alias.structured_content is not None and alias.structured_content["limit"] == 3
    assert ids(equal) == full[:4]
    assert equal.structured_content is not None
    assert not any("tighter" in n for n in equal.structured_content["notes"])


def test_cursor_pages_and_facets_follow_the_query(core: Searcher, e2e_world: World) -> None:
    token = e2e_world.tokens["ana"]
    full = ids(call(in_memory(core, token), "library_search", query="deploy", limit=25))
    first = call(in_memory(core, token), "library_search", query="deploy", limit=2, facets=True)
    body = first.structured_content
    assert body is not None and body["has_more"] and body["next"]
    kinds = sum(v["count"] for v in body["facets"]["facets"]["kind"])
    assert kinds == body["facets"]["total"] == body["total"] == len(full)
    assert "facets over the" in text(first)
    second = call(
        in_memory(core, token), "library_search", query="deploy", limit=2, cursor=body["next"]
    )
    assert ids(second) == full[2:4]
    assert "3. " in text(second)  # numbering goes on from the first page
    # a cursor of another caller is refused, naming the argument
    bob = call(
        in_memory(core, e2e_world.tokens["bob"]),
        "library_search",
        query="deploy",
        limit=2,
        cursor=body["next"],
    )
    assert bob.is_error and bob.structured_content is not None
    assert bob.structured_content["error"]["field"] == "cursor"
    assert "Invalid argument `cursor`" in text(bob)


@pytest.mark.parametrize(
    ("tool", "args", "field"),
    [
        ("library_search", {"query": "deploy", "limit": 0}, "limit"),
        ("library_search", {"query": "deploy", "limit": 26}, "limit"),
        ("library_search", {"query": "deploy", "max_results": 100}, "max_results"),
        ("library_search", {"query": "deploy", "outcome": "great"}, "outcome"),
        ("library_search", {"kind": ["essay"]}, "kind"),
        ("library_search", {"since": "yesterday"}, "since"),
        ("library_search", {"since": "2026-02-01", "until": "2026-01-01"}, "since"),
        ("library_search", {"recent_days": 0}, "recent_days"),
        ("library_search", {"regex": "(unclosed"}, "regex"),
        ("library_search", {"query": "x" * 1001}, "query"),
        ("library_search", {"q": "deploy"}, "q"),
        ("library_related", {"item_id": "itm_rollback", "title": "Both"}, "item_id"),
        ("library_related", {}, "item_id"),
        ("library_related", {"item_id": "itm_rollback", "limit": 99}, "limit"),
        ("library_related", {"id": "itm_rollback"}, "id"),
    ],
)
def test_bad_arguments_are_tool_errors_naming_the_field(
    core: Searcher, e2e_world: World, tool: str, args: dict[str, Any], field: str
) -> None:
    result = call(in_memory(core, e2e_world.tokens["ana"]), tool, **args)
    assert result.is_error
    assert result.structured_content is not None
    err = result.structured_content["error"]
    assert err["code"] == "invalid_input" and err["field"] == field
    assert text(result).startswith(f"Invalid argument `{field}`:")
    assert "call again" in text(result)


def test_an_unknown_argument_suggests_the_right_name(core: Searcher, e2e_world: World) -> None:
    result = call(in_memory(core, e2e_world.tokens["ana"]), "library_search", q="deploy")
    assert "did you mean `query`?" in text(result)


def test_a_mistyped_argument_is_a_tool_error_not_a_crash(core: Searcher, e2e_world: World) -> None:
    result = call(in_memory(core, e2e_world.tokens["ana"]), "library_search", limit="ten")
    assert result.is_error
    assert "limit" in text(result) and "valid integer" in text(result)


UNAUTHORIZED = {"error": {"code": "unauthorized", "message": "unknown or revoked token"}}


def test_an_unknown_token_is_refused(core: Searcher) -> None:
    result = call(in_memory(core, "suli_not-a-token"), "library_search", query="deploy")
    assert result.is_error
    assert result.structured_content == UNAUTHORIZED


def test_a_revoked_token_stops_working(core: Searcher) -> None:
    """Revoked mid-connection: the next call on the same session is refused."""
    token = create_token(core.backend, "prn_ana")  # a token of its own: the world's stay valid

    async def go() -> tuple[CallToolResult, CallToolResult]:
        async with Client(in_memory(core, token), raise_exceptions=True) as client:
            before = await client.call_tool("library_search", {"query": "deploy"})
            await anyio.to_thread.run_sync(revoke_token, core.backend, token)
            return before, await client.call_tool("library_search", {"query": "deploy"})

    before, after = anyio.run(go)
    assert ids(before) == core_ids(core, "ana", "deploy")
    assert after.is_error
    assert after.structured_content == UNAUTHORIZED
    assert "itm_" not in text(after)


def test_streamable_http_uses_each_requests_bearer_token(core: Searcher, service: Service) -> None:
    url = f"{service.url}/mcp"
    tokens = service.world.tokens
    _, (bot, related) = session(
        over_http(url, tokens["bot"]),
        [
            ("library_search", {"query": "deploy", "limit": 25}),
            ("library_related", {"item_id": "itm_checklist"}),
        ],
    )
    assert ids(bot) == core_ids(core, "bot", "deploy", limit=25)
    assert related.is_error
    _, (ana,) = session(
        over_http(url, tokens["ana"]), [("library_related", {"item_id": "itm_checklist"})]
    )
    assert ids(ana)[0] == "itm_rollback"


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer suli_nope"}])
def test_streamable_http_without_a_valid_token_is_401(
    service: Service, headers: dict[str, str]
) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    resp = httpx.post(
        f"{service.url}/mcp",
        json=body,
        headers={**headers, "Accept": "application/json, text/event-stream"},
    )
    assert resp.status_code == 401
    assert resp.headers["www-authenticate"] == "Bearer"
    assert resp.json()["error"]["code"] == "unauthorized"
