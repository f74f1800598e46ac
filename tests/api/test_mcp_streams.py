"""GET /mcp SSE streams (issue 14, finding 1, authenticated variant): a cap per principal, a
cost against the rate limit while open, and closed when their token is revoked.

The service runs under a real uvicorn server (streams need a real socket) on the embedded
store; these tests exercise the HTTP edge, not a backend's behaviour.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from app.main import create_app
from suli.auth import revoke_token
from suli.core import open_backend
from suli.embedding import FakeEmbedder
from suli.settings import Settings

from .helpers import opener, seed

CHECK_S = 0.3
SSE = {"Accept": "text/event-stream", "mcp-protocol-version": "2025-06-18"}


class Live:
    def __init__(self, url: str, settings: Settings, tokens: dict[str, str]) -> None:
        self.url = url
        self.settings = settings
        self.tokens = tokens
        self.stack = ExitStack()

    def stream(self, who: str) -> httpx.Response:
        """Open GET /mcp as `who`; the response stays open until the test's end (or closed)."""
        client = self.stack.enter_context(httpx.Client(timeout=httpx.Timeout(5, read=3)))
        headers = {**SSE, "Authorization": f"Bearer {self.tokens[who]}"}
        return self.stack.enter_context(client.stream("GET", f"{self.url}/mcp", headers=headers))


def _ended_within(response: httpx.Response, seconds: float) -> bool:
    """True when the server ends the stream within `seconds` (reads until EOF)."""
    t0 = time.monotonic()
    try:
        for _ in response.iter_bytes():
            if time.monotonic() - t0 > seconds:
                return False
    except httpx.ReadTimeout:
        return False
    return time.monotonic() - t0 <= seconds


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Callable[..., Live]]:
    servers: list[tuple[uvicorn.Server, threading.Thread, Live]] = []

    def start(**overrides: Any) -> Live:
        values: dict[str, Any] = {
            "backend": "embedded",
            "embedded_path": tmp_path / "suli.db",
            "home": tmp_path,
            "embedder": "fake",
            "mcp_streams_per_principal": 2,
            "mcp_stream_check_s": CHECK_S,
            "rate_per_minute": 10_000,
            **overrides,
        }
        settings = Settings(**values)
        searcher = opener()(settings)
        try:
            tokens = seed(searcher)
        finally:
            searcher.backend.close()
        config = uvicorn.Config(
            create_app(settings, opener=opener()), host="127.0.0.1", port=0, log_level="warning"
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 60
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        port = server.servers[0].sockets[0].getsockname()[1]
        result = Live(f"http://127.0.0.1:{port}", settings, tokens)
        servers.append((server, thread, result))
        return result

    yield start
    for server, thread, result in servers:
        result.stack.close()
        server.should_exit = True
        thread.join(30)


def test_open_streams_are_capped_per_principal(live: Callable[..., Live]) -> None:
    svc = live()
    first, second = svc.stream("ana"), svc.stream("ana")
    assert first.status_code == second.status_code == 200
    third = svc.stream("ana")
    assert third.status_code == 429
    third.read()
    assert third.json()["error"]["code"] == "rate_limited"
    assert "streams" in third.json()["error"]["message"]
    assert int(third.headers["Retry-After"]) >= 1
    assert svc.stream("bob").status_code == 200  # the cap is per principal
    first.close()
    deadline = time.monotonic() + 5
    while (again := svc.stream("ana")).status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.1)  # the server notices the client went away
    assert again.status_code == 200


def test_a_revoked_tokens_stream_is_closed(live: Callable[..., Live]) -> None:
    svc = live()
    stream = svc.stream("ana")
    kept = svc.stream("bob")
    assert stream.status_code == kept.status_code == 200
    backend = open_backend(svc.settings, FakeEmbedder())
    try:
        revoke_token(backend, svc.tokens["ana"])
    finally:
        backend.close()
    assert _ended_within(stream, 10 * CHECK_S)
    assert not _ended_within(kept, 3 * CHECK_S)  # bob's token is still good


def test_an_open_stream_counts_against_the_rate_limit(live: Callable[..., Live]) -> None:
    svc = live(rate_per_minute=3)
    stream = svc.stream("ana")  # 1 request; then 1 per check period while open
    assert stream.status_code == 200
    assert _ended_within(stream, 10 * CHECK_S)
    r = httpx.get(
        f"{svc.url}/api/v1/search",
        params={"q": "deploy"},
        headers={"Authorization": f"Bearer {svc.tokens['ana']}"},
    )
    assert r.status_code == 429
