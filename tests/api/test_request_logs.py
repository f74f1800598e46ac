"""One log line per request an operator can ship: JSON fields, a request id echoed as a header,
the principal and degraded legs, and never a token or the caller's query text."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import pytest

from app.logs import JsonFormatter, TextFormatter
from app.server import logging_config

from .helpers import Api, FailingEmbedder

SECRET_WORDS = "zebraquartz deploy"


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "suli.request"]


def test_a_search_writes_one_json_line_with_its_fields(
    make_api: Callable[..., Api], caplog: pytest.LogCaptureFixture
) -> None:
    api = make_api()
    with caplog.at_level(logging.INFO, logger="suli.request"):
        r = api.client.get(
            "/api/v1/search",
            params={"q": SECRET_WORDS},
            headers={**api.auth("ana"), "X-Request-Id": "req-123"},
        )
    assert r.status_code == 200, r.text
    assert r.headers["x-request-id"] == "req-123"
    [record] = _lines(caplog)
    line = json.loads(JsonFormatter().format(record))
    assert line["request_id"] == "req-123"
    assert (line["method"], line["route"], line["status"]) == ("GET", "/api/v1/search", 200)
    assert line["principal"] == "prn_ana"
    assert line["degraded"] == []
    assert line["latency_ms"] > 0
    assert {"search", "total"} <= set(line["timings_ms"]), line["timings_ms"]  # the core's phases
    assert line["level"] == "INFO" and line["time"].endswith("+00:00")
    text = json.dumps(line) + TextFormatter().format(record)
    for secret in ("zebraquartz", api.tokens["ana"]):
        assert secret not in text


def test_a_degraded_search_says_which_leg(
    make_api: Callable[..., Api], caplog: pytest.LogCaptureFixture
) -> None:
    api = make_api(embedder=FailingEmbedder())
    with caplog.at_level(logging.INFO, logger="suli.request"):
        api.search("ana", q="deploy")
    [record] = _lines(caplog)
    assert record.degraded == ["vector"]  # type: ignore[attr-defined]


def test_an_unsane_request_id_is_replaced_and_a_refused_token_is_logged_without_it(
    make_api: Callable[..., Api], caplog: pytest.LogCaptureFixture
) -> None:
    api = make_api()
    with caplog.at_level(logging.INFO, logger="suli.request"):
        r = api.client.get(
            "/api/v1/search",
            params={"q": "deploy"},
            headers={"Authorization": "Bearer not-a-token-xyz", "X-Request-Id": "a b\nc"},
        )
    assert r.status_code == 401
    rid = r.headers["x-request-id"]
    assert len(rid) == 32 and rid.isalnum()
    [record] = _lines(caplog)
    assert (record.status, record.principal, record.request_id) == (401, None, rid)  # type: ignore[attr-defined]
    assert "not-a-token-xyz" not in JsonFormatter().format(record)


def test_the_serve_logging_config_picks_the_format_and_quiets_the_client() -> None:
    config = logging_config("info", "json")
    assert config["formatters"]["suli"]["()"] == "app.logs.JsonFormatter"
    assert logging_config("info")["formatters"]["suli"]["()"] == "app.logs.TextFormatter"
    assert config["loggers"]["opensearch"]["level"] == "WARNING"
    assert logging_config("debug", "json")["loggers"]["opensearch"]["level"] == "DEBUG"
    assert config["loggers"]["uvicorn.access"]["propagate"] is False  # raw query strings
