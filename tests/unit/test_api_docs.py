"""/docs and /redoc work offline (every asset they reference is served by the app itself), and
the numbers the docs promise: `timings_ms` rounded to 0.1 ms."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from app.main import create_app
from suli.render import rounded
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


# ---- timings_ms: one rounding for every edge (suli.render.rounded) ----------------------------


@settings(max_examples=500, deadline=None)
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=12),
        st.floats(min_value=0, max_value=1e7, allow_nan=False, allow_infinity=False),
        min_size=1,
        max_size=8,
    ),
    st.dictionaries(st.sampled_from(["results", "total", "next"]), st.integers(), max_size=3),
)
def test_timings_are_rounded_to_a_tenth_of_a_millisecond(
    timings: dict[str, float], rest: dict[str, int]
) -> None:
    body = {**rest, "timings_ms": timings}
    out = rounded(body)
    # The expected value apart from round(): the float that one-decimal printing gives.
    assert out["timings_ms"] == {k: float(f"{v:.1f}") for k, v in timings.items()}
    assert all(abs(out["timings_ms"][k] - v) <= 0.05 + 1e-9 for k, v in timings.items())
    assert {k: v for k, v in out.items() if k != "timings_ms"} == rest
    assert rounded(out) == out  # idempotent: an edge may see an already rounded body
    assert body["timings_ms"] is timings  # the caller's body is not changed in place


def test_a_body_without_timings_is_left_alone() -> None:
    assert rounded({"results": [], "total": 0}) == {"results": [], "total": 0}
