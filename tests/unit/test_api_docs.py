"""/docs and /redoc work offline: every asset they reference is served by the app itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from suli.settings import Settings


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    # No `with`: the lifespan (store, model) is not started; the docs need neither.
    return TestClient(create_app(Settings(backend="embedded", embedded_path=tmp_path / "s.db")))


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_reference_no_external_host_and_assets_are_served(
    client: TestClient, page: str
) -> None:
    html = client.get(page)
    assert html.status_code == 200
    assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", html.text, re.I), html.text
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html.text)
    urls += re.findall(r"""url: ?["']([^"']+)["']""", html.text)
    assert urls and all(u.startswith("/") for u in urls), urls
    for url in urls:
        got = client.get(url)
        assert got.status_code == 200, url
        assert len(got.content) > 1000, url
    assert "/openapi.json" in urls or "/openapi.json" in html.text


def test_swagger_ui_reads_openapi_3_1(client: TestClient) -> None:
    # Swagger UI 4 cannot render OpenAPI 3.1 (FastAPI's): the bundled one must be 5.x.
    assert client.get("/openapi.json").json()["openapi"].startswith("3.1")
    bundle = client.get("/docs-assets/swagger-ui-bundle.js").text
    assert re.search(r'"5\.\d+\.\d+"', bundle)
