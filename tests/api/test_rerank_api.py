"""The optional rerank stage over HTTP: MMR applied from Settings, its budget and its fallbacks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient
from opensearchpy import OpenSearch

from app.main import create_app
from suli.settings import Settings

from .helpers import ITEMS, Api, BrokenReranker, SlowReranker, World, drop, make_world, raw_item

# Three near-copies of one runbook and one distinct item that ranks below them on the query.
DUPS = (
    raw_item(
        "itm_dup1",
        "Rollback deploy procedure",
        "Steps to roll back a deploy procedure quickly.",
        outcome="approved",
    ),
    raw_item(
        "itm_dup2",
        "Rollback deploy procedure",
        "Steps to roll back a deploy procedure quickly!",
        outcome="approved",
    ),
    raw_item(
        "itm_dup3",
        "Rollback deploy procedure",
        "Steps to roll back a deploy procedure, quickly.",
        outcome="approved",
    ),
    raw_item(
        "itm_canary",
        "Canary deploy procedure",
        "Shift traffic slowly during a canary release.",
        outcome="approved",
    ),
)
QUERY = {"q": "rollback deploy procedure", "limit": 5}
DUP_IDS = {"itm_dup1", "itm_dup2", "itm_dup3"}


@pytest.fixture(scope="module")
def dup_world(
    opensearch_url: str, os_client: OpenSearch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    name = f"test-{uuid4().hex}"
    try:
        yield make_world(opensearch_url, name, tmp_path_factory.mktemp("home"), ITEMS + DUPS)
    finally:
        drop(os_client, name)


def ids(body: dict[str, Any]) -> list[str]:
    return [r["id"] for r in body["results"]]


def search(client: TestClient, world: World, who: str = "ana", **params: Any) -> dict[str, Any]:
    r = client.get(
        "/api/v1/search", params=params, headers={"Authorization": f"Bearer {world.tokens[who]}"}
    )
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def settings(world: World, tmp_path: Path, **overrides: Any) -> Settings:
    return Settings(**{**world.settings.model_dump(), "home": tmp_path, **overrides})


def test_mmr_from_settings_moves_near_duplicates_down(dup_world: World, tmp_path: Path) -> None:
    # The app's own opener: Settings.rerank="mmr" makes suli.core build the MMRReranker.
    with TestClient(create_app(settings(dup_world, tmp_path))) as plain:
        off = search(plain, dup_world, **QUERY)
    with TestClient(create_app(settings(dup_world, tmp_path, rerank="mmr"))) as diverse:
        mmr = search(diverse, dup_world, **QUERY)
        timed = search(diverse, dup_world, "admin", **QUERY)  # phases go to admins only
    assert off["rerank"] == "off"
    assert set(ids(off)[:3]) == DUP_IDS  # near-copies crowd the top without reranking
    assert mmr["rerank"] == "applied"
    assert "rerank" in timed["timings_ms"]
    assert ids(mmr)[0] == ids(off)[0]
    assert len(DUP_IDS & set(ids(mmr)[:3])) == 1  # one copy on top; the others give way
    assert ids(mmr).index("itm_canary") < ids(off).index("itm_canary")
    assert mmr["total"] == off["total"]  # the same matches, in another order


@pytest.mark.parametrize(
    ("reranker", "status"),
    [(SlowReranker(delay=0.5), "fallback-timeout"), (BrokenReranker(), "fallback-error")],
)
def test_a_slow_or_broken_reranker_falls_back_to_the_fused_order(
    make_api: Callable[..., Api], dup_world: World, reranker: Any, status: str
) -> None:
    plain = make_api(on=dup_world)
    api = make_api(on=dup_world, reranker=reranker, rerank="mmr", rerank_budget_s=0.1)
    body = api.search("ana", **QUERY)
    assert body["rerank"] == status
    assert ids(body) == ids(plain.search("ana", **QUERY))
    assert not body["degraded"]


def test_rerank_is_skipped_where_it_cannot_apply(
    make_api: Callable[..., Api], dup_world: World
) -> None:
    api = make_api(on=dup_world, reranker=SlowReranker(delay=0.0), rerank="mmr")
    assert api.search("ana", q="")["rerank"] == "skipped-browse"
    assert api.search("ana", q="canary")["rerank"] == "skipped-too-few-results"
    assert api.search("ana", q="rollback deploy procedure")["rerank"] == "applied"
