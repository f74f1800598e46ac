"""Python 3.11-3.13: no upper pin, and CI checks 3.12/3.13 wheels and runs the unit tests on
another Python (.ci/wheels-check, called from .ci/run). The wheel holds the product only."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from setuptools import find_namespace_packages

ROOT = Path(__file__).parents[2]


def test_requires_python_has_no_upper_pin() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11"


def test_ci_checks_wheels_for_3_12_and_3_13() -> None:
    script = (ROOT / ".ci" / "wheels-check").read_text()
    assert "--only-binary=:all:" in script and "--python-version" in script
    assert "3.12 3.13" in script and "pytest -m unit" in script
    assert "\n.ci/wheels-check\n" in (ROOT / ".ci" / "run").read_text()
    assert (ROOT / ".ci" / "wheels-check").stat().st_mode & 0o111


def _packages() -> list[str]:
    """The packages the wheel gets, as setuptools finds them from pyproject's settings
    (`namespaces` is on by default there: find_namespace_packages)."""
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"][
        "find"
    ]
    return find_namespace_packages(
        str(ROOT), include=find["include"], exclude=find.get("exclude", ())
    )


def test_the_wheel_holds_the_product_and_no_bench_or_tests() -> None:
    packages = _packages()
    assert {"suli", "suli.backends", "app", "cli", "indexer", "devcluster", "mappings"} <= set(
        packages
    )
    assert [p for p in packages if p.split(".")[0] in {"bench", "tests"}] == []


def test_no_product_module_imports_bench() -> None:
    importers = []
    for package in ("suli", "app", "cli", "indexer", "devcluster", "mappings"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                if any(n == "bench" or n.startswith("bench.") for n in names):
                    importers.append(str(path.relative_to(ROOT)))
    assert importers == []
