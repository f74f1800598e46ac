"""Python 3.11-3.13: no upper pin, and CI checks 3.12/3.13 wheels and runs the unit tests on
another Python (.ci/wheels-check, called from .ci/run)."""

from __future__ import annotations

import tomllib
from pathlib import Path

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
