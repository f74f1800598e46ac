"""/metrics (Prometheus text), /healthz and the OpenAPI document served at /docs."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from .helpers import Api


def samples(api: Api) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    r = api.client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def test_metrics_count_requests_latency_phases_and_rejections(api: Api) -> None:
    for _ in range(2):
        api.search("ana", q="deploy")
    api.client.get("/api/v1/items/itm_rollback", headers=api.auth("ana"))
    api.client.get("/api/v1/items/itm_nope", headers=api.auth("ana"))
    api.client.get("/api/v1/search")  # no token
    api.client.get("/api/v1/search", params={"limit": 0}, headers=api.auth("ana"))
    got = samples(api)

    def value(name: str, **labels: str) -> float:
        return got.get((name, frozenset(labels.items())), 0.0)

    search = {"route": "/api/v1/search", "method": "GET"}
    assert value("suli_http_requests_total", **search, status="200") == 2
    assert value("suli_http_requests_total", **search, status="401") == 1
    assert value("suli_http_requests_total", **search, status="422") == 1
    # Routes are labelled by template, not by raw path.
    item = {"route": "/api/v1/items/{item_id}", "method": "GET"}
    assert value("suli_http_requests_total", **item, status="200") == 1
    assert value("suli_http_requests_total", **item, status="404") == 1
    assert value("suli_http_request_duration_seconds_count", **search) == 4
    for phase in ("embed", "text_took", "vector_took", "fuse", "total"):
        assert value("suli_phase_duration_seconds_count", route="/api/v1/search", phase=phase) == 2
    assert value("suli_rejected_requests_total", code="unauthorized") == 1
    assert value("suli_rejected_requests_total", code="invalid_input") == 1
    assert value("suli_rejected_requests_total", code="not_found") == 1


def test_healthz_and_openapi_docs(api: Api) -> None:
    assert api.client.get("/healthz").json() == {"status": "ok"}
    assert api.client.get("/docs").status_code == 200
    spec = api.client.get("/openapi.json").json()
    paths = spec["paths"]
    for path, method in (
        ("/api/v1/search", "get"),
        ("/api/v1/search", "post"),
        ("/api/v1/related", "post"),
        ("/api/v1/items/{item_id}", "get"),
        ("/api/v1/items/{item_id}", "delete"),
        ("/api/v1/items", "post"),
        ("/api/v1/facets", "get"),
        ("/api/v1/boards/{board}", "put"),
        ("/api/v1/principals/{principal_id}", "put"),
        ("/healthz", "get"),
        ("/readyz", "get"),
        ("/metrics", "get"),
    ):
        assert method in paths[path], (path, method)
    search = paths["/api/v1/search"]["get"]
    assert {"401", "422", "429", "503", "504"} <= set(search["responses"])
    assert search["security"] == [{"HTTPBearer": []}]
    # No vector, ACL or uploader field is part of any read response schema.
    schemas = spec["components"]["schemas"]
    for name in ("SearchResponse", "Result", "Item", "FacetsResponse", "Explain"):
        props = set(schemas[name]["properties"])
        assert not props & {"vector", "uploader", "members", "groups", "acl"}, name
