"""Bodies at the door (app.bodylimit): the token before the body, and a cap on every body.

Over the real OpenSearch; the service in process behind a TestClient, which streams a
generator body as chunks with no Content-Length, as a chunked upload does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .helpers import Api, World, raw_item

BACKENDS = ("embedded", "opensearch")  # the default store too: no node needed for it

CAP = 4096
INGEST_CAP = 65_536


def _chunks(total: int, size: int = 1024) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        yield b" " * min(size, total - sent)
        sent += size


def _too_large(r: Any, cap: int) -> None:
    assert r.status_code == 413, r.text
    assert r.json() == {
        "error": {
            "code": "too_large",
            "message": f"body: the request body is over the limit of {cap} bytes",
            "field": "body",
        }
    }


@pytest.fixture
def capped(make_api: Callable[..., Api]) -> Api:
    return make_api(max_body_bytes=CAP, max_ingest_body_bytes=INGEST_CAP)


@pytest.mark.parametrize("path", ["/api/v1/search", "/api/v1/related", "/api/v1/items"])
def test_a_tokenless_body_gets_401_before_it_is_parsed(capped: Api, path: str) -> None:
    # Not JSON at all: a service that parsed the body first would answer 400 invalid_json.
    r = capped.client.post(path, content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 401, r.text
    assert r.json()["error"]["code"] == "unauthorized"
    r = capped.client.post(path, content=b"{not json", headers={"Authorization": "Bearer suli_no"})
    assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized")


def test_a_chunked_tokenless_body_gets_401(capped: Api) -> None:
    r = capped.client.post("/api/v1/search", content=_chunks(CAP * 10))
    assert r.status_code == 401, r.text


@pytest.mark.parametrize("who", [None, "ana"])
@pytest.mark.parametrize("path", ["/api/v1/search", "/api/v1/related"])
def test_a_declared_length_over_the_cap_gets_413(capped: Api, who: str | None, path: str) -> None:
    headers = capped.auth(who) if who else {}
    r = capped.client.post(path, content=b" " * (CAP + 1), headers=headers)
    _too_large(r, CAP)


def test_an_authenticated_chunked_body_past_the_cap_gets_413(capped: Api) -> None:
    r = capped.client.post("/api/v1/search", content=_chunks(CAP * 10), headers=capped.auth("ana"))
    _too_large(r, CAP)


def test_a_body_at_the_cap_is_served(capped: Api) -> None:
    body = json.dumps({"q": "deploy"}).encode()
    padded = body[:-1] + b" " * (CAP - len(body)) + b"}"
    assert len(padded) == CAP
    headers = {**capped.auth("ana"), "content-type": "application/json"}
    r = capped.client.post("/api/v1/search", content=padded, headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["results"]
    chunked = capped.client.post(
        "/api/v1/search", content=iter([padded[:100], padded[100:]]), headers=headers
    )
    assert chunked.status_code == 200, chunked.text


def test_ingestion_has_its_own_larger_cap(make_api: Callable[..., Api], fresh_world: World) -> None:
    api = make_api(on=fresh_world, max_body_bytes=CAP, max_ingest_body_bytes=INGEST_CAP)
    item = raw_item("itm_big", "Big capped item", "word " * (CAP // 2))
    r = api.client.post("/api/v1/items?refresh=true", json=[item], headers=api.auth("admin"))
    assert r.status_code == 200, r.text
    assert r.json()["indexed"] == 1
    over = raw_item("itm_huge", "Huge item", "word " * (INGEST_CAP // 4))
    r = api.client.post("/api/v1/items", json=[over], headers=api.auth("admin"))
    _too_large(r, INGEST_CAP)


def test_signin_takes_a_small_form_only(capped: Api) -> None:
    form = {"content-type": "application/x-www-form-urlencoded"}
    r = capped.client.post("/signin", content=b"token=" + b"x" * 5000, headers=form)
    _too_large(r, 4096)
    r = capped.client.post("/signin", content=_chunks(5000), headers=form)
    _too_large(r, 4096)
    token = capped.tokens["ana"]
    r = capped.client.post("/signin", data={"token": token, "next": "/"}, follow_redirects=False)
    assert r.status_code == 303


def test_the_rejections_are_counted(capped: Api) -> None:
    capped.client.post("/api/v1/search", content=b" " * (CAP + 1))
    capped.client.post("/api/v1/search", content=b"{}")
    text = capped.client.get("/metrics").text
    assert 'suli_rejected_requests_total{code="too_large"} 1.0' in text
    assert 'suli_rejected_requests_total{code="unauthorized"} 1.0' in text


def test_the_mcp_endpoint_is_capped_too(capped: Api) -> None:
    headers = {
        **capped.auth("ana"),
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
    }
    r = capped.client.post("/mcp", content=_chunks(CAP * 4), headers=headers)
    _too_large(r, CAP)
    r = capped.client.post("/mcp", content=b" " * (CAP + 1), headers=headers)
    _too_large(r, CAP)


@pytest.fixture
def served(world: World) -> Iterator[tuple[int, dict[str, str]]]:
    """The service capped at CAP under a real uvicorn server on a loopback port (the
    TestClient hands a body over whole, so only a socket shows when the cap is checked)."""
    from app.main import create_app
    from suli.settings import Settings

    from .helpers import guarded_servers, opener

    settings = Settings(
        **{**world.settings.model_dump(), "max_body_bytes": CAP, "max_ingest_body_bytes": CAP}
    )
    servers = guarded_servers(create_app(settings, opener=opener()))
    start = next(servers)
    yield start(), world.tokens
    next(servers, None)  # stops the server


def test_a_chunked_upload_gets_413_before_its_last_chunk(
    served: tuple[int, dict[str, str]],
) -> None:
    """The cap is counted as the chunks come in: past it the answer comes while the client
    still holds the rest (a cap checked after the last chunk would leave this one waiting)."""
    import socket

    port, tokens = served
    head = (
        "POST /api/v1/search HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        f"Content-Type: application/json\r\nAuthorization: Bearer {tokens['ana']}\r\n\r\n"
    ).encode()
    chunk = b"%x\r\n%s\r\n" % (1024, b" " * 1024)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head)
        for _ in range(CAP // 1024 + 2):  # past the cap; the closing 0-chunk is never sent
            s.sendall(chunk)
        answer = b""
        while b"\r\n\r\n" not in answer:
            got = s.recv(4096)  # times out (fails) if the server waits for the last chunk
            if not got:
                break
            answer += got
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
