"""A short schemathesis run in the suite (bench/fuzz_api.py runs >= 1,000 requests).

Valid and invalid requests generated from the service's own OpenAPI document: no 5xx, every
status documented, every body matching its documented schema, JSON where JSON is promised.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import hypothesis
import hypothesis.errors
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from .helpers import Api, World

pytestmark = pytest.mark.integration

EXAMPLES_PER_MODE = 5  # x 2 modes x 12 operations: about 100 requests
CHECKS = [status_code_conformance, content_type_conformance, response_schema_conformance]


def fuzz(
    op: Any, mode: GenerationMode, headers: dict[str, str], statuses: list[int], failures: list[str]
) -> None:
    """Send EXAMPLES_PER_MODE generated requests to one operation; collect, do not raise."""

    @hypothesis.seed(1)
    @hypothesis.settings(
        max_examples=EXAMPLES_PER_MODE,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],  # no shrinking: failures are collected
        suppress_health_check=list(HealthCheck),
    )
    @given(case=op.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        response = case.call(headers=headers)
        statuses.append(response.status_code)
        if response.status_code >= 500:
            failures.append(f"{response.status_code} {case.as_curl_command()}")
        try:
            case.validate_response(response, checks=CHECKS)
        except (Exception, BaseExceptionGroup) as e:  # schemathesis' FailureGroup is the latter
            failures.append(f"{op.label}: {str(e)[:500]}")

    with contextlib.suppress(hypothesis.errors.Unsatisfiable):  # no invalid input exists
        run()


def test_generated_requests_find_no_server_error_and_match_the_spec(
    make_api: Callable[..., Api], fresh_world: World
) -> None:
    api = make_api(on=fresh_world)
    schema = schemathesis.openapi.from_asgi("/openapi.json", api.app)
    failures: list[str] = []
    statuses: list[int] = []
    for result in schema.get_all_operations():
        op = result.ok()
        writes = op.method.upper() in ("PUT", "DELETE") or op.path == "/api/v1/items"
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzz(op, mode, api.auth("admin" if writes else "ana"), statuses, failures)
    assert len(statuses) >= 80
    assert failures == []
    assert {200, 422} <= set(statuses)
