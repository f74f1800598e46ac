"""The web page's HTTP contract: cookie flags, headers, redirects, and nothing invisible leaks."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from .conftest import Service


@pytest.fixture
def client(service: Service) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url) as c:
        yield c


def signed_in(client: httpx.Client, service: Service, who: str) -> httpx.Client:
    resp = client.post("/signin", data={"token": service.world.tokens[who], "next": "/"})
    assert resp.status_code == 303
    return client


def test_the_token_cookie_is_httponly_and_samesite_strict(
    client: httpx.Client, service: Service
) -> None:
    resp = client.post("/signin", data={"token": service.world.tokens["ana"], "next": "/items/x"})
    assert resp.status_code == 303 and resp.headers["location"] == "/items/x"
    cookie = resp.headers["set-cookie"]
    assert cookie.startswith(f"suli_token={service.world.tokens['ana']};")
    flags = {part.strip().lower() for part in cookie.split(";")}
    assert {"httponly", "samesite=strict", "path=/"} <= flags
    assert "secure" not in flags  # plain http on loopback; set on https
    out = client.post("/signout")
    assert out.status_code == 303 and out.headers["location"] == "/signin"
    assert 'suli_token=""' in out.headers["set-cookie"] and "Max-Age=0" in out.headers["set-cookie"]
    assert client.get("/").status_code == 303  # signed out: back to the sign-in form


@pytest.mark.parametrize("nxt", ["//evil.example/", "https://evil.example/", "\\\\evil", "items"])
def test_sign_in_never_redirects_off_site(client: httpx.Client, service: Service, nxt: str) -> None:
    resp = client.post("/signin", data={"token": service.world.tokens["ana"], "next": nxt})
    assert resp.status_code == 303 and resp.headers["location"] == "/"


def test_a_form_posted_from_another_site_is_refused(client: httpx.Client, service: Service) -> None:
    resp = client.post(
        "/signin",
        data={"token": service.world.tokens["ana"]},
        headers={"Origin": "https://evil.example"},
    )
    assert resp.status_code == 403
    assert "set-cookie" not in resp.headers
    assert "must be sent from this site" in resp.text


def test_a_bad_token_re_shows_the_form_with_401(client: httpx.Client) -> None:
    resp = client.post("/signin", data={"token": "suli_nope"})
    assert resp.status_code == 401
    assert "unknown or revoked token" in resp.text
    assert "set-cookie" not in resp.headers
    client.cookies.set("suli_token", "suli_nope")
    resp = client.get("/items/itm_rollback")
    assert resp.status_code == 303
    assert resp.headers["location"] == "/signin?next=%2Fitems%2Fitm_rollback"


def test_pages_send_security_headers(client: httpx.Client, service: Service) -> None:
    for path in ("/signin", "/?q=deploy", "/items/itm_rollback"):
        resp = signed_in(client, service, "ana").get(path)
        assert resp.status_code == 200, path
        assert resp.headers["content-type"].startswith("text/html")
        csp = resp.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert resp.headers["x-content-type-options"] == "nosniff"


def test_nothing_invisible_appears_in_facets_results_or_items(
    client: httpx.Client, service: Service
) -> None:
    signed_in(client, service, "bot")
    for path in ("/", "/?q=deploy", "/?q=payroll+secret", "/items/itm_canary", "/items/itm_old"):
        page = client.get(path).text
        for hidden in ("brd_eng", "Engineering", "brd_secret", "itm_checklist", "itm_secret"):
            assert hidden not in page, (path, hidden)
    assert client.get("/items/itm_checklist").status_code == 404
    assert client.get("/items/itm_hidden_nope").status_code == 404


def test_a_bad_parameter_is_a_422_page_naming_the_field(
    client: httpx.Client, service: Service
) -> None:
    signed_in(client, service, "ana")
    for query, field in (
        ("limit=abc", "limit"),
        ("limit=99", "limit"),
        ("outcome=great", "outcome"),
    ):
        resp = client.get(f"/?q=deploy&{query}")
        assert resp.status_code == 422
        assert f"{field}:" in resp.text
        assert 'role="alert"' in resp.text


def test_a_refused_date_is_not_counted_as_a_filter_on(
    client: httpx.Client, service: Service
) -> None:
    """The collapsed panel's badge: a date the search refused applied no filter."""
    signed_in(client, service, "ana")
    bad = client.get("/?q=deploy&since=2026-02-30")
    assert bad.status_code == 422 and "since:" in bad.text
    assert '<span class="active-count active-invalid">date invalid</span>' in bad.text
    assert " on</span>" not in bad.text
    good = client.get("/?q=deploy&since=2026-01-01")
    assert good.status_code == 200
    assert '<span class="active-count">1 on</span>' in good.text
