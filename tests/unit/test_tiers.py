"""Tier markers follow folders: `pytest -m unit` selects exactly tests/unit, which needs no service.

The whole suite is collected (not run) in a fresh interpreter, with `-m unit` as `make unit` and
CI's other-Python run pass it, and every test's marks and fixtures are read back from there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# The folders of tests/ and the marker each one means (README "Developing", pyproject markers).
TIERS = {"unit", "contract", "integration", "api", "cluster", "e2e"}

# Runs in the child: pytest's own collection, the conftest hooks included, reported as JSON.
COLLECT = """
import json, sys
import pytest

class Report:
    def __init__(self):
        self.tests = []

    def _add(self, items, selected):
        for item in items:
            self.tests.append({
                "path": str(item.path),
                "nodeid": item.nodeid,
                "selected": selected,
                "marks": sorted({m.name for m in item.iter_markers()}),
                "fixtures": sorted(getattr(item, "fixturenames", ())),
            })

    def pytest_deselected(self, items):
        self._add(items, False)

    def pytest_collection_finish(self, session):
        self._add(session.items, True)

report = Report()
code = pytest.main(
    ["--collect-only", "-q", "-m", "unit", "-p", "no:cacheprovider", "tests"], plugins=[report]
)
with open(sys.argv[1], "w") as out:
    json.dump({"code": int(code), "tests": report.tests}, out)
"""

# What "a service" means here: the fixtures that reach or start an OpenSearch node or redis.
SERVICE_FIXTURES = {"opensearch_url", "three_node_cluster", "neural_search_cluster", "redis_url"}


@pytest.fixture(scope="module")
def tests(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, object]]:
    """Every collected test: path, nodeid, selected by `-m unit`, marker names, fixture names."""
    out = tmp_path_factory.mktemp("collect") / "collected.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        [sys.executable, "-c", COLLECT, str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["code"] == 0, done.stdout[-3000:]
    tests: list[dict[str, object]] = report["tests"]
    return tests


def _folder(test: dict[str, object]) -> str:
    return Path(str(test["path"])).relative_to(REPO / "tests").parts[0]


def test_every_test_carries_its_folders_tier_and_no_other(tests: list[dict[str, object]]) -> None:
    assert {_folder(t) for t in tests} == TIERS  # each tier has tests; no folder is without one
    wrong = {}
    for t in tests:
        tiers = sorted(TIERS & set(t["marks"]))  # type: ignore[call-overload]
        if tiers != [_folder(t)]:
            wrong[str(t["nodeid"])] = tiers
    assert wrong == {}


def test_minus_m_unit_selects_exactly_tests_unit_and_those_need_no_service(
    tests: list[dict[str, object]],
) -> None:
    in_unit = {str(t["nodeid"]) for t in tests if _folder(t) == "unit"}
    selected = {str(t["nodeid"]) for t in tests if t["selected"]}
    assert in_unit and selected == in_unit
    # The data-loss guarantee of the indexer is a unit test: it must run under `-m unit`.
    assert any("test_every_line_ends_indexed_or_rejected_with_its_line" in n for n in selected)
    needing = {
        str(t["nodeid"]): sorted(SERVICE_FIXTURES & set(t["fixtures"]))  # type: ignore[call-overload]
        for t in tests
        if t["selected"]
    }
    assert {n: f for n, f in needing.items() if f} == {}


def test_tier_of_reads_the_first_folder_under_tests(request: pytest.FixtureRequest) -> None:
    # The root conftest as pytest loaded it (a plain import could find another conftest.py).
    root = request.config.pluginmanager.get_plugin(str(REPO / "tests" / "conftest.py"))
    tier_of: Callable[[Path], str | None] = root.tier_of
    tests = REPO / "tests"
    assert tier_of(tests / "unit" / "test_x.py") == "unit"
    assert tier_of(tests / "api" / "sub" / "test_x.py") == "api"
    assert tier_of(tests / "test_top_level.py") is None
    assert tier_of(tests / "golden" / "test_x.py") is None
    assert tier_of(REPO / "bench" / "test_x.py") is None
