"""Benchmarks and quality evaluation (not tests), run as `python -m bench.<name>`.

A development package: an editable install (`pip install -e '.[dev]'`) makes it importable,
so tests import it like any other package; the service image does not copy it.
"""
