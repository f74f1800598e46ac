"""Vectors an item line brings (`vector` + `vector_model`): checked, then scaled to unit length."""

from __future__ import annotations

import math
from typing import Any

from suli.errors import InvalidInput

__all__ = ["finite", "supplied_vector"]


def finite(x: int | float) -> bool:
    try:
        return math.isfinite(x)
    except OverflowError:  # an int too large for a float
        return False


def _short(value: Any, limit: int = 80) -> str:
    """repr(value) cut to limit characters: a reason quotes what a line said, never a megabyte."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def supplied_vector(vector: Any, line_model: Any, model: str, dimension: int) -> list[float]:
    """A vector an item line brings (`vector`, made by `vector_model`), scaled to unit length,
    or InvalidInput naming the field.

    Unit length because every similarity is a dot product of unit vectors: a longer vector
    would multiply its item's similarity past the meaning floor for any query. A zero vector
    has no direction; NaN, infinities and numbers beyond the float range have no length."""
    if line_model != model:
        raise InvalidInput(
            f"vector_model: vectors here come from {model!r}, the line says {_short(line_model)}",
            "vector_model",
        )
    if not isinstance(vector, list) or not all(
        isinstance(x, int | float) and not isinstance(x, bool) for x in vector
    ):
        raise InvalidInput("vector: must be a list of numbers", "vector")
    if len(vector) != dimension:
        raise InvalidInput(f"vector: expected {dimension} dimensions, got {len(vector)}", "vector")
    if not all(finite(x) for x in vector):
        raise InvalidInput("vector: values must be finite numbers within the float range", "vector")
    values = [float(x) for x in vector]
    # Scaled by the largest value first, so squaring neither overflows (1e300) nor
    # underflows to zero (1e-300): the direction is kept for any finite vector.
    scale = max(abs(x) for x in values) if values else 0.0
    if scale == 0.0:
        raise InvalidInput("vector: all zeros (a zero vector has no direction)", "vector")
    scaled = [x / scale for x in values]
    norm = math.sqrt(math.fsum(x * x for x in scaled))
    return [x / norm for x in scaled]
