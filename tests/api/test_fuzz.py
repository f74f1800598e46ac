"""Schemathesis in the suite: >= 1,000 generated requests per backend over every operation.

Valid and invalid requests generated from the service's own OpenAPI document, on the embedded
store and on the real OpenSearch, in a time box: no 5xx at all (the backend is healthy), every
status documented, every 4xx the one JSON error shape, every body matching its documented
schema, JSON where JSON is promised. The loop is bench/fuzz_api.py's (which runs it against a
service under uvicorn, for longer runs); here the app is called in-process.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from uuid import uuid4

import pytest
import schemathesis
from fastapi.testclient import TestClient

from app.main import create_app
from bench import fuzz_api

REQUESTS = int(os.environ.get("SULI_FUZZ_REQUESTS", "1000"))  # per backend
TIME_BOX_S = float(os.environ.get("SULI_FUZZ_TIME_BOX_S", "300"))  # per backend


@pytest.mark.parametrize("backend", ["embedded", "opensearch"])
def test_generated_requests_find_no_server_error_and_match_the_spec(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if backend == "opensearch":  # a uuid-named index, deleted after the test
        url = request.getfixturevalue("opensearch_url")
        name = request.getfixturevalue("make_index_name")()
    else:
        url, name = "http://unused", f"fuzz-{uuid4().hex}"
    settings = fuzz_api.settings_for(backend, name, tmp_path, url)
    tokens = fuzz_api.seed(settings)
    app = create_app(settings)
    t0 = time.perf_counter()
    with TestClient(app):  # runs the app's lifespan (its searcher) for the whole fuzz run
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        ops = {r.ok().label for r in schema.get_all_operations()}
        tally = fuzz_api.fuzz_all(
            schema, tokens, REQUESTS, seed_=1, time_box_s=TIME_BOX_S, faults=frozenset()
        )
    elapsed = time.perf_counter() - t0
    summary = fuzz_api.report(tally, elapsed)
    print(summary)  # the per-operation counts and statuses, for the CI log (pytest -s / -rA)
    assert tally.failures == {}, summary
    assert tally.server_errors == 0, summary
    assert tally.sent >= REQUESTS, f"time box of {TIME_BOX_S:.0f}s spent\n{summary}"
    assert set(tally.by_op) == ops, summary  # every operation was called
    assert {200, 404, 422} <= set(tally.statuses), summary
