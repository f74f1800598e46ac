"""The HTTP/MCP edge hides internals and refuses what it would otherwise guess.

Embedded store behind the app: these are edge rules (what an answer may say, which input is
refused), the same over either backend; the OpenSearch URL case uses an unreachable URL.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from e2e.mcp_client import call
from fastapi.testclient import TestClient

import app.runtime
from app.main import create_app
from app.mcp_server import TokenAccess, build_server
from suli.settings import Settings

from .helpers import assert_error_shape, opener, seed


class Svc:
    def __init__(self, client: TestClient, tokens: dict[str, str], settings: Settings) -> None:
        self.client = client
        self.tokens = tokens
        self.settings = settings

    def auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}


@pytest.fixture
def make_svc(tmp_path: Path) -> Iterator[Callable[..., Svc]]:
    with ExitStack() as stack:

        def make(**overrides: Any) -> Svc:
            settings = Settings(
                backend="embedded",
                embedded_path=tmp_path / "suli.db",
                home=tmp_path,
                embedder="fake",
                **overrides,
            )
            searcher = opener()(settings)
            try:
                tokens = seed(searcher)
            finally:
                searcher.backend.close()
            app = create_app(settings, opener=opener())
            client = stack.enter_context(TestClient(app, raise_server_exceptions=False))
            return Svc(client, tokens, settings)

        yield make


def test_readyz_names_no_internals(make_svc: Callable[..., Svc]) -> None:
    svc = make_svc()
    r = svc.client.get("/readyz")
    assert r.status_code == 200
    assert r.json() == {"status": "ready"}  # no item count, store path or index name
    assert str(svc.settings.sqlite_path) not in r.text


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_503_bodies_never_show_the_opensearch_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app.runtime, "RECONNECT_EVERY_S", 0.0)  # each request tries again
    host, port = "127.0.0.1", _dead_port()
    settings = Settings(
        backend="opensearch", opensearch_url=f"http://{host}:{port}", embedder="fake"
    )
    with TestClient(create_app(settings, opener=opener()), raise_server_exceptions=False) as c:
        answers = [
            c.get("/api/v1/search", params={"q": "x"}, headers={"Authorization": "Bearer bad"}),
            c.post(
                "/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                headers={
                    "Authorization": "Bearer bad",
                    "Accept": "application/json, text/event-stream",
                },
            ),
            c.get("/readyz"),
        ]
        for r in answers:
            err = assert_error_shape(r, 503, "backend_unavailable")
            assert str(port) not in r.text and host not in r.text, err
            assert "http://" not in r.text


def test_invalid_tokens_are_rate_limited_per_address(make_svc: Callable[..., Svc]) -> None:
    svc = make_svc(bad_token_per_minute=3)
    bad = {"Authorization": "Bearer suli_guess"}
    for _ in range(3):
        assert_error_shape(svc.client.get("/api/v1/facets", headers=bad), 401, "unauthorized")
    r = svc.client.get("/api/v1/facets", headers=bad)
    err = assert_error_shape(r, 429, "rate_limited")
    assert int(r.headers["Retry-After"]) >= 1 and err["retry_after"] >= 1
    # Past the budget even a valid token from this address waits: a guess cannot be confirmed.
    assert svc.client.get("/api/v1/facets", headers=svc.auth("ana")).status_code == 429
    mcp = svc.client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={**bad, "Accept": "application/json, text/event-stream"},
    )
    assert mcp.status_code == 429


def test_a_missing_token_is_not_counted_as_a_guess(make_svc: Callable[..., Svc]) -> None:
    svc = make_svc(bad_token_per_minute=1)
    for _ in range(3):
        assert svc.client.get("/api/v1/facets").status_code == 401
    assert svc.client.get("/api/v1/facets", headers=svc.auth("ana")).status_code == 200


def test_the_web_429_page_says_when_to_retry(make_svc: Callable[..., Svc]) -> None:
    svc = make_svc(bad_token_per_minute=1)
    form = {"token": "suli_guess", "next": "/"}
    assert svc.client.post("/signin", data=form).status_code == 401
    r = svc.client.post("/signin", data=form)
    assert r.status_code == 429
    assert r.headers["content-type"].startswith("text/html")
    assert int(r.headers["Retry-After"]) >= 1


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("/api/v1/search", {"q": "deploy", "limit": True}),
        ("/api/v1/search", {"q": "deploy", "limit": "5"}),
        ("/api/v1/related", {"item_id": "itm_rollback", "limit": True}),
    ],
)
def test_a_json_limit_must_be_a_number(
    make_svc: Callable[..., Svc], route: str, body: dict[str, Any]
) -> None:
    svc = make_svc()
    r = svc.client.post(route, json=body, headers=svc.auth("ana"))
    assert_error_shape(r, 422, "invalid_input", "limit")


@pytest.mark.parametrize(
    ("query", "field"),
    [("q=a&q=b", "q"), ("q=deploy&limit=5&limit=6", "limit"), ("mode=text&mode=vector", "mode")],
)
def test_a_repeated_scalar_query_parameter_is_refused(
    make_svc: Callable[..., Svc], query: str, field: str
) -> None:
    svc = make_svc()
    r = svc.client.get(f"/api/v1/search?{query}", headers=svc.auth("ana"))
    assert_error_shape(r, 422, "invalid_input", field)


def test_repeated_list_filters_still_combine(make_svc: Callable[..., Svc]) -> None:
    svc = make_svc()
    r = svc.client.get(
        "/api/v1/search?q=deploy&outcome=approved&outcome=completed", headers=svc.auth("ana")
    )
    assert r.status_code == 200, r.text
    assert {x["outcome"] for x in r.json()["results"]} == {"approved", "completed"}


@pytest.mark.parametrize(
    ("args", "field"),
    [({"limit": "ten"}, "limit"), ({"limit": True}, "limit"), ({"query": 5}, "query")],
)
def test_mcp_argument_type_errors_are_structured(
    make_svc: Callable[..., Svc], args: dict[str, Any], field: str
) -> None:
    svc = make_svc()
    searcher = opener()(svc.settings)
    try:
        result = call(
            build_server(TokenAccess(searcher, svc.tokens["ana"])), "library_search", **args
        )
    finally:
        searcher.backend.close()
    assert result.is_error
    assert result.structured_content is not None
    err = result.structured_content["error"]
    assert err["code"] == "invalid_input" and err["field"] == field
