"""Behind a load balancer: X-Forwarded-For and X-Forwarded-Proto count only from trusted proxies.

The TestClient's peer address is set per client, so a trusted proxy and a stranger can both be
played in process, over the real OpenSearch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from suli.settings import Settings

from .helpers import World, opener

PROXY = "10.9.8.7"
STRANGER = "192.0.2.10"


@pytest.fixture
def clients(world: World) -> Iterator[Any]:
    """Factory: a TestClient whose peer is `peer`, over the world with setting overrides."""
    with ExitStack() as stack:

        def make(peer: str, base_url: str = "http://testserver", **overrides: Any) -> TestClient:
            settings = Settings(**{**world.settings.model_dump(), **overrides})
            app = create_app(settings, opener=opener())
            client = TestClient(
                app, base_url=base_url, client=(peer, 4321), raise_server_exceptions=False
            )
            return stack.enter_context(client)

        yield make


def _cookie_flags(client: TestClient, token: str, **headers: str) -> set[str]:
    r = client.post(
        "/signin", data={"token": token, "next": "/"}, headers=headers, follow_redirects=False
    )
    assert r.status_code == 303, r.text
    return {part.strip().lower() for part in r.headers["set-cookie"].split(";")}


def test_the_cookie_is_secure_behind_a_trusted_https_proxy(clients: Any, world: World) -> None:
    client = clients(PROXY, trusted_proxies=f"{PROXY}/32")
    https = {"x-forwarded-proto": "https", "x-forwarded-for": "203.0.113.5"}
    assert "secure" in _cookie_flags(client, world.tokens["ana"], **https)
    assert "secure" not in _cookie_flags(client, world.tokens["ana"])  # the proxy spoke http


def test_a_stranger_cannot_claim_https(clients: Any, world: World) -> None:
    client = clients(STRANGER, trusted_proxies=f"{PROXY}/32")
    flags = _cookie_flags(client, world.tokens["ana"], **{"x-forwarded-proto": "https"})
    assert "secure" not in flags


def test_the_cookie_is_secure_on_https_and_when_forced(clients: Any, world: World) -> None:
    assert "secure" in _cookie_flags(clients(STRANGER, "https://testserver"), world.tokens["ana"])
    forced = clients(STRANGER, secure_cookies=True)
    assert "secure" in _cookie_flags(forced, world.tokens["ana"])


def _bad_token(client: TestClient, forwarded_for: str) -> int:
    headers = {"Authorization": "Bearer suli_wrong", "x-forwarded-for": forwarded_for}
    return client.get("/api/v1/search", params={"q": "deploy"}, headers=headers).status_code


def test_a_trusted_proxy_forwards_the_client_address(clients: Any) -> None:
    """The invalid-token budget is per client address: behind the proxy, per forwarded client."""
    client = clients(PROXY, trusted_proxies="10.0.0.0/8", bad_token_per_minute=2)
    assert [_bad_token(client, "203.0.113.5") for _ in range(3)] == [401, 401, 429]
    assert _bad_token(client, "203.0.113.6") == 401  # another client behind the same proxy


def test_a_strangers_forwarded_for_is_ignored(clients: Any) -> None:
    client = clients(STRANGER, trusted_proxies="10.0.0.0/8", bad_token_per_minute=2)
    codes = [_bad_token(client, f"203.0.113.{n}") for n in range(3)]
    assert codes == [401, 401, 429]  # one address, whatever it claims to forward


def test_trusted_proxies_must_be_addresses() -> None:
    with pytest.raises(ValueError, match="not an IP address or network"):
        Settings(trusted_proxies="10.0.0.0/8, lb.internal", embedder="fake")
