"""Faults over HTTP: degraded legs, deadlines (504), OpenSearch gone (503) and back again."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opensearchpy import OpenSearch

import app.runtime
from app.main import create_app

from .helpers import (
    Api,
    FailingEmbedder,
    SlowEmbedder,
    TcpProxy,
    World,
    assert_error_shape,
    opener,
)


def ids(body: dict[str, Any]) -> list[str]:
    return [r["id"] for r in body["results"]]


def test_a_failing_embedder_degrades_to_text_results(make_api: Callable[..., Api]) -> None:
    api = make_api(embedder=FailingEmbedder())
    body = api.search("ana", q="rollback guide", explain=True)
    assert ids(body)[0] == "itm_rollback"
    assert [d["leg"] for d in body["degraded"]] == ["vector"]
    assert "model crashed" in body["degraded"][0]["reason"]
    assert all(r["explain"]["vector_rank"] is None for r in body["results"])
    metrics = api.client.get("/metrics").text
    assert 'suli_degraded_responses_total{leg="vector"} 1.0' in metrics


def test_the_engines_highlight_limit_changes_no_snippet(
    make_api: Callable[..., Api], fresh_world: World, os_client: OpenSearch
) -> None:
    """Snippets are the core's (DESIGN 3.8): an index whose highlighter would refuse to
    analyse more than 5 characters of a field (it failed the page when the engine marked the
    words) answers the very same results and snippets, words marked."""
    api = make_api(on=fresh_world)
    before = api.search("ana", q="Deploy pipeline rollback guide")
    assert any("<mark>" in r["snippet"] for r in before["results"])
    os_client.indices.put_settings(
        index=fresh_world.settings.index_alias, body={"index": {"highlight.max_analyzed_offset": 5}}
    )
    body = api.search("ana", q="Deploy pipeline rollback guide", explain=True)
    assert body["degraded"] == [] and ids(body) == ids(before)
    assert body["total"] == before["total"]
    assert [r["snippet"] for r in body["results"]] == [r["snippet"] for r in before["results"]]


def test_a_leg_with_failed_shards_keeps_the_answering_shards_and_says_so(
    make_api: Callable[..., Api], fresh_world: World, os_client: OpenSearch
) -> None:
    api = make_api(on=fresh_world)
    before = api.search("ana", q="rollback guide")
    # A real partial failure: a second index under the alias (a botched migration) whose
    # `vector` field is a keyword, so its shard refuses the k-NN query while the real one answers.
    alias = fresh_world.settings.index_alias
    os_client.indices.create(
        index=f"{alias}-broken", body={"mappings": {"properties": {"vector": {"type": "keyword"}}}}
    )
    os_client.indices.put_alias(index=f"{alias}-broken", name=alias)
    body = api.search("ana", q="rollback guide", explain=True)
    assert [d["leg"] for d in body["degraded"]] == ["vector"]
    assert body["degraded"][0]["reason"].startswith("1 of 2 shards failed")
    # The answering shard's vector hits still count: the same results as before the fault.
    assert ids(body) == ids(before)
    assert any(r["explain"]["vector_rank"] is not None for r in body["results"])


def test_a_tiny_deadline_is_504(make_api: Callable[..., Api]) -> None:
    api = make_api(deadline_s=0.001)
    r = api.client.get("/api/v1/search", params={"q": "deploy"}, headers=api.auth("ana"))
    err = assert_error_shape(r, 504, "deadline_exceeded")
    assert "deadline" in err["message"]


def test_a_slow_embedder_is_cut_at_the_deadline_and_its_work_stops(
    make_api: Callable[..., Api],
) -> None:
    slow = SlowEmbedder(delay=3.0)
    api = make_api(embedder=slow, deadline_s=1.0)
    searches: list[object] = []
    backend = api.searcher.backend
    real_search = backend.search
    backend.search = lambda q: searches.append(q) or real_search(q)  # type: ignore[method-assign]
    # The core call the route abandons at the deadline: we wait for its end, not for a while.
    entered, ended = threading.Event(), threading.Event()
    # GET's core call: `search` for a token first seen (looked up on its own before), then
    # `search_by_token` (the token read with the legs).
    for name in ("search", "search_by_token"):
        real_core = getattr(api.searcher, name)

        def core_search(*args: Any, _real: Any = real_core, **kw: Any) -> Any:
            entered.set()
            try:
                return _real(*args, **kw)
            finally:
                ended.set()

        setattr(api.searcher, name, core_search)
    r = api.client.get("/api/v1/search", params={"q": "deploy"}, headers=api.auth("ana"))
    assert_error_shape(r, 504, "deadline_exceeded")
    assert entered.is_set(), "the core search never started: nothing was cut"
    # Longer than the embedder takes: a core that waited for the model and searched would end.
    assert ended.wait(30), "the abandoned core search is still running"
    # The abandoned thread checks the same deadline after embedding: no OpenSearch search runs.
    assert searches == []


def _dead_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens here any more
    return port


def test_unreachable_opensearch_is_503_and_healthz_stays_up(world: World) -> None:
    settings = world.settings.model_copy(
        update={"opensearch_url": f"http://127.0.0.1:{_dead_port()}"}
    )
    with TestClient(create_app(settings, opener=opener()), raise_server_exceptions=False) as client:
        assert client.get("/healthz").status_code == 200
        assert_error_shape(client.get("/readyz"), 503, "backend_unavailable")
        r = client.get("/api/v1/search", params={"q": "x"}, headers={"Authorization": "Bearer t"})
        err = assert_error_shape(r, 503, "backend_unavailable")
        assert "backend is unavailable" in err["message"]
        assert "127.0.0.1" not in err["message"]  # never the internal URL


@pytest.fixture
def proxy(opensearch_url: str) -> Iterator[TcpProxy]:
    p = TcpProxy(opensearch_url)
    p.start()
    yield p
    p.stop()


def test_the_service_recovers_by_itself_when_opensearch_returns(
    world: World, proxy: TcpProxy
) -> None:
    settings = world.settings.model_copy(update={"opensearch_url": proxy.url})
    auth = {"Authorization": f"Bearer {world.tokens['ana']}"}
    with TestClient(create_app(settings, opener=opener()), raise_server_exceptions=False) as client:
        assert client.get("/api/v1/search", params={"q": "deploy"}, headers=auth).status_code == 200
        assert client.get("/readyz").status_code == 200

        proxy.stop()
        for _ in range(3):
            r = client.get("/api/v1/search", params={"q": "deploy"}, headers=auth)
            assert_error_shape(r, 503, "backend_unavailable")
        assert_error_shape(client.get("/readyz"), 503, "backend_unavailable")

        proxy.start()  # same app, no restart
        r = client.get("/api/v1/search", params={"q": "deploy"}, headers=auth)
        assert r.status_code == 200, r.text
        assert "itm_rollback" in ids(r.json())
        assert client.get("/readyz").status_code == 200


def test_a_service_started_while_opensearch_is_down_connects_later(
    world: World, proxy: TcpProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app.runtime, "RECONNECT_EVERY_S", 0.0)
    proxy.stop()
    settings = world.settings.model_copy(update={"opensearch_url": proxy.url})
    auth = {"Authorization": f"Bearer {world.tokens['bob']}"}
    with TestClient(create_app(settings, opener=opener()), raise_server_exceptions=False) as client:
        assert_error_shape(client.get("/api/v1/facets", headers=auth), 503, "backend_unavailable")
        assert_error_shape(client.get("/readyz"), 503, "backend_unavailable")
        proxy.start()
        assert client.get("/readyz").status_code == 200
        assert client.get("/api/v1/facets", headers=auth).json()["total"] == 4


def test_readyz_is_503_when_the_alias_is_gone(
    make_api: Callable[..., Api], fresh_world: World, os_client: OpenSearch
) -> None:
    api = make_api(on=fresh_world)
    ready = api.client.get("/readyz")
    assert ready.status_code == 200
    alias = fresh_world.settings.index_alias
    [physical] = os_client.indices.get_alias(name=alias)
    os_client.indices.delete_alias(index=physical, name=alias)
    err = assert_error_shape(api.client.get("/readyz"), 503, "backend_unavailable")
    assert err["message"] == "not ready: the items index is missing"
    assert alias not in err["message"]  # tokenless: no internals, the log has the name
    os_client.indices.put_alias(index=physical, name=alias)
    assert api.client.get("/readyz").status_code == 200


def test_readyz_is_503_when_the_index_holds_another_models_vectors(
    make_api: Callable[..., Api], fresh_world: World, os_client: OpenSearch
) -> None:
    api = make_api(on=fresh_world)
    assert api.client.get("/readyz").status_code == 200
    [index] = os_client.indices.get_alias(name=fresh_world.settings.index_alias)
    # What `suli reindex --model` leaves behind for a service that was not restarted.
    meta = os_client.indices.get_mapping(index=index)[index]["mappings"]["_meta"]
    assert meta["model"] == api.searcher.embedder.name
    os_client.indices.put_mapping(index=index, body={"_meta": {**meta, "model": "other"}})
    err = assert_error_shape(api.client.get("/readyz"), 503, "backend_unavailable")
    assert "another embedding model" in err["message"]
    assert "'other'" not in err["message"] and index not in err["message"]
