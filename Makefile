# Developer loop. CI runs .ci/run, which ends with the same pytest command as `make test`.
PY := .venv/bin

.PHONY: venv test unit lint format bench-quality

venv:
	python3 -m venv .venv && $(PY)/pip install -e '.[dev]'

test:
	$(PY)/pytest

unit:
	$(PY)/pytest -m unit -q

# .ci/run runs these three commands right after installing, before any test.
lint:
	$(PY)/ruff check . && $(PY)/ruff format --check . && $(PY)/mypy

format:
	$(PY)/ruff format . && $(PY)/ruff check --fix .

bench-quality:
	$(PY)/python -m bench.quality --tune
