"""The JSON Schemas `suli schema` prints: one item line, one principal, one board ACL.

Generated from the validator's own models (suli.validate), so the schema and the validator
cannot drift apart; the item schema adds the two fields the line reader takes before
validation (`vector`, `vector_model`), whose rules depend on the configured model.
"""

from __future__ import annotations

from typing import Any

from suli.settings import Settings

DRAFT = "https://json-schema.org/draft/2020-12/schema"
TRIMMED = (
    "Strings are trimmed of surrounding spaces before these rules apply (the schema is the "
    "stricter: it refuses the spaces)."
)


def expected_model(settings: Settings) -> tuple[str, int]:
    """The configured model's name and dimension, without loading it."""
    from suli.embedding import FakeEmbedder, MiniLMEmbedder

    if settings.embedder == "fake":
        fake = FakeEmbedder()
        return fake.name, fake.dimension
    return MiniLMEmbedder.name, MiniLMEmbedder.dimension


def item_schema(model: str, dimension: int) -> dict[str, Any]:
    """One `suli index` line: the validator's item rules, plus a line's own vector."""
    from suli.validate import item_json_schema

    schema = item_json_schema()
    schema["properties"] = {
        **schema["properties"],
        "vector": {
            "title": "Vector",
            "description": f"The item's own embedding, made by {model}: {dimension} finite "
            "numbers, not all zero (stored scaled to unit length). Needs vector_model. "
            "Taken by `suli index` only, not by POST /api/v1/items.",
            "type": "array",
            "items": {"type": "number"},
            "minItems": dimension,
            "maxItems": dimension,
            "not": {"items": {"const": 0}},
        },
        "vector_model": {
            "title": "Vector model",
            "description": "The model that made `vector`: the store's own model.",
            "const": model,
        },
    }
    schema["dependentRequired"] = {"vector": ["vector_model"], "vector_model": ["vector"]}
    schema["description"] = (
        f"{schema['description']} Also: vector numbers finite (JSON has no NaN; Python's "
        f"reader would take one and the indexer refuses it). {TRIMMED}"
    )
    return schema


def principal_schema() -> dict[str, Any]:
    """One principal of `suli principal load` (a file holds a JSON array or JSON lines)."""
    from pydantic import TypeAdapter

    from suli.validate import PrincipalIn

    return {
        "$schema": DRAFT,
        "$id": "https://suli.dev/schema/principal.json",
        **TypeAdapter(PrincipalIn).json_schema(mode="validation"),
        "title": "Suli principal",
        "description": "A person or an agent of one workspace, with its groups; `suli "
        "principal load FILE` takes a JSON array of these or one per line. " + TRIMMED,
    }


def board_schema() -> dict[str, Any]:
    """One board ACL of `suli acl load` (a file holds a JSON array or JSON lines)."""
    from pydantic import TypeAdapter

    from suli.validate import BoardAclIn

    return {
        "$schema": DRAFT,
        "$id": "https://suli.dev/schema/board.json",
        **TypeAdapter(BoardAclIn).json_schema(mode="validation"),
        "title": "Suli board ACL",
        "description": "Who sees a board's items: its members (principal ids) and the members "
        "of its groups; `suli acl load FILE` takes a JSON array of these or one per line. "
        + TRIMMED,
    }
