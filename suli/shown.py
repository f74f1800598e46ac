"""What answers show of stored values: checked again on the way out.

A value stored before a validation rule existed (or written around validation) must not break
an answer or hand a client something validation now refuses.
"""

from __future__ import annotations

from typing import Any

from suli.validate import MAX_STRUCT_BYTES, MAX_STRUCT_DEPTH, check_structure, check_url

OMITTED_PROVENANCE = {"omitted": "stored provenance exceeds the depth or size limit"}


def shown_provenance(value: dict[str, Any]) -> dict[str, Any]:
    """Provenance as answers carry it: one stored before the limits existed (or written
    around validation) is replaced by a note, so it cannot break an answer's serialization."""
    if not value:
        return value
    try:
        check_structure(value, MAX_STRUCT_DEPTH, MAX_STRUCT_BYTES)
    except ValueError:
        return dict(OMITTED_PROVENANCE)
    return value


def shown_url(url: str) -> str:
    """An item's link as answers carry it: "" for one stored before the scheme rule existed,
    so no page or client is handed a javascript: or data: link to open."""
    try:
        check_url(url)
    except ValueError:
        return ""
    return url
