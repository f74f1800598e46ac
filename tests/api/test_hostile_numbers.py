"""`POST /api/v1/items` shares the indexer's validator: NaN, infinities and numbers beyond the
float range are rejected per item naming the field, the rest of the batch goes in, and every
answer afterwards is strict JSON (a stored NaN would fail each answer holding the item).

On the embedded store: the route and the validator are the same code on both backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app

from .helpers import Api, opener, raw_item, seed, settings_for

HOSTILE = {
    "itm_nan": '{"n": NaN}',
    "itm_inf": '{"n": [1, -Infinity]}',
    "itm_float": '{"n": 1e400}',
    "itm_int": '{"deep": {"n": ' + "9" * 400 + "}}",
}


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    settings = settings_for("", "embedded", tmp_path, backend="embedded",
                            embedded_path=tmp_path / "s.db")  # fmt: skip
    searcher = opener()(settings)
    try:
        tokens = seed(searcher)
    finally:
        searcher.backend.close()
    app = create_app(settings, opener=opener())
    with TestClient(app, raise_server_exceptions=False) as client:
        yield Api(client, app, settings, tokens)


def test_non_finite_numbers_are_rejected_per_item_and_answers_stay_json(api: Api) -> None:
    parts = ['{"id": "itm_fine", "workspace": "ws_main", "title": "Quokka fine",'
             ' "provenance": {"n": 12345678901234567890, "x": -1.5e300}}']  # fmt: skip
    for item_id, provenance in HOSTILE.items():
        parts.append(
            f'{{"id": "{item_id}", "workspace": "ws_main", "title": "Quokka {item_id}", '
            f'"provenance": {provenance}}}'
        )
    r = api.client.post(
        "/api/v1/items",
        params={"refresh": True},
        content="[" + ",".join(parts) + "]",
        headers={**api.auth("admin"), "Content-Type": "application/json"},
    )
    assert r.status_code == 207, r.text  # some rejected
    got = {o["id"]: o for o in r.json()["items"]}
    assert got["itm_fine"]["status"] == "indexed"
    for item_id in HOSTILE:
        assert got[item_id]["status"] == "rejected", got[item_id]
        assert got[item_id]["reason"].startswith("provenance:"), got[item_id]
        assert "finite" in got[item_id]["reason"]
    found = api.search("ana", q="quokka")
    assert [x["id"] for x in found["results"]] == ["itm_fine"]
    one = api.client.get("/api/v1/items/itm_fine", headers=api.auth("ana"))
    assert one.status_code == 200, one.text


def test_a_vector_is_not_an_item_field_over_http(api: Api) -> None:
    """Vectors come only through `suli index` lines; the route names the field it refuses."""
    body = [raw_item("itm_vec", "Quokka vector", vector=[1e300] * 384, vector_model="fake")]
    r = api.client.post("/api/v1/items", json=body, headers=api.auth("admin"))
    assert r.status_code == 207, r.text  # its one item rejected
    [out] = r.json()["items"]
    assert out["status"] == "rejected" and out["reason"].startswith("vector"), out


def test_a_body_with_an_integer_past_the_parser_limit_is_a_client_error(api: Api) -> None:
    body = (
        '[{"id": "itm_x", "workspace": "ws_main", "title": "x", "provenance": {"n": '
        + ("9" * 5000)
        + "}}]"
    )
    r = api.client.post(
        "/api/v1/items",
        content=body,
        headers={**api.auth("admin"), "Content-Type": "application/json"},
    )
    assert 400 <= r.status_code < 500, r.text
    assert r.json()["error"]
