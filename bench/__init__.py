"""Benchmarks and quality evaluation (not tests), run from a checkout as `python -m bench.<name>`.

Not part of the product: the wheel leaves it out (pyproject's packages.find), the service image
does not copy it, and no product module imports it. The tests import it through pytest's
`pythonpath`. bench/README.md lists the suite.
"""
