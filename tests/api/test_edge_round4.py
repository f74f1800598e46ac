"""The HTTP/MCP edge under attack, round four (issue 33): bounded metrics, timings for admins
only, the admin check before the body, valid tokens through a guessing address, request lines
that name their principal.

Embedded store behind the app, in process (TestClient) or under a real uvicorn server where
the finding is about the event loop or the socket.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

import app.ratelimit
import app.routes_ops
from app.logs import JsonFormatter
from app.main import create_app
from suli.service import Searcher
from suli.settings import Settings

from .helpers import assert_error_shape, guarded_servers, opener, seed

MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


class Svc:
    def __init__(
        self, client: TestClient, tokens: dict[str, str], settings: Settings, app: Any
    ) -> None:
        self.client = client
        self.tokens = tokens
        self.settings = settings
        self.app = app

    def auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}


def _settings(tmp_path: Path, **overrides: Any) -> Settings:
    return Settings(
        backend="embedded",
        embedded_path=tmp_path / "suli.db",
        home=tmp_path,
        embedder="fake",
        **overrides,
    )


def _seeded(settings: Settings) -> dict[str, str]:
    searcher = opener()(settings)
    try:
        return seed(searcher)
    finally:
        searcher.backend.close()


@pytest.fixture
def make_svc(tmp_path: Path) -> Iterator[Callable[..., Svc]]:
    with ExitStack() as stack:

        def make(**overrides: Any) -> Svc:
            settings = _settings(tmp_path, **overrides)
            tokens = _seeded(settings)
            application = create_app(settings, opener=opener())
            client = stack.enter_context(TestClient(application, raise_server_exceptions=False))
            return Svc(client, tokens, settings, application)

        yield make


def _series(exposition: str) -> int:
    return sum(1 for line in exposition.splitlines() if line and not line.startswith("#"))


# ---- item 1: /metrics ---------------------------------------------------------------------


def test_invented_methods_do_not_grow_the_metrics(make_svc: Callable[..., Svc]) -> None:
    svc = make_svc()
    assert svc.client.request("FOO0", "/api/v1/search").status_code == 405
    assert svc.client.request("GET", "/no/such/path/0").status_code == 404
    before = _series(svc.client.get("/metrics").text)
    for n in range(1, 1001):
        svc.client.request(f"FOO{n}{'X' * 200}", "/api/v1/search")
        svc.client.request("GET", f"/no/such/path/{n}")
    after = svc.client.get("/metrics").text
    # The scrapes themselves add their own series once; nothing else may appear.
    assert _series(after) <= before + 20, _series(after)
    assert "FOO" not in after and "/no/such" not in after
    assert 'method="other"' in after and 'route="unmatched"' in after


def test_metrics_need_the_metrics_token_when_set(make_svc: Callable[..., Svc]) -> None:
    svc = make_svc(metrics_token="scrape-me")
    assert_error_shape(svc.client.get("/metrics"), 401, "unauthorized")
    wrong = {"Authorization": "Bearer nope"}
    assert_error_shape(svc.client.get("/metrics", headers=wrong), 401, "unauthorized")
    admin = svc.auth("admin")  # an API token, even an admin's, is not the metrics token
    assert_error_shape(svc.client.get("/metrics", headers=admin), 401, "unauthorized")
    r = svc.client.get("/metrics", headers={"Authorization": "Bearer scrape-me"})
    assert r.status_code == 200 and "suli_http_requests" in r.text


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., int]]:
    """Factory: the real app under a real uvicorn server (guarded protocol) on loopback."""
    yield from guarded_servers(None)  # type: ignore[arg-type]


def test_a_slow_exposition_does_not_hold_the_event_loop(
    tmp_path: Path, serve: Callable[..., int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """While /metrics renders (held here until released), other requests are answered."""
    entered, release = threading.Event(), threading.Event()
    real = app.routes_ops.generate_latest

    def held(registry: Any) -> bytes:
        entered.set()
        assert release.wait(30), "never released"
        return real(registry)

    monkeypatch.setattr(app.routes_ops, "generate_latest", held)
    settings = _settings(tmp_path)
    _seeded(settings)
    port = serve(create_app(settings, opener=opener()))
    base = f"http://127.0.0.1:{port}"
    scrape: dict[str, int] = {}
    t = threading.Thread(
        target=lambda: scrape.update(status=httpx.get(f"{base}/metrics", timeout=60).status_code)
    )
    t.start()
    try:
        assert entered.wait(30), "the scrape never started"
        # With the exposition rendered on the event loop this request could not be answered
        # until the release below (it would time out).
        assert httpx.get(f"{base}/healthz", timeout=10).status_code == 200
    finally:
        release.set()
        t.join(60)
    assert scrape == {"status": 200}


# ---- item 4: phase timings go to admins only ----------------------------------------------


def _timing_names(header: str) -> set[str]:
    return {part.split(";")[0].strip() for part in header.split(",")}


def test_only_admins_get_phase_timings_over_http(make_svc: Callable[..., Svc]) -> None:
    svc = make_svc()
    for method in ("get", "post"):
        for who in ("ana", "admin"):
            if method == "get":
                r = svc.client.get("/api/v1/search", params={"q": "index"}, headers=svc.auth(who))
            else:
                r = svc.client.post("/api/v1/search", json={"q": "index"}, headers=svc.auth(who))
            assert r.status_code == 200, r.text
            timings = r.json()["timings_ms"]
            names = _timing_names(r.headers["Server-Timing"])
            if who == "admin":
                assert len(timings) > 1 and "total" in timings, timings
                assert names == set(timings)
            else:
                assert set(timings) == {"total"}, (method, timings)
                assert names == {"total"}, (method, r.headers["Server-Timing"])
    r = svc.client.post("/api/v1/related", json={"title": "index"}, headers=svc.auth("ana"))
    assert r.status_code == 200 and set(r.json()["timings_ms"]) == {"total"}
    # The phases still reach the metrics.
    phases = set(re.findall(r'suli_phase_duration_seconds_count\{phase="(\w+)",route="/api/v1/search"\}',
                            svc.client.get("/metrics").text))  # fmt: skip
    assert len(phases - {"total"}) >= 2, phases


def _mcp_search(svc: Svc, who: str) -> dict[str, Any]:
    r = svc.client.post(
        "/mcp",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "library_search", "arguments": {"query": "index"}},
        },
        headers={**svc.auth(who), **MCP_HEADERS},
    )
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()["result"]
    assert not result.get("isError"), result
    return result


def test_only_admins_get_phase_timings_over_mcp(make_svc: Callable[..., Svc]) -> None:
    svc = make_svc()
    plain, admin = _mcp_search(svc, "ana"), _mcp_search(svc, "admin")
    assert set(plain["structuredContent"]["timings_ms"]) == {"total"}
    assert "(" not in plain["content"][0]["text"].split("timing_ms:")[1]
    assert len(admin["structuredContent"]["timings_ms"]) > 1


def test_the_web_page_gets_no_phase_timings(
    make_svc: Callable[..., Svc], monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.web

    seen: list[dict[str, Any]] = []
    real = app.web._page

    def spy(request: Any, name: str, context: dict[str, Any], status: int = 200) -> Any:
        if context.get("body"):
            seen.append(context["body"]["timings_ms"])
        return real(request, name, context, status)

    monkeypatch.setattr(app.web, "_page", spy)
    svc = make_svc()
    for who in ("ana", "admin"):
        svc.client.cookies.set("suli_token", svc.tokens[who])
        r = svc.client.get("/", params={"q": "index"})
        assert r.status_code == 200
        assert set(_timing_names(r.headers["Server-Timing"])) <= {"app", "total"}
    assert set(seen[0]) == {"total"} and len(seen[1]) > 1, seen


# ---- item 5: the admin check before the body ----------------------------------------------


def test_a_non_admin_body_on_an_admin_route_is_refused_unread(
    make_svc: Callable[..., Svc],
) -> None:
    svc = make_svc()
    sent = 0

    def body() -> Iterator[bytes]:
        nonlocal sent
        for _ in range(256):  # 16 MiB in 64 KiB chunks, never all needed
            sent += 1
            yield b" " * 65_536

    r = svc.client.post(
        "/api/v1/items",
        content=body(),
        headers={**svc.auth("ana"), "Content-Type": "application/json"},
    )
    assert_error_shape(r, 403, "forbidden")
    # The TestClient hands the app the whole body as it asks; refused before any read, the app
    # asked for none of it past the first chunk it was given.
    assert sent <= 1, sent
    for path, method in (("/api/v1/boards/brd_x", "PUT"), ("/api/v1/principals/prn_x", "PUT")):
        r = svc.client.request(method, path, content=b"{}", headers=svc.auth("ana"))
        assert_error_shape(r, 403, "forbidden")


def test_a_non_admin_body_is_charged_to_the_rate_limit_before_it_is_read(
    make_svc: Callable[..., Svc],
) -> None:
    svc = make_svc(rate_per_minute=2)
    headers = {**svc.auth("ana"), "Content-Type": "application/json"}
    for _ in range(2):
        assert svc.client.post("/api/v1/items", content=b"{", headers=headers).status_code == 403
    r = svc.client.post("/api/v1/items", content=b"{", headers=headers)
    assert_error_shape(r, 429, "rate_limited")


def test_a_search_body_is_charged_once(make_svc: Callable[..., Svc]) -> None:
    svc = make_svc(rate_per_minute=2)
    for _ in range(2):
        r = svc.client.post("/api/v1/search", json={"q": "index"}, headers=svc.auth("ana"))
        assert r.status_code == 200, r.text
    r = svc.client.post("/api/v1/search", json={"q": "index"}, headers=svc.auth("ana"))
    assert_error_shape(r, 429, "rate_limited")


def test_the_server_answers_a_non_admin_before_the_body_is_sent(
    tmp_path: Path, serve: Callable[..., int]
) -> None:
    """Through a real socket: 16 MB declared, only the head sent, the 403 arrives."""
    settings = _settings(tmp_path)
    tokens = _seeded(settings)
    port = serve(create_app(settings, opener=opener()))
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(
            b"POST /api/v1/items HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + tokens["ana"].encode() + b"\r\n"
            b"Content-Length: 16000000\r\n\r\n"
        )
        answer = s.recv(65_536)
    assert answer.startswith(b"HTTP/1.1 403"), answer[:200]


# ---- item 10: a guessing address keeps its valid tokens; no search work for unknown ones --


def test_bogus_tokens_do_not_lock_out_an_addresss_valid_token(
    make_svc: Callable[..., Svc],
) -> None:
    svc = make_svc(bad_token_per_minute=3)
    assert svc.client.get("/api/v1/facets", headers=svc.auth("ana")).status_code == 200
    bad = {"Authorization": "Bearer suli_guess"}
    for _ in range(3):
        assert_error_shape(svc.client.get("/api/v1/facets", headers=bad), 401, "unauthorized")
    for _ in range(3):
        assert_error_shape(svc.client.get("/api/v1/facets", headers=bad), 429, "rate_limited")
    # A token this service has seen valid still works from the guessing address, everywhere.
    assert svc.client.get("/api/v1/facets", headers=svc.auth("ana")).status_code == 200
    r = svc.client.get("/api/v1/search", params={"q": "index"}, headers=svc.auth("ana"))
    assert r.status_code == 200
    r = svc.client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                        headers={**svc.auth("ana"), **MCP_HEADERS})  # fmt: skip
    assert r.status_code == 200


def test_an_unknown_token_costs_no_search_work(
    make_svc: Callable[..., Svc], monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = make_svc()
    ran: list[str] = []
    for name in ("search", "search_by_token"):
        real = getattr(Searcher, name)

        def spy(self: Searcher, *a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
            ran.append(_name)
            return _real(self, *a, **k)

        monkeypatch.setattr(Searcher, name, spy)
    bad = {"Authorization": "Bearer suli_unknown"}
    r = svc.client.get("/api/v1/search", params={"q": "index"}, headers=bad)
    assert_error_shape(r, 401, "unauthorized")
    assert ran == []
    # A valid token searches; once known, in one request with its session (search_by_token).
    for _ in range(2):
        r = svc.client.get("/api/v1/search", params={"q": "index"}, headers=svc.auth("ana"))
        assert r.status_code == 200
    assert ran == ["search", "search_by_token"]


# ---- item 12: request lines -----------------------------------------------------------------


def _request_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "suli.request"]


def test_web_and_mcp_request_lines_name_the_principal(
    make_svc: Callable[..., Svc], caplog: pytest.LogCaptureFixture
) -> None:
    svc = make_svc()
    with caplog.at_level(logging.INFO, logger="suli.request"):
        _mcp_search(svc, "ana")
        svc.client.cookies.set("suli_token", svc.tokens["bob"])
        assert svc.client.get("/", params={"q": "index"}).status_code == 200
    lines = {r.route: r.principal for r in _request_lines(caplog)}  # type: ignore[attr-defined]
    assert lines == {"/mcp": "prn_ana", "/": "prn_bob"}, lines


def test_json_lines_drop_uvicorns_color_message() -> None:
    record = logging.LogRecord("uvicorn.error", logging.INFO, "", 0, "Started %s", ("x",), None)
    record.color_message = "Started \x1b[1m%s\x1b[0m"
    out = json.loads(JsonFormatter().format(record))
    assert "color_message" not in out and out["message"] == "Started x"


def test_tokens_module_keeps_known_tokens_bounded() -> None:
    known = app.ratelimit.KnownTokens(capacity=3)
    for n in range(10):
        known.add(f"h{n}")
    assert not known.recent("h0") and known.recent("h9") and len(known) == 3
    known.forget("h9")
    assert not known.recent("h9")


def _depends_on(dependant: Any, fn: Any) -> bool:
    return any(d.call is fn or _depends_on(d, fn) for d in dependant.dependencies)


def test_the_admin_body_routes_are_the_routes_that_need_an_admin() -> None:
    from fastapi.routing import APIRoute

    from app import routes_admin, routes_search
    from app.bodylimit import needs_admin
    from app.deps import get_admin

    checked = 0
    for route in (*routes_admin.router.routes, *routes_search.router.routes):
        assert isinstance(route, APIRoute) and route.path.startswith("/api/v1/")
        path = route.path.replace("{", "").replace("}", "")  # a concrete path of the template
        for method in route.methods - {"GET", "HEAD"}:
            assert needs_admin(method, path) == _depends_on(route.dependant, get_admin), (
                method,
                route.path,
            )
            checked += 1
    assert checked >= 6
