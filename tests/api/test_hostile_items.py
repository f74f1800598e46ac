"""Hostile items and ids over HTTP, on both backends (issue 14.3, 14.7, 14.8).

An over-deep or oversized provenance and a `javascript:` url are rejected per item with a
reason naming the field, the rest of the batch goes in, and no read answers 500 afterwards.
An empty or blank item id is a 422 naming `item_id` on every route that takes one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote
from uuid import uuid4

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from app.main import create_app
from cli.main import cli
from suli.models import Item
from suli.shown import OMITTED_PROVENANCE
from suli.validate import MAX_STRUCT_DEPTH

from .helpers import Api, assert_error_shape, drop, opener, raw_item, seed, settings_for


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"source": "deep"}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


@pytest.fixture(scope="module", params=["embedded", "opensearch"])
def api(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """A seeded store of either backend behind the app, one per module (seeding costs seconds);
    the tests use ids of their own."""
    home = tmp_path_factory.mktemp("hostile")
    name = f"test-{uuid4().hex}"
    os_client = None
    if request.param == "opensearch":
        url = request.getfixturevalue("opensearch_url")
        os_client = request.getfixturevalue("os_client")
        settings = settings_for(url, name, home)
    else:
        settings = settings_for("", name, home, backend="embedded", embedded_path=home / "s.db")
    try:
        searcher = opener()(settings)
        try:
            tokens = seed(searcher)
        finally:
            searcher.backend.close()
        app = create_app(settings, opener=opener())
        with TestClient(app, raise_server_exceptions=False) as client:
            yield Api(client, app, settings, tokens)
    finally:
        if os_client is not None:
            drop(os_client, name)


def test_deep_or_large_provenance_and_script_urls_are_rejected_per_item(api: Api) -> None:
    batch = [
        raw_item("itm_ok", "Kite deploy notes", "kite"),
        raw_item("itm_deep", "Kite deep", "kite", provenance=nested(300)),
        raw_item("itm_edge", "Kite edge", "kite", provenance=nested(MAX_STRUCT_DEPTH)),
        raw_item("itm_fat", "Kite fat", "kite", provenance={"blob": "x" * 70_000}),
        raw_item("itm_js", "Kite script", "kite", url="javascript:alert(document.cookie)"),
        raw_item("itm_data", "Kite data", "kite", url="data:text/html,<script>1</script>"),
    ]
    r = api.client.post(
        "/api/v1/items", params={"refresh": True}, json=batch, headers=api.auth("admin")
    )
    assert r.status_code == 207, r.text  # some rejected
    got = {o["id"]: o for o in r.json()["items"]}
    assert got["itm_ok"]["status"] == got["itm_edge"]["status"] == "indexed"
    for item_id, field in (
        ("itm_deep", "provenance"),
        ("itm_fat", "provenance"),
        ("itm_js", "url"),
        ("itm_data", "url"),
    ):
        assert got[item_id]["status"] == "rejected", got[item_id]
        assert got[item_id]["reason"].startswith(f"{field}:"), got[item_id]
    # Nothing of the rejected items is stored, and every read still answers.
    h = api.auth("ana")
    found = api.search("ana", q="kite")
    assert {x["id"] for x in found["results"]} == {"itm_ok", "itm_edge"}
    assert api.client.get("/api/v1/search", headers=h).status_code == 200  # browse
    assert api.client.get("/api/v1/items/itm_edge", headers=h).status_code == 200
    assert api.client.get("/api/v1/items/itm_deep", headers=h).status_code == 404
    assert all(x["url"].startswith("https://") for x in found["results"])


def test_a_body_nested_past_the_parser_limit_is_a_client_error(api: Api) -> None:
    body = '[{"id": "itm_x", "provenance": ' + "[" * 5000 + "]" * 5000 + "}]"
    r = api.client.post(
        "/api/v1/items",
        content=body,
        headers={**api.auth("admin"), "Content-Type": "application/json"},
    )
    # Refused while parsing (a 400 in the one error shape), never a 500 from a recursion error.
    assert_error_shape(r, 400, "bad_request")
    assert api.client.get("/api/v1/items/itm_x", headers=api.auth("ana")).status_code == 404


@pytest.mark.parametrize("item_id", ["", " ", "\t"])
def test_an_empty_item_id_is_422_naming_item_id(api: Api, item_id: str) -> None:
    h = api.auth("ana")
    r = api.client.post("/api/v1/related", json={"item_id": item_id}, headers=h)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "item_id"
    if item_id:  # an empty path segment is another route
        r = api.client.get(f"/api/v1/items/{quote(item_id)}", headers=h)
        assert r.status_code == 422 and r.json()["error"]["field"] == "item_id", r.text
        r = api.client.delete(f"/api/v1/items/{quote(item_id)}", headers=api.auth("admin"))
        assert r.status_code == 422 and r.json()["error"]["field"] == "item_id", r.text
    assert api.client.get("/api/v1/items/itm_rollback", headers=h).status_code == 200


# A quote, a backslash, NUL, another control character, a line separator, markup, an emoji.
HOSTILE = 'x"\\\x00\x1f\u2028</script>\U0001f600'


def _refuse(constant: str) -> None:
    raise AssertionError(f"not JSON: {constant}")


def test_rejected_reasons_are_json_safe(api: Api) -> None:
    """Reasons that echo hostile input (an id, an unknown field's name) arrive as strict JSON,
    every control character escaped, and decode to exactly what was sent."""
    r = api.client.post(
        "/api/v1/items",
        json=[
            raw_item(f"itm_a{HOSTILE}", "t"),
            raw_item("itm_js", "t", url="javascript:x"),
            raw_item("itm_u", "t", **{f"extra{HOSTILE}": 1}),
        ],
        headers=api.auth("admin"),
    )
    assert r.status_code == 207, r.text  # all rejected
    assert r.headers["content-type"].startswith("application/json")
    assert [b for b in r.content if b < 0x20] == []  # raw control bytes would break the JSON
    body = json.loads(r.content.decode("utf-8"), parse_constant=_refuse)
    assert (body["indexed"], body["rejected"]) == (0, 3)
    got = {o["index"]: (o["id"], o["status"], o["reason"]) for o in body["items"]}
    assert got[0][:2] == (f"itm_a{HOSTILE}", "rejected") and got[0][2].startswith("id: ")
    assert got[1][:2] == ("itm_js", "rejected") and got[1][2].startswith("url: ")
    assert got[2] == ("itm_u", "rejected", f"extra{HOSTILE}: unknown field")


def cli_env(api: Api) -> dict[str, str]:
    s = api.settings
    env = {"SULI_BACKEND": s.backend, "SULI_EMBEDDER": "fake", "SULI_HOME": str(s.home)}
    if s.backend == "opensearch":
        env |= {
            "SULI_OPENSEARCH_URL": str(s.opensearch_url),
            "SULI_INDEX_ALIAS": s.index_alias,
            "SULI_ACL_INDEX": s.acl_index,
        }
    else:
        env["SULI_EMBEDDED_PATH"] = str(s.sqlite_path)
    return env


@pytest.mark.parametrize(
    "args",
    [
        ["show", "", "--as", "prn_ana"],
        ["show", " ", "--as", "prn_ana"],
        ["delete", "", "-w", "acme"],
    ],
)
def test_the_cli_refuses_an_empty_id_in_one_line_with_exit_2(api: Api, args: list[str]) -> None:
    run = CliRunner().invoke(cli, args, env=cli_env(api))
    assert run.exit_code == 2, (run.output, run.exception)
    assert run.stderr.strip().count("\n") == 0 and "must not be empty" in run.stderr


def test_a_stored_over_deep_provenance_or_script_url_never_reaches_an_answer(api: Api) -> None:
    # Written around validation, as a store filled before the limits existed would hold it.
    emb = api.searcher.embedder
    old = Item(
        "itm_legacy",
        "ws_main",
        "Legacy zebra record",
        body="zebra",
        provenance=nested(300),
        url="javascript:alert(1)",
    )
    api.searcher.backend.upsert([(old, emb.embed_documents([old.embed_text()])[0])])
    api.searcher.backend.refresh()
    h = api.auth("ana")
    r = api.client.get("/api/v1/items/itm_legacy", headers=h)
    assert r.status_code == 200, r.text
    assert r.json()["provenance"] == OMITTED_PROVENANCE and r.json()["url"] == ""
    found = api.search("ana", q="zebra")
    assert [x["id"] for x in found["results"]] == ["itm_legacy"]
    assert found["results"][0]["provenance"] == OMITTED_PROVENANCE
    assert found["results"][0]["url"] == ""
    assert api.client.get("/api/v1/search", headers=h).status_code == 200
    r = api.client.post("/api/v1/related", json={"item_id": "itm_legacy"}, headers=h)
    assert r.status_code == 200, r.text
