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
