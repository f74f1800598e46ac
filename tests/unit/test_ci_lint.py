"""CI lints before it tests, with `make lint`'s commands and exactly pinned linters."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT = ["ruff check .", "ruff format --check .", "mypy"]


def test_ci_runs_make_lints_commands_after_the_install_and_before_the_tests() -> None:
    run = (ROOT / ".ci" / "run").read_text()
    lines = [ln.strip() for ln in run.splitlines()]
    install = lines.index(".venv/bin/pip install -q -e '.[dev]'")
    tests = next(n for n, ln in enumerate(lines) if ln.startswith(".venv/bin/pytest"))
    at = [
        next(n for n, ln in enumerate(lines) if ln.startswith(f".venv/bin/{cmd} ||"))
        for cmd in LINT
    ]
    assert install < min(at) and max(at) < tests
    assert "set -euo pipefail" in run and "if ((lint_rc)); then" in run
    makefile = (ROOT / "Makefile").read_text()
    assert " && ".join(f"$(PY)/{cmd}" for cmd in LINT) in makefile


def test_ruff_and_mypy_are_pinned_exactly() -> None:
    with open(ROOT / "pyproject.toml", "rb") as f:
        dev = tomllib.load(f)["project"]["optional-dependencies"]["dev"]
    pins = {re.split(r"[=<>!~ ]", d, maxsplit=1)[0]: d for d in dev}
    assert re.fullmatch(r"ruff==\d+\.\d+\.\d+", pins["ruff"])
    assert re.fullmatch(r"mypy==\d+\.\d+\.\d+", pins["mypy"])
